"""The one spec codec (`jobset_core.spec_to_dict` / `spec_from_dict`): every valid spec survives the round trip to
plain data, JSON, and a protobuf Struct (Flyte's `custom`); every bad field is one `SpecError` naming its path."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_jobset.specs import load_spec
from flyte_jobset.custom import custom_data, read_custom, replica_data
from jobset_core import (
    Coordinator,
    Coscheduling,
    DependsOn,
    GangBackend,
    GangJobSpec,
    JobSetSpec,
    Kueue,
    Network,
    ReplicatedJob,
    RetryPolicy,
    SpecError,
    SuccessPolicy,
    Volcano,
    WorkloadAPI,
    spec_from_dict,
    spec_to_dict,
)

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NAMES = st.text(alphabet="abcdefghij", min_size=1, max_size=5)
LABELS = st.dictionaries(st.sampled_from(["team", "app", "tier"]), st.sampled_from(["ml", "a", "b-1"]), max_size=2)
ENV = st.one_of(st.none(), st.dictionaries(st.sampled_from(["A", "B_1", "STEPS"]), st.sampled_from(["1", "x", ""]), max_size=3),
                st.lists(st.builds(lambda n, v: {"name": n, "value": v}, st.sampled_from(["A", "B"]), st.sampled_from(["1", "2"])),
                         max_size=2, unique_by=lambda e: e["name"]))
TOLERATIONS = st.lists(st.fixed_dictionaries({"key": st.sampled_from(["spot", "gpu"]), "operator": st.just("Exists"),
                                              "effect": st.just("NoExecute"), "tolerationSeconds": st.integers(1, 600)}),
                       max_size=2)
POLICIES = st.one_of(st.none(), st.builds(
    lambda retries, codes, free, cap, grace: RetryPolicy(retries=retries, retryable_exit_codes=codes, count_interruptions=free,
                                                         max_interruptions=cap, image_pull_grace_seconds=grace),
    st.integers(0, 5), st.lists(st.integers(1, 120), max_size=3, unique=True), st.booleans(),
    st.one_of(st.none(), st.integers(1, 20)), st.sampled_from([60.0, 180.0, 0.5])))


@st.composite
def replicated_jobs(draw: Any) -> list[ReplicatedJob]:
    names = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    jobs = []
    for i, name in enumerate(names):
        completions = draw(st.one_of(st.none(), st.integers(1, 3)))
        parallelism = draw(st.one_of(st.none(), st.integers(1, completions or 3)))
        depends = draw(st.one_of(st.none(), st.sampled_from([[names[0]], [DependsOn(names[0], "Complete")]]))) if i else None
        jobs.append(ReplicatedJob(
            name=name, image="ghcr.io/acme/train:1", command=["python", "-c", draw(st.sampled_from(["1", "print(2)"]))],
            args=draw(st.one_of(st.none(), st.just(["--x"]))), replicas=draw(st.integers(1, 3)), parallelism=parallelism,
            completions=completions, env=draw(ENV), resources=draw(st.one_of(st.none(), st.just({"cpu": "1", "nvidia.com/gpu": 2}))),
            node_selector=draw(st.one_of(st.none(), st.just({"pool": "gpu"}))), tolerations=draw(TOLERATIONS) or None,
            depends_on=depends, container_name=draw(st.sampled_from(["main", "trainer"])), labels=draw(LABELS) or None,
            annotations=draw(LABELS) or None,
        ))
    return jobs


@st.composite
def jobset_specs(draw: Any) -> JobSetSpec:
    jobs = draw(replicated_jobs())
    total = sum(rj.total_pods for rj in jobs)
    gang = draw(st.one_of(st.none(), st.builds(Kueue, st.just("gpu"), st.one_of(st.none(), st.just("high")),
                                               st.one_of(st.none(), st.just(600), st.just(90.5))),
                          st.builds(Coscheduling, st.one_of(st.none(), st.integers(1, total)), st.integers(1, 600)),
                          st.builds(Volcano, st.one_of(st.none(), st.integers(1, total)), st.one_of(st.none(), st.just("research")))))
    return JobSetSpec(
        name=draw(NAMES), replicated_jobs=jobs, namespace=draw(st.one_of(st.none(), st.just("ml"))),
        labels=draw(LABELS) or None, network=draw(st.one_of(st.none(), st.builds(Network, st.booleans(), st.none(), st.booleans()))),
        success_policy=draw(st.one_of(st.none(), st.just(SuccessPolicy("Any", [jobs[0].name])))),
        coordinator=draw(st.one_of(st.none(), st.just(Coordinator(jobs[0].name)))),
        ttl_seconds_after_finished=draw(st.one_of(st.none(), st.integers(0, 3600))),
        suspend=None if isinstance(gang, Kueue) else draw(st.one_of(st.none(), st.booleans())),
        gang=gang, retry=draw(POLICIES),
    )


@st.composite
def gang_job_specs(draw: Any) -> GangJobSpec:
    pods = draw(st.integers(1, 4))
    per_index = draw(st.booleans())
    return GangJobSpec(
        name=draw(NAMES), image="ghcr.io/acme/train:1", command=["python", "x.py"], pods=pods, env=draw(ENV),
        tolerations=draw(TOLERATIONS) or None, gang=draw(st.one_of(st.none(), st.builds(WorkloadAPI, st.one_of(st.none(), st.integers(1, pods))))),
        retry=draw(POLICIES), active_deadline_seconds=draw(st.one_of(st.none(), st.integers(1, 99))),
        service=draw(st.booleans()), restart="index" if per_index else "gang",
        max_failed_indexes=draw(st.integers(0, pods)) if per_index else 0,
    )


def same_spec(back: Any, spec: Any) -> None:
    """The same spec: equal as objects, but for the policy, whose backoff object has no equality of its own (its
    stored form is compared instead), and built into the same manifests."""
    assert back.__class__ is spec.__class__
    assert back.manifests() == spec.manifests()
    if spec.retry is None:
        assert back == spec
    else:
        assert back.retry.to_annotation() == spec.retry.to_annotation()


@PROPERTY
@given(spec=st.one_of(jobset_specs(), gang_job_specs()))
def test_every_valid_spec_round_trips_through_plain_data_and_json(spec: JobSetSpec | GangJobSpec) -> None:
    data = spec_to_dict(spec)
    wire = json.loads(json.dumps(data))
    assert wire == data  # JSON-safe as written
    back = spec_from_dict(wire, type(spec))
    assert spec_to_dict(back) == data
    same_spec(back, spec)


@PROPERTY
@given(spec=jobset_specs())
def test_what_a_flyte_task_carries_round_trips_through_a_protobuf_struct(spec: JobSetSpec) -> None:
    """Flyte's adapter around the one codec: every number of `custom` arrives as a double, and reads back the same."""
    jobs = [ReplicatedJob(**{**{k: getattr(rj, k) for k in ("name", "image", "replicas", "parallelism", "completions", "env",
                                                              "resources", "node_selector", "tolerations", "depends_on",
                                                              "labels", "annotations")}}) for rj in spec.replicated_jobs]
    policy = spec.retry or RetryPolicy(retries=2)
    custom = custom_data(jobs, jobs[-1].name, spec.gang, policy, namespace="ml", runtime=None, local_faults=None)
    struct = struct_pb2.Struct()
    struct.update(json.loads(json.dumps(custom)))
    wire = json_format.MessageToDict(struct)

    read = read_custom(wire)

    # what a replica sets, numbers as ints again (an empty env is no env; a Struct keeps no key order)
    as_json = lambda rjs: json.dumps([replica_data(rj) for rj in rjs], sort_keys=True)  # noqa: E731 - 2.0 is not 2
    assert as_json(read.jobs) == as_json(jobs)
    assert read.gang == spec.gang and read.leader == jobs[-1].name and read.namespace == "ml"
    assert json.dumps(read.policy(policy.retries, "t").to_annotation()) == json.dumps(
        RetryPolicy.from_annotation({**policy.to_annotation(), "source": "t"}).to_annotation())


