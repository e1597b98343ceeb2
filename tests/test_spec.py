"""Workload model: every manifest a builder produces validates against the real schemas; bad input fails
before any I/O with a SpecError naming the field."""

from __future__ import annotations

import re
from typing import Any

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
    WorkloadAPI,
)
from tests.schemas import validate_any

IMAGE = "ghcr.io/acme/train:1"
CMD = ["python", "train.py"]


def leader_workers(**workers_kwargs) -> list[ReplicatedJob]:
    return [
        ReplicatedJob(name="leader", image=IMAGE, command=CMD),
        ReplicatedJob(name="workers", image=IMAGE, command=CMD, replicas=4, **workers_kwargs),
    ]


def readme_example() -> JobSetSpec:
    """The example shown in README: 1 leader, 4 workers with 8 GPUs each, in a Kueue queue."""
    return JobSetSpec(
        name="train",
        namespace="ml-team",
        replicated_jobs=[
            ReplicatedJob(name="leader", image=IMAGE, command=CMD, resources={"cpu": 4, "memory": "16Gi"}),
            ReplicatedJob(
                name="workers",
                image=IMAGE,
                command=CMD,
                replicas=4,
                resources={"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": 8},
                depends_on=["leader"],
            ),
        ],
        gang=Kueue(queue="gpu-queue"),
        retry=RetryPolicy(retries=3),
    )


