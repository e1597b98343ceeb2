"""What the API server and the JobSet webhook would refuse is refused before any I/O, as a SpecError naming
the field; and nothing but a SpecError ever escapes from building a spec, whatever is thrown at it."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import threading

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobset_core import (
    Coordinator,
    Coscheduling,
    GangJobSpec,
    JobSetSpec,
    Kueue,
    ReplicatedJob,
    RetryPolicy,
    SpecError,
    SuccessPolicy,
    Volcano,
)
from jobset_core.model import podschema
from jobset_core.model.spec import Network
from tests.schemas import validate_any

IMAGE = "ghcr.io/acme/train:1"
CMD = ["python", "train.py"]


def rj(**kwargs) -> ReplicatedJob:
    return ReplicatedJob(**{"name": "w", "image": IMAGE, "command": CMD, **kwargs})


def js(**kwargs) -> JobSetSpec:
    return JobSetSpec(**{"name": "t", "replicated_jobs": [rj()], **kwargs})


def gj(**kwargs) -> GangJobSpec:
    return GangJobSpec(**{"name": "g", "image": IMAGE, "command": CMD, "pods": 2, **kwargs})


REFUSED = [
    # resource names and quantities
    (lambda: js(replicated_jobs=[rj(resources={"gpu": 1})]), "replicated_jobs[0].resources.requests['gpu']: 'gpu' is not a standard resource name"),
    (lambda: js(replicated_jobs=[rj(resources={"memroy": "1Gi"})]), "'memroy' is not a standard resource name"),
    (lambda: js(replicated_jobs=[rj(resources={"CPU": 1})]), "'CPU' is not a standard resource name"),
    (lambda: js(replicated_jobs=[rj(resources={"": 1})]), "'' is not a resource name"),
    (lambda: js(replicated_jobs=[rj(resources={"kubernetes.io/gpu": 1})]), "is in the reserved kubernetes.io domain"),
    (lambda: js(replicated_jobs=[rj(resources={"nvidia.com/gpu": 0.5})]), "'0.5' is not a whole number"),
    (lambda: js(replicated_jobs=[rj(resources={"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}})]), "nvidia.com/gpu cannot be overcommitted"),
    (lambda: js(replicated_jobs=[rj(resources={"requests": {"nvidia.com/gpu": 1}})]), "nvidia.com/gpu cannot be overcommitted"),
    (lambda: js(replicated_jobs=[rj(resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}})]), "requests['cpu']: '2' is more than the limit '1500m'"),
    (lambda: js(replicated_jobs=[rj(resources={"requests": {"memory": "1Gi"}, "limits": {"memory": "1000Mi"}})]), "'1Gi' is more than the limit '1000Mi'"),
    (lambda: js(replicated_jobs=[rj(resources={"cpu": float("nan")})]), "nan is not a finite number"),
    (lambda: js(replicated_jobs=[rj(resources={"cpu": float("inf")})]), "inf is not a finite number"),
    # labels, annotations, selectors
    (lambda: js(labels={"-bad/x": "v"}), "labels['-bad/x']: '-bad/x' has prefix '-bad'"),
    (lambda: js(labels={"a b": "v"}), "labels['a b']: 'a b' is not a qualified name"),
    (lambda: js(labels={"x" * 64: "v"}), "is not a qualified name"),
    (lambda: js(labels={("p" * 254) + "/x": "v"}), "which is not a DNS-1123 subdomain"),
    (lambda: js(annotations={"bad key": "v"}), "annotations['bad key']: 'bad key' is not a qualified name"),
    (lambda: js(annotations={"big": "x" * 300_000}), "annotations: the annotations take 300003 bytes, more than the 262144"),
    (lambda: js(replicated_jobs=[rj(node_selector={"pool": "a b"})]), "replicated_jobs[0].node_selector['pool']: value 'a b' is not a valid label value"),
    (lambda: js(replicated_jobs=[rj(pod_template={"spec": {"nodeSelector": {"pool": "x" * 64}, "containers": []}})]), "pod_template.spec.nodeSelector['pool']: value"),
    (lambda: js(replicated_jobs=[rj(tolerations=[{"key": "gpu", "operator": "In"}])]), "replicated_jobs[0].tolerations[0].operator: 'In' is not Exists or Equal"),
    (lambda: js(replicated_jobs=[rj(tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoRun"}])]), "tolerations[0].effect: 'NoRun' is not a taint effect"),
    (lambda: js(replicated_jobs=[rj(tolerations={"key": "gpu"})]), "tolerations: must be a list of toleration dicts"),
    (lambda: js(replicated_jobs=[rj(pod_template={"spec": {"schedulerName": "My Scheduler", "containers": []}})]), "pod_template.spec.schedulerName: 'My Scheduler' is not a valid DNS-1123 subdomain"),
    # int32 bounds
    (lambda: js(replicated_jobs=[rj(replicas=2**31)]), "replicated_jobs[0].replicas: 2147483648 is more than 2147483647"),
    (lambda: js(replicated_jobs=[rj(parallelism=2**31, completions=2**31)]), "parallelism: 2147483648 is more than"),
    (lambda: js(ttl_seconds_after_finished=2**40), "ttl_seconds_after_finished: 1099511627776 is more than"),
    (lambda: js(retry=RetryPolicy(retries=2**31)), "retry.retries: 2147483648 is not an integer from 0 to 2147483647"),
    (lambda: gj(pods=2**31), "pods: 2147483648 is more than"),
    (lambda: gj(active_deadline_seconds=2**31), "active_deadline_seconds: 2147483648 is more than"),
    # env
    (lambda: js(replicated_jobs=[rj(env={"A=B": "x"})]), "env var name 'A=B' is not valid"),
    (lambda: js(replicated_jobs=[rj(env={"": "x"})]), "env var name '' is not valid"),
    (lambda: js(replicated_jobs=[rj(env={"A": None})]), "replicated_jobs[0].env['A']: None is not an env var value"),
    (lambda: js(replicated_jobs=[rj(env=[{"name": "A", "value": None}])]), "env[0].value: None is not an env var value"),
    # wrong types
    (lambda: js(replicated_jobs=[rj(image=5)]), "replicated_jobs[0].image: must be a non-empty string, got 5"),
    (lambda: js(suspend="yes"), "suspend: must be True or False, got 'yes'"),
    (lambda: gj(suspend="yes"), "suspend: must be True or False, got 'yes'"),
    (lambda: js(retry=RetryPolicy(retry_on=None)), "retry.retry_on: must be a list, got None"),
    (lambda: js(retry=RetryPolicy(retryable_exit_codes=75)), "retry.retryable_exit_codes: must be a list, got 75"),
    (lambda: js(network="x"), "network: 'x' is not a Network"),
    (lambda: js(replicated_jobs=[rj(command=5)]), "replicated_jobs[0].command: must be a list of strings, got 5"),
    (lambda: js(replicated_jobs=[rj(pod_template={"spec": {"containers": [{"image": IMAGE}]}})]), "replicated_jobs[0].pod_template.spec.containers[0].name: is missing"),
    (lambda: js(replicated_jobs=[rj(pod_template={"spec": {"nodeSelecter": {"a": "b"}}})]), "replicated_jobs[0].pod_template.spec: the Kubernetes pod template schema refuses it"),
    (lambda: js(replicated_jobs=[rj(pod_template={"spec": {"containers": [{"name": "main", "resource": {}}]}})]), "pod_template.spec.containers.0: the Kubernetes pod template schema refuses it"),
    (lambda: js(replicated_jobs=[rj(pod_template=42)]), "replicated_jobs[0].pod_template: must be a pod template"),
    (lambda: js(replicated_jobs=[rj(pod_template=object())]), "replicated_jobs[0].pod_template: expected a dict or a kubernetes model"),
    (lambda: js(coordinator=Coordinator("w", job_index="0")), "coordinator.job_index: must be an integer >= 0, got '0'"),
    (lambda: js(success_policy=SuccessPolicy(target_replicated_jobs="w")), "success_policy.target_replicated_jobs: must be a list"),
    (lambda: js(replicated_jobs="w"), "replicated_jobs: must be a list of ReplicatedJob, got 'w'"),
    (lambda: js(replicated_jobs=(r for r in ())), "replicated_jobs: is empty"),
    # hostname length counts completion indexes, not the pods running at once
    (lambda: JobSetSpec(name="n" * 50, replicated_jobs=[rj(name="w", parallelism=1, completions=10**9)]), "replicated_jobs[0].name: the longest pod hostname JobSet derives"),
]


@pytest.mark.parametrize("build,message", REFUSED, ids=[m[:50] for _, m in REFUSED])
def test_refused_with_a_spec_error_naming_the_field(build, message):
    with pytest.raises(SpecError) as info:
        build().manifests()
    assert message in str(info.value)
    assert str(info.value).startswith(info.value.field)


ACCEPTED = [
    lambda: js(replicated_jobs=[rj(resources={"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi", "hugepages-2Mi": "1Gi", "nvidia.com/gpu": 8})]),
    lambda: js(replicated_jobs=[rj(resources={"requests": {"cpu": "1", "memory": "1000Mi"}, "limits": {"cpu": 2, "memory": "1Gi"}})]),
    lambda: js(labels={"example.com/team": "ml", "app.kubernetes.io/name": "x"}, annotations={"Example.com/Note": "any text at all"}),
    lambda: js(replicated_jobs=[rj(tolerations=[{"operator": "Exists"}, {"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}])]),
    lambda: js(replicated_jobs=[rj(env={"my.var-1": "x", "N": 3})]),
    lambda: js(replicated_jobs=[rj(pod_template={"spec": {"schedulerName": "my-scheduler.example.com", "containers": [{"name": "main"}, {"name": "sidecar", "image": IMAGE}]}})]),
]


@pytest.mark.parametrize("build", ACCEPTED)
def test_what_the_api_server_accepts_is_accepted(build):
    for manifest in build().manifests():
        validate_any(manifest)


def test_a_generator_of_replicated_jobs_is_kept():
    spec = JobSetSpec(name="t", replicated_jobs=(rj(name=n) for n in ("a", "b")))
    assert [r["name"] for r in spec.to_manifest()["spec"]["replicatedJobs"]] == ["a", "b"]
    assert len(spec.manifests()[-1]["spec"]["replicatedJobs"]) == 2, "read twice, still two"


def test_hostname_length_is_checked_on_the_last_completion_index():
    # 63 characters with index 9 (completions 10), 62 with index 4 (parallelism 5): only the first is legal.
    name = "n" * (63 - len("-w-0-9"))
    JobSetSpec(name=name, replicated_jobs=[rj(parallelism=5, completions=10)]).to_manifest()
    with pytest.raises(SpecError, match="longest pod hostname"):
        JobSetSpec(name=name, replicated_jobs=[rj(parallelism=5, completions=100)]).to_manifest()


# ----------------------------------------------------------------------------------------------------
# the pod template schema, its $refs inlined once, refuses exactly what the published schema refuses

SCHEMA_VERSIONS = [podschema.SCHEMA_VERSION, podschema.LEGACY_SCHEMA_VERSION]
MAIN = {"name": "main", "image": IMAGE}
BROKEN_TEMPLATES = [
    {"spec": {"nodeSelecter": {"a": "b"}, "containers": [MAIN]}},
    {"spec": {"containers": [{**MAIN, "resource": {}}]}},
    {"spec": {"containers": [{"image": IMAGE}]}},
    {"spec": {"containers": "main"}},
    {"spec": {"containers": [{**MAIN, "ports": [{"containerPort": "80"}]}]}},
    {"spec": {"containers": [{**MAIN, "livenessProbe": {"httpGet": {"port": 1.5}}}]}},
    {"spec": {"containers": [MAIN], "volumes": [{"name": "v", "emptyDir": {"sizeLimit": []}}]}},
    {"spec": {"containers": [MAIN], "tolerations": [{"key": "a", "tolerationSeconds": "3"}]}},
    {"spec": {"containers": [MAIN], "workloadRef": {"name": 3}}},
    {"metadata": {"labels": {"a": 1}, "nam": "x"}, "spec": {"containers": [MAIN]}},
]
SOUND_TEMPLATE = {
    "metadata": {"labels": {"a": "b"}},
    "spec": {
        "containers": [{**MAIN, "ports": [{"containerPort": 80}], "livenessProbe": {"httpGet": {"port": "http"}}}],
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1Gi"}}],
    },
}


def _schema_errors(validator, template) -> list[str]:
    return sorted(repr((e.message, list(e.absolute_path), e.validator)) for e in validator.iter_errors(template))


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
@pytest.mark.parametrize("template", [SOUND_TEMPLATE, *BROKEN_TEMPLATES])
def test_inlined_pod_schema_refuses_what_the_published_one_refuses(version, template):
    inlined, published = podschema._validator(version), podschema._reference_validator(version)
    assert inlined is not published, "the shipped schema files are inlined, not left to the registry"
    assert _schema_errors(inlined, template) == _schema_errors(published, template)
    assert _best_error(inlined, template) == _best_error(published, template)


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_definitions_decoded_one_at_a_time_are_the_whole_files(version):
    # the validator decodes only the definitions a pod template reaches; each must be what the file says
    text = podschema._schema_folder(version).joinpath("_definitions.json").read_text()
    whole = json.loads(text)["$defs"]
    lazy = podschema._LazyDefinitions(text)
    assert sorted(lazy) == sorted(whole)
    assert all(lazy[name] == whole[name] for name in whole)
    root = podschema._schema_file(version, "podtemplatespec-v1.json")
    assert podschema._Inliner({"$defs": lazy}).schema(root, "root") == podschema._Inliner({"$defs": whole}).schema(root, "root")


@pytest.mark.parametrize("text", ['{"definitions": {}}', '{"$defs": {"A": {', '{"$defs": {"A" {}}}', "[]"])
def test_definitions_of_another_shape_are_refused_for_the_whole_decode(text):
    with pytest.raises(ValueError):
        podschema._LazyDefinitions(text)


def test_threads_checking_their_first_template_at_once_share_one_validator():
    podschema._built_validator.cache_clear()
    start, found = threading.Barrier(6), []

    def check() -> None:
        start.wait()
        found.append(podschema._validator(podschema.SCHEMA_VERSION))

    threads = [threading.Thread(target=check) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 6 and len({id(validator) for validator in found}) == 1


@pytest.mark.parametrize("definitions,root", [
    ({"$defs": {"A": {"properties": {"a": {"$ref": "#/$defs/A"}}}}}, {"$ref": "/api/_definitions.json#/$defs/A"}),
    ({"$defs": {"A": {"not": {"type": "string"}}}}, {"$ref": "/api/_definitions.json#/$defs/A"}),
    ({"$defs": {"A": {"type": "object"}}}, {"$ref": "/api/_definitions.json#/$defs/A", "type": "object"}),
    ({"$defs": {}}, {"$ref": "/api/_definitions.json#/$defs/Missing"}),
])
def test_pod_schema_inlining_gives_up_where_it_could_change_the_meaning(definitions, root):
    # a cycle, a keyword it does not know, an assertion beside a $ref, a dangling $ref: the registry is used
    with pytest.raises(podschema._CannotInline):
        podschema._Inliner(definitions).schema(root, "root")


def _best_error(validator, template) -> tuple[str, list] | None:
    """What `check_pod_template` reports: the message and where."""
    error = jsonschema.exceptions.best_match(validator.iter_errors(template))
    return (error.message, list(error.absolute_path)) if error else None


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 2**40), st.floats(allow_nan=False), st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["name", "port", "x"]), inner, max_size=2)),
    max_leaves=4,
)


def _paths(value, path=()):
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield from _paths(child, (*path, key))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(list(_paths(SOUND_TEMPLATE))[1:]), value=JSONISH, key=st.sampled_from([None, "bogus", "name"]))
def test_property_inlined_pod_schema_agrees_on_any_damage(path, value, key):
    template = copy.deepcopy(SOUND_TEMPLATE)
    parent = functools.reduce(lambda obj, k: obj[k], path[:-1], template)
    if key is not None and isinstance(parent, dict):
        parent[key] = value
    else:
        parent[path[-1]] = value
    for version in SCHEMA_VERSIONS:
        assert _schema_errors(podschema._validator(version), template) == _schema_errors(podschema._reference_validator(version), template)


# ----------------------------------------------------------------------------------------------------
# nothing but SpecError escapes


WRONG = st.sampled_from(
    [None, 0, -1, 5, 2**40, 1.5, float("nan"), float("inf"), True, "", "x", "Bad Name", b"x", [], {}, ["x"], [None],
     {"a": None}, {"a": 1}, [{}], [{"name": None}], (x for x in ()), object(), ReplicatedJob("w")]
)


def _kwargs(cls, good: dict) -> st.SearchStrategy[dict]:
    names = [f.name for f in dataclasses.fields(cls) if f.init and f.name != "retries_source"]
    # each field keeps its good value or gets a wrong one
    return st.fixed_dictionaries({n: st.one_of(st.just(good[n]), WRONG) if n in good else WRONG for n in names if n in good}, optional={n: WRONG for n in names if n not in good})


GOOD_RJ = {"name": "w", "image": IMAGE, "command": CMD}


def _build_policy(kwargs):
    return RetryPolicy(**kwargs)


CONSTRUCTORS = st.one_of(
    _kwargs(ReplicatedJob, GOOD_RJ).map(lambda kw: lambda: JobSetSpec("t", [ReplicatedJob(**kw)])),
    _kwargs(JobSetSpec, {"name": "t", "replicated_jobs": [ReplicatedJob(**GOOD_RJ)]}).map(lambda kw: lambda: JobSetSpec(**kw)),
    _kwargs(GangJobSpec, {"name": "g", "image": IMAGE, "command": CMD}).map(lambda kw: lambda: GangJobSpec(**kw)),
    _kwargs(RetryPolicy, {}).map(lambda kw: lambda: JobSetSpec("t", [ReplicatedJob(**GOOD_RJ)], retry=_build_policy(kw))),
    st.tuples(WRONG, WRONG).map(lambda v: lambda: JobSetSpec("t", [ReplicatedJob(**GOOD_RJ)], gang=Kueue(*v))),
    st.tuples(WRONG, WRONG, WRONG).map(lambda v: lambda: JobSetSpec("t", [ReplicatedJob(**GOOD_RJ)], gang=Coscheduling(*v))),
    st.tuples(WRONG, WRONG).map(lambda v: lambda: GangJobSpec("g", IMAGE, CMD, gang=Volcano(*v))),
    st.tuples(WRONG, WRONG, WRONG).map(lambda v: lambda: JobSetSpec("t", [ReplicatedJob(**GOOD_RJ)], coordinator=Coordinator(*v))),
    st.tuples(WRONG, WRONG).map(lambda v: lambda: JobSetSpec("t", [ReplicatedJob(**GOOD_RJ)], success_policy=SuccessPolicy(*v))),
    st.tuples(WRONG, WRONG, WRONG).map(lambda v: lambda: JobSetSpec("t", [ReplicatedJob(**GOOD_RJ)], network=Network(*v))),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(build=CONSTRUCTORS)
def test_property_wrong_types_give_only_spec_errors(build):
    try:
        manifests = build().manifests()
    except SpecError:
        return
    for manifest in manifests:
        validate_any(manifest)