def test_a_key_is_a_fields_name_or_its_camel_case_spelling() -> None:
    data = {"name": "t", "replicatedJobs": [{"name": "w", "image": "i:1", "command": ["x"], "nodeSelector": {"pool": "gpu"},
                                              "depends_on": None}],
            "successPolicy": {"operator": "Any", "targetReplicatedJobs": ["w"]}, "ttlSecondsAfterFinished": 60,
            "gang": {"type": "Coscheduling", "minMember": 1}}
    spec = spec_from_dict(data, JobSetSpec)
    assert spec.replicated_jobs[0].node_selector == {"pool": "gpu"} and spec.ttl_seconds_after_finished == 60
    assert spec.success_policy == SuccessPolicy("Any", ["w"]) and spec.gang == Coscheduling(min_member=1)
    assert spec_to_dict(spec)["replicated_jobs"][0]["node_selector"] == {"pool": "gpu"}  # written by field name


@pytest.mark.parametrize(
    ("data", "kind", "path", "field", "words"),
    [
        ({"name": "t"}, JobSetSpec, None, "replicated_jobs", "is required"),
        ({"name": "t", "replicated_jobs": "w"}, JobSetSpec, None, "replicated_jobs", "must be a list"),
        ({"name": "t", "replicated_jobs": [{"name": "w", "replicas": 2.5}]}, JobSetSpec, None, "replicated_jobs[0].replicas", "must be an integer"),
        ({"name": "t", "replicated_jobs": [{"name": "w", "replicass": 2}]}, JobSetSpec, None, "replicated_jobs[0]", "unknown ReplicatedJob field(s) replicass"),
        ({"name": "t", "replicated_jobs": [{"name": "w", "env": 3}]}, JobSetSpec, None, "replicated_jobs[0].env", "must be a mapping or a list"),
        ({"name": "t", "replicated_jobs": [{"name": "w", "tolerations": ["spot"]}]}, JobSetSpec, None, "replicated_jobs[0].tolerations[0]", "must be a mapping"),
        ({"name": "t", "replicated_jobs": [{"name": "w", "depends_on": [{"status": "Ready"}]}]}, JobSetSpec, None, "replicated_jobs[0].depends_on[0].name", "is required"),
        ({"name": "t", "replicated_jobs": [], "coordinator": "w"}, JobSetSpec, None, "coordinator", "must be a mapping of Coordinator fields"),
        ({"name": "t", "replicated_jobs": [], "gang": {"type": "Slurm"}}, JobSetSpec, None, "gang.type", "'Slurm' is not one of"),
        ({"name": "t", "replicated_jobs": [], "gang": {"type": "Volcano", "min_available": True}}, JobSetSpec, None, "gang.min_available", "must be an integer"),
        ({"name": "t", "replicated_jobs": [], "suspend": "yes"}, JobSetSpec, None, "suspend", "must be True or False"),
        ({"name": "t", "nodeSelector": {}, "node_selector": {}}, GangJobSpec, None, "node_selector", "is given twice"),
        ({"name": "t", "pods": "4"}, GangJobSpec, None, "pods", "must be an integer"),
        ({"name": 7}, ReplicatedJob, "custom.replicatedJobs[1]", "custom.replicatedJobs[1].name", "must be a string"),
        ({"retries": 2, "retryableExitCodes": [75, 75.5]}, RetryPolicy, "custom.retry", "custom.retry.retryableExitCodes[1]", "must be an integer"),
        ({"retries": 2, "imagePullGraceSeconds": "soon"}, RetryPolicy, "custom.retry", "custom.retry.imagePullGraceSeconds", "must be a number"),
        ("Kueue", GangBackend, "gang", "gang", "must be a mapping of gang backend fields"),
        (["t"], JobSetSpec, None, "JobSetSpec", "must be a mapping of JobSetSpec fields"),
    ],
)
def test_a_bad_field_is_one_spec_error_naming_its_path(data: Any, kind: type, path: str | None, field: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        spec_from_dict(data, kind, path=path)
    assert err.value.field == field and words in str(err.value), str(err.value)
    assert str(err.value).startswith(field)


def test_an_airflow_workload_file_is_read_by_the_one_codec(tmp_path: Any) -> None:
    """A YAML file with a gang and Kubernetes' spelling reads as the same spec the Python API builds; the file
    never carries the retry policy (the operator's `retries=` is the one count)."""
    file = tmp_path / "train.yaml"
    file.write_text("name: train\nreplicatedJobs:\n- {name: w, image: 'i:1', command: [x], replicas: 2, nodeSelector: {pool: gpu}}\n"
                    "gang: {type: Kueue, queue: gpu}\n")
    spec = load_spec(str(file), JobSetSpec)
    assert spec == JobSetSpec(name="train", replicated_jobs=[ReplicatedJob("w", image="i:1", command=["x"], replicas=2,
                                                                            node_selector={"pool": "gpu"})], gang=Kueue("gpu"))
    with pytest.raises(SpecError) as err:
        load_spec({**spec_to_dict(spec), "retry": spec_to_dict(RetryPolicy(retries=1))}, JobSetSpec)
    assert err.value.field == "retry"


def test_what_is_not_a_part_of_a_spec_is_refused() -> None:
    with pytest.raises(SpecError):
        spec_to_dict(object())
    with pytest.raises(SpecError):
        spec_from_dict({}, dict)