def test_readme_example_validates_and_has_the_documented_shape():
    manifest = readme_example().to_manifest()
    validate_any(manifest)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert manifest["spec"]["suspend"] is True
    workers = manifest["spec"]["replicatedJobs"][1]
    assert workers["replicas"] == 4
    assert workers["dependsOn"] == [{"name": "leader", "status": "Ready"}]
    container = workers["template"]["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert manifest["spec"]["failurePolicy"]["maxRestarts"] == 3


VALID_SPECS = {
    "plain": lambda: JobSetSpec(name="plain", replicated_jobs=leader_workers()),
    "gang-of-8": lambda: JobSetSpec(name="g", replicated_jobs=leader_workers(parallelism=8, completions=8)),
    "kueue-priority": lambda: JobSetSpec(name="k", replicated_jobs=leader_workers(), gang=Kueue("q", priority_class="high")),
    "coscheduling": lambda: JobSetSpec(name="c", replicated_jobs=leader_workers(), gang=Coscheduling(min_member=3)),
    "volcano": lambda: JobSetSpec(name="v", replicated_jobs=leader_workers(), gang=Volcano(queue="research")),
    "success-any": lambda: JobSetSpec(name="s", replicated_jobs=leader_workers(), success_policy=SuccessPolicy("Any", ["leader"])),
    "in-order": lambda: JobSetSpec(name="o", replicated_jobs=[ReplicatedJob(name="a", image=IMAGE, command=CMD), ReplicatedJob(name="b", image=IMAGE, command=CMD)], startup_policy="InOrder"),
    "coordinator": lambda: JobSetSpec(name="co", replicated_jobs=leader_workers(), coordinator=Coordinator("leader")),
    "ttl-suspend": lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(), ttl_seconds_after_finished=600, suspend=True),
    "free-interruptions": lambda: JobSetSpec(name="f", replicated_jobs=leader_workers(), retry=RetryPolicy(retries=2, count_interruptions=False, retryable_exit_codes=[42])),
    "spot": lambda: JobSetSpec(name="sp", replicated_jobs=leader_workers(node_selector={"cloud.google.com/gke-spot": "true"}, tolerations=[{"key": "cloud.google.com/gke-spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}])),
    "pod-template": lambda: JobSetSpec(
        name="pt",
        replicated_jobs=[
            ReplicatedJob(
                name="trainer",
                image=IMAGE,
                command=CMD,
                env={"EPOCHS": 3},
                pod_template={
                    "metadata": {"labels": {"team": "ml"}},
                    "spec": {
                        "containers": [{"name": "main", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                        "initContainers": [{"name": "proxy", "image": "envoy:1", "restartPolicy": "Always"}],
                        "volumes": [{"name": "data", "emptyDir": {}}],
                        "priorityClassName": "high",
                    },
                },
            )
        ],
    ),
    "gang-job": lambda: GangJobSpec(name="mpi", image=IMAGE, command=CMD, pods=4, resources={"nvidia.com/gpu": 8}),
    "gang-job-workload-1.36": lambda: GangJobSpec(name="w", image=IMAGE, command=CMD, pods=4, gang=WorkloadAPI(min_count=3)),
    "gang-job-workload-1.35": lambda: GangJobSpec(name="w", image=IMAGE, command=CMD, pods=4, gang=WorkloadAPI(api_version="scheduling.k8s.io/v1alpha1")),
    "gang-job-coscheduling": lambda: GangJobSpec(name="c", image=IMAGE, command=CMD, pods=4, gang=Coscheduling(timeout_seconds=60)),
    "gang-job-volcano": lambda: GangJobSpec(name="v", image=IMAGE, command=CMD, pods=4, gang=Volcano(min_available=2)),
    "gang-job-kueue": lambda: GangJobSpec(name="k", image=IMAGE, command=CMD, pods=4, gang=Kueue("q"), active_deadline_seconds=3600),
}


@pytest.mark.parametrize("name", sorted(VALID_SPECS))
def test_every_builder_output_validates_against_the_real_schemas(name):
    manifests = VALID_SPECS[name]().manifests()
    assert manifests, name
    for manifest in manifests:
        validate_any(manifest)


def test_child_jobs_carry_the_failure_policy_translation():
    manifest = JobSetSpec(name="p", replicated_jobs=leader_workers(), retry=RetryPolicy(retries=2, retryable_exit_codes=[42])).to_manifest()
    job = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert job["backoffLimit"] == 0
    assert job["podReplacementPolicy"] == "Failed"
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    assert job["podFailurePolicy"]["rules"] == [
        {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "NotIn", "values": [42, 143]}},
    ]


def test_pod_template_is_merged_not_replaced():
    manifest = VALID_SPECS["pod-template"]().to_manifest()
    pod = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == IMAGE and container["volumeMounts"][0]["mountPath"] == "/data"
    assert {"name": "EPOCHS", "value": "3"} in container["env"]
    assert pod["metadata"]["labels"] == {"team": "ml"}
    assert pod["spec"]["initContainers"][0]["restartPolicy"] == "Always"


def test_kubernetes_model_pod_template_is_accepted():
    from kubernetes import client

    template = client.V1PodTemplateSpec(
        spec=client.V1PodSpec(containers=[client.V1Container(name="main", image=IMAGE, command=CMD)], service_account_name="trainer")
    )
    manifest = JobSetSpec(name="m", replicated_jobs=[ReplicatedJob(name="r", pod_template=template)]).to_manifest()
    validate_any(manifest)
    assert manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["serviceAccountName"] == "trainer"


def test_gang_backends_fill_min_counts_from_the_pod_count():
    extras = JobSetSpec(name="c", replicated_jobs=leader_workers(parallelism=2), gang=Coscheduling()).extra_objects()
    assert extras[0]["spec"]["minMember"] == 1 + 4 * 2
    extras = GangJobSpec(name="w", image=IMAGE, command=CMD, pods=6, gang=WorkloadAPI()).extra_objects()
    kinds = [e["kind"] for e in extras]
    assert kinds == ["Workload", "PodGroup", "Service"]
    assert extras[1]["spec"]["schedulingPolicy"]["gang"]["minCount"] == 6
    job = GangJobSpec(name="w", image=IMAGE, command=CMD, pods=6, gang=WorkloadAPI()).to_manifest()
    assert job["spec"]["template"]["spec"]["schedulingGroup"] == {"podGroupName": "w-w"}
    vol = GangJobSpec(name="v", image=IMAGE, command=CMD, pods=3, gang=Volcano()).to_manifest()
    assert vol["spec"]["template"]["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "v"
    assert vol["spec"]["template"]["spec"]["schedulerName"] == "volcano"


def test_a_gang_job_fails_at_once_on_any_failure_so_the_whole_gang_runs_again():
    job = GangJobSpec(name="g", image=IMAGE, command=CMD, pods=4, retry=RetryPolicy(retries=5, count_interruptions=False)).to_manifest(remaining=2)
    assert job["spec"]["backoffLimit"] == 0 and "backoffLimitPerIndex" not in job["spec"]
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 4
    # Free interruptions too: a disruption fails the Job (FailJob), the run decides it is free.
    assert [r["action"] for r in job["spec"]["podFailurePolicy"]["rules"]] == ["FailJob", "FailJob"]
    validate_any(job)


def test_per_index_retries_map_the_one_count_onto_every_index_and_the_whole_job():
    spec = GangJobSpec(name="g", image=IMAGE, command=CMD, pods=4, restart="index", max_failed_indexes=1,
                       retry=RetryPolicy(retries=5, count_interruptions=False))
    job = spec.to_manifest(remaining=2)
    assert job["spec"]["backoffLimitPerIndex"] == job["spec"]["backoffLimit"] == 2
    assert job["spec"]["maxFailedIndexes"] == 1
    assert [r["action"] for r in job["spec"]["podFailurePolicy"]["rules"]] == ["Ignore", "FailIndex"]
    validate_any(job)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"restart": "pod"}, "restart: 'pod' is neither 'gang' nor 'index'"),
        ({"max_failed_indexes": 2}, "max_failed_indexes: is 2, but only restart='index' retries indexes one by one"),
        ({"restart": "index", "max_failed_indexes": 5}, "max_failed_indexes: 5 is more than the 4 indexes of this Job"),
        ({"restart": "index", "max_failed_indexes": -1}, "max_failed_indexes: must be an integer >= 0"),
    ],
)
def test_restart_modes_are_checked(kwargs: dict, message: str) -> None:
    with pytest.raises(SpecError, match=re.escape(message)):
        GangJobSpec(name="g", image=IMAGE, command=CMD, pods=4, **kwargs).validate()


BAD_INPUT = [
    (lambda: JobSetSpec(name="Train", replicated_jobs=leader_workers()), "name: 'Train' is not a valid DNS-1035 label"),
    (lambda: JobSetSpec(name="1train", replicated_jobs=leader_workers()), "name: '1train' is not a valid DNS-1035 label"),
    (lambda: JobSetSpec(name="x" * 55, replicated_jobs=leader_workers()), "replicated_jobs[0].name: the longest pod hostname JobSet derives"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[]), "replicated_jobs: is empty"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(replicas=0)), "got multiple values"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="w", image=IMAGE, command=CMD, replicas=0)]), "replicated_jobs[0].replicas: must be an integer >= 1, got 0"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="w", image=IMAGE, command=CMD, replicas=-2)]), "replicated_jobs[0].replicas: must be an integer >= 1, got -2"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="w", command=CMD)]), "replicated_jobs[0].image: is missing"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="w", image=IMAGE)]), "replicated_jobs[0].command: is missing"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="w", image=IMAGE, command="python train.py")]), "replicated_jobs[0].command: must be a list of strings"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="w", image=IMAGE, command=CMD), ReplicatedJob(name="w", image=IMAGE, command=CMD)]), "replicated_jobs[1].name: 'w' is used twice"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="a", image=IMAGE, command=CMD), ReplicatedJob(name="b", image=IMAGE, command=CMD, depends_on=["c"])]), "replicated_jobs[1].depends_on: there is no replicated job named 'c' (the replicated jobs are 'a', 'b'); name one listed before 'b': 'a'"),
    (lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="a", image=IMAGE, command=CMD, depends_on=["a"])]), "replicated_jobs[0].depends_on: 'a' cannot depend on itself"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(resources={"memory": "16 GB"})), "replicated_jobs[1].resources.requests['memory']: '16 GB' is not a resource quantity"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(resources={"cpu": -1})), "replicated_jobs[1].resources.requests['cpu']: -1 is negative"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(), gang=Kueue("q"), suspend=False), "suspend: is False, but Kueue only admits workloads that are created suspended"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(), gang=Coscheduling(min_member=99)), "gang.min_member: 99 is more than the 5 pods"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(), gang=WorkloadAPI()), "gang: WorkloadAPI needs pod spec.workloadRef/schedulingGroup"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(), gang="kueue"), "gang: 'kueue' is not a gang backend"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(pod_template={"spec": {"schedulerName": "default-scheduler"}}), gang=Volcano()), "pod_template.spec.schedulerName: is 'default-scheduler' but gang=Volcano"),
    (lambda: JobSetSpec(name="t", namespace="ML", replicated_jobs=leader_workers()), "namespace: 'ML' is not a valid DNS-1123 label"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(depends_on=["leader"]), startup_policy="InOrder"), "startup_policy: InOrder and depends_on cannot be combined"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(), coordinator=Coordinator("nope")), "coordinator.replicated_job: 'nope' is unknown"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(), labels={"team": "a b"}), "labels['team']: value 'a b' is not a valid label value"),
    (lambda: JobSetSpec(name="t", replicated_jobs=leader_workers(), retry=RetryPolicy(retries=-1)), "retry.retries: -1 is not an integer from 0 to 2147483647"),
    (lambda: GangJobSpec(name="g", image=IMAGE, command=CMD, pods=0), "pods: must be an integer >= 1, got 0"),
    (lambda: GangJobSpec(name="g", image=IMAGE, command=CMD, pods=4, gang=Volcano(min_available=5)), "gang.min_available: 5 is more than the 4 pods"),
    (lambda: GangJobSpec(name="g", image=IMAGE, command=CMD, pods=2, gang=WorkloadAPI(api_version="scheduling.k8s.io/v1")), "gang.api_version: 'scheduling.k8s.io/v1' is not a Workload API version"),
]


@pytest.mark.parametrize("jobs,message", [
    ([("workers", ["leader"])],
     "replicated_jobs[0].depends_on: there is no replicated job named 'leader' (the only replicated job is 'workers'); "
     "drop depends_on: nothing is listed before 'workers'"),
    ([("driver", None), ("workers", ["leader"])],
     "replicated_jobs[1].depends_on: there is no replicated job named 'leader' (the replicated jobs are 'driver', "
     "'workers'); name one listed before 'workers': 'driver'"),
    ([("workers", ["leader"]), ("leader", None)],
     "replicated_jobs[0].depends_on: 'leader' is listed after 'workers', and a replicated job can depend only on one "
     "listed before it; reorder the replicated jobs: put 'leader' before 'workers'"),
    ([("leader", None), ("workers", ["eval"]), ("eval", None)],
     "replicated_jobs[1].depends_on: 'eval' is listed after 'workers', and a replicated job can depend only on one "
     "listed before it; reorder the replicated jobs: put 'eval' before 'workers'"),
], ids=["missing-first", "missing-later", "exists-later-first", "exists-later"])
def test_depends_on_says_whether_the_job_is_missing_or_out_of_order(jobs: list[tuple[str, Any]], message: str) -> None:
    """A name no replicated job has is said as such, with the names there are; reordering is advised only when
    the named job exists but is listed after the one that depends on it."""
    spec = JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name, image=IMAGE, command=CMD, depends_on=deps)
                                                 for name, deps in jobs])
    with pytest.raises(SpecError) as info:
        spec.validate()
    assert str(info.value) == message
    assert ("reorder" in message) == ("is listed after" in message)


@pytest.mark.parametrize("build,message", BAD_INPUT, ids=[m[:40] for _, m in BAD_INPUT])
def test_bad_input_raises_spec_error_naming_the_field(build, message):
    with pytest.raises((SpecError, TypeError)) as info:
        build().to_manifest()
    assert message in str(info.value)
    if isinstance(info.value, SpecError):
        assert str(info.value).startswith(info.value.field)


def test_spec_error_is_a_value_error():
    assert issubclass(SpecError, ValueError)


names = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]|[A-Z_][a-z]{0,3}|", fullmatch=True)
quantities = st.one_of(st.integers(-2, 64), st.sampled_from(["500m", "16Gi", "1.5", "abc", "2 Gi", "", "1e3"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=names,
    rj_names=st.lists(names, min_size=0, max_size=3),
    replicas=st.integers(-1, 5),
    pods=st.integers(-1, 9),
    cpu=quantities,
    gang=st.sampled_from([None, Kueue("q"), Coscheduling(), Volcano(), WorkloadAPI(), Coscheduling(min_member=3)]),
    retries=st.one_of(st.none(), st.integers(-1, 6)),
    codes=st.lists(st.integers(-1, 300), max_size=3),
)
def test_property_any_spec_is_schema_valid_or_a_spec_error(name, rj_names, replicas, pods, cpu, gang, retries, codes):
    def build():
        rjs = [
            ReplicatedJob(name=n, image=IMAGE, command=CMD, replicas=replicas, parallelism=pods, resources={"cpu": cpu})
            for n in rj_names
        ]
        return JobSetSpec(name=name, replicated_jobs=rjs, gang=gang, retry=RetryPolicy(retries=retries if retries is not None else 1, retryable_exit_codes=codes))

    try:
        manifests = build().manifests()
    except SpecError:
        return
    for manifest in manifests:
        validate_any(manifest)


def test_a_jobset_pod_finds_its_place_by_downward_env_and_a_gang_job_pod_by_its_index():
    """The JobSet's labels reach its pods through the downward API (a user's variable of the same name wins);
    a gang Job has no JobSet labels, so it carries none of that env, and a user's variable is kept."""
    env = {"JOB_INDEX": "mine", "EPOCHS": 3}
    jobset = JobSetSpec(name="j", replicated_jobs=[ReplicatedJob(name="r", image=IMAGE, command=CMD, env=env)]).to_manifest()
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    names = [e["name"] for e in pod["containers"][0]["env"]]
    assert names[:5] == ["JOBSET_NAME", "REPLICATED_JOB_NAME", "JOB_INDEX", "JOB_GLOBAL_INDEX", "RESTART_ATTEMPT"]
    assert {"name": "JOB_INDEX", "value": "mine"} in pod["containers"][0]["env"] and pod["restartPolicy"] == "Never"
    job = GangJobSpec(name="g", image=IMAGE, command=CMD, pods=2, env=env).to_manifest()
    assert job["spec"]["template"]["spec"]["containers"][0]["env"] == [
        {"name": "JOB_INDEX", "value": "mine"}, {"name": "EPOCHS", "value": "3"},
    ]


def test_the_namespace_default_is_decided_once():
    from jobset_core.model.workload import DEFAULT_NAMESPACE, namespace_for

    assert namespace_for("ml", "team") == "ml"
    assert namespace_for(None, "team") == namespace_for("", "team") == "team"
    assert namespace_for(None, None) == namespace_for() == DEFAULT_NAMESPACE == "default"
