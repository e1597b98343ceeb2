"""The `jobset` task as flytekit serializes it, and the JobSet the connector builds from that template."""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

import pytest
from flytekit import PodTemplate, Resources, task
from flytekit.configuration import ImageConfig, SerializationSettings
from flytekit.core.context_manager import ExecutionState, FlyteContextManager
from flytekit.models.core import identifier as idl
from flytekit.tools.translator import get_serializable
from kubernetes.client import V1Container, V1PodSpec

from flyte_jobset import JobSet, JobSetFunctionTask, jobset_task
from flyte_jobset.template import spec_from_template
from jobset_core import Coscheduling, Kueue, ReplicatedJob, RetryPolicy, SpecError, Volcano, Watchdog
from jobset_core.model.gang import WorkloadAPI
from tests.schemas import validate_jobset

SETTINGS = SerializationSettings(ImageConfig.auto(img_name="ghcr.io/acme/train:1"))
PREFIX = "s3://bucket/metadata/exec/n0/data/0"


def serialize(t: Any) -> Any:
    return get_serializable(OrderedDict(), SETTINGS, t).template


def container_of(rj: dict[str, Any]) -> dict[str, Any]:
    return rj["template"]["spec"]["template"]["spec"]["containers"][0]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


@jobset_task(workers=4, gpus_per_worker=8, retries=3, gang=Kueue(queue="gpu"), interruptible=True,
             requests=Resources(cpu="2", mem="4Gi"), namespace="ml")
def train(steps: int) -> int:
    return steps


def test_decorator_serializes_the_jobset_task_type_custom_and_container() -> None:
    template = serialize(train)

    assert isinstance(train, JobSetFunctionTask) and template.type == "jobset"
    assert template.metadata.retries.retries == 3 and template.metadata.interruptible is True
    custom = template.custom
    assert custom["leader"] == "leader" and custom["namespace"] == "ml"
    assert custom["replicatedJobs"] == [
        {"name": "leader", "replicas": 1},
        {"name": "workers", "replicas": 4, "resources": {"nvidia.com/gpu": 8}},
    ]
    assert custom["gang"] == {"type": "Kueue", "queue": "gpu", "priority_class": None, "admission_timeout_seconds": None}
    assert custom["retry"]["retries"] == 3
    args = template.container.args
    assert args[0] == "pyflyte-execute" and "{{.input}}" in args and "{{.outputPrefix}}" in args
    assert args[args.index("task-module") + 1] == "tests.test_flyte_task" and args[-1] == "train"
    assert template.container.image == "ghcr.io/acme/train:1"


def test_the_built_jobset_runs_the_function_everywhere_and_only_the_leader_writes_outputs() -> None:
    spec = spec_from_template(serialize(train), PREFIX, namespace="ml", local=False)
    manifest = spec.to_manifest()
    validate_jobset(manifest)

    leader, workers = manifest["spec"]["replicatedJobs"]
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"
    assert manifest["spec"]["failurePolicy"]["maxRestarts"] == 3
    for rj in (leader, workers):
        c = container_of(rj)
        assert c["image"] == "ghcr.io/acme/train:1" and c["command"][0] == "pyflyte-execute"
        assert not any("{{" in a for a in c["command"]), "placeholders are rendered"
        assert c["command"][c["command"].index("--inputs") + 1] == f"{PREFIX}/inputs.pb"
        env = env_of(c)
        assert env["FLYTE_FAIL_ON_ERROR"] == "true" and env["_F_DES"] and env["_F_WN"] == "$(JOBSET_POD_NAME)"
        assert env["JOBSET_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        assert c["resources"]["requests"]["cpu"] == "2" and c["resources"]["requests"]["memory"] == "4Gi"
    out = lambda rj: container_of(rj)["command"][container_of(rj)["command"].index("--output-prefix") + 1]  # noqa: E731
    assert out(leader) == PREFIX
    assert out(workers) == f"{PREFIX}/replicas/$(JOBSET_POD_NAME)"
    assert container_of(workers)["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert "nvidia.com/gpu" not in container_of(leader)["resources"].get("limits", {})


def test_task_config_form_with_any_shape_and_a_pod_template() -> None:
    template_pod = PodTemplate(
        primary_container_name="trainer",
        pod_spec=V1PodSpec(containers=[V1Container(name="trainer")], priority_class_name="high"),
        labels={"team": "ml"},
    )

    @task(
        task_config=JobSet(
            replicated_jobs=[ReplicatedJob("chief"), ReplicatedJob("ps", replicas=2, env={"ROLE": "ps"})],
            leader="chief",
            retry=RetryPolicy(retries=1, retryable_exit_codes=[75]),
        ),
        pod_template=template_pod,
    )
    def shaped(x: int) -> int:
        return x

    template = serialize(shaped)
    assert isinstance(shaped, JobSetFunctionTask) and template.container is None
    assert template.k8s_pod is not None and template.metadata.retries.retries == 1

    manifest = spec_from_template(template, PREFIX, namespace="ml", local=False).to_manifest()
    validate_jobset(manifest)
    chief, ps = manifest["spec"]["replicatedJobs"]
    pod = ps["template"]["spec"]["template"]
    assert pod["metadata"]["labels"]["team"] == "ml" and pod["spec"]["priorityClassName"] == "high"
    c = pod["spec"]["containers"][0]
    assert c["name"] == "trainer" and c["command"][0] == "pyflyte-execute" and "args" not in c
    assert env_of(c)["ROLE"] == "ps" and "ROLE" not in env_of(container_of(chief))
    assert 75 in manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"]


def test_retries_default_to_the_platform_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBSET_DEFAULT_RETRIES", "5")

    @jobset_task(workers=1)
    def defaulted(x: int) -> int:
        return x

    assert serialize(defaulted).metadata.retries.retries == 5


def test_bad_shapes_fail_before_anything_runs() -> None:
    with pytest.raises(SpecError, match="command"):
        JobSet(replicated_jobs=[ReplicatedJob("a", command=["python", "x.py"])]).shape()
    with pytest.raises(SpecError, match="workers"):
        JobSet(workers=2, replicated_jobs=[ReplicatedJob("a")]).shape()
    with pytest.raises(SpecError, match="leader"):
        JobSet(workers=2, leader="boss").leader_name()


def test_inside_a_replica_the_function_body_runs() -> None:
    """pyflyte-execute runs the task in TASK_EXECUTION mode: the body, not the connector."""
    ctx = FlyteContextManager.current_context()
    state = ctx.new_execution_state().with_params(mode=ExecutionState.Mode.TASK_EXECUTION)
    with FlyteContextManager.with_context(ctx.with_execution_state(state)):
        assert train.execute(steps=7) == 7


def test_the_connector_is_registered_for_the_task_type() -> None:
    from flytekit.extend.backend.base_connector import ConnectorRegistry

    from flyte_jobset import JobSetConnector

    assert isinstance(ConnectorRegistry.get_connector("jobset"), JobSetConnector)
    assert idl.ResourceType.TASK  # identifiers used by the connector tests exist in this flytekit


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"workers": 2, "gpus_per_worker": "a"}, "gpus_per_worker"),
        ({"workers": -1}, "workers"),
        ({"workers": 2, "retries": -2}, "retries"),
        ({"workers": 2, "runtime": "locale"}, "runtime"),
        ({"workers": 2, "local_faults": "preempt:"}, "local_faults"),  # the argument written, not an env var
        ({"workers": 2, "namespace": "ML"}, "namespace"),
        ({"workers": 2, "interruptible": "yes"}, "interruptible"),
        ({"workers": 2, "watchdog": 600}, "watchdog"),
        ({"workers": 2, "watchdog": {"stall_seconds": 600}}, "watchdog"),
    ],
)
def test_bad_config_is_refused_where_it_is_written(kwargs: dict, field: str) -> None:
    with pytest.raises(SpecError) as err:
        JobSet(**kwargs)
    assert err.value.field == field


# ----- the template as protobuf carries it ---------------------------------------------------------------------


def over_the_wire(template: Any) -> Any:
    """The template as the connector server receives it from propeller: protobuf, `custom` a Struct (doubles)."""
    from flytekit.models.task import TaskTemplate

    return TaskTemplate.from_flyte_idl(template.to_flyte_idl())


@jobset_task(
    workers=3,
    gpus_per_worker=8,
    retries=2,
    gang=Coscheduling(min_member=4, timeout_seconds=120),
    retry=RetryPolicy(retryable_exit_codes=[75, 76], count_interruptions=False, max_interruptions=10),
)
def train_free(steps: int) -> int:
    return steps


@jobset_task(
    replicated_jobs=[
        ReplicatedJob("chief"),
        ReplicatedJob("ps", replicas=2, parallelism=2, completions=2, tolerations=[
            {"key": "spot", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}], env={"SHARDS": "4"}),
    ],
    retries=1,
    gang=Volcano(min_available=5, queue="research"),
)
def train_shaped(steps: int) -> int:
    return steps


@pytest.mark.parametrize("task_", [train, train_free, train_shaped])
def test_a_template_over_grpc_builds_the_same_jobset_as_in_process(task_: Any) -> None:
    """Every number in `custom` arrives as a double; the connector reads it back to the same JobSet."""
    template = serialize(task_)
    wire = over_the_wire(template)
    assert any(isinstance(v, float) for v in _numbers(wire.custom)), "protobuf did not turn the numbers into doubles"

    here = spec_from_template(template, PREFIX, namespace="ml", local=False)
    there = spec_from_template(wire, PREFIX, namespace="ml", local=False)

    assert there.retry.to_annotation() == here.retry.to_annotation()  # the policy, by meaning
    assert json.dumps(there.retry.to_annotation()) == json.dumps(here.retry.to_annotation())  # ints stay ints
    assert there.to_manifest() == here.to_manifest()
    assert there.extra_objects() == here.extra_objects()


def _numbers(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in _numbers(v)]
    return [value] if isinstance(value, (int, float)) and not isinstance(value, bool) else []


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda c: c["replicatedJobs"][1].__setitem__("replicas", 2.5), "custom.replicatedJobs[1].replicas"),
        (lambda c: c["gang"].__setitem__("min_member", 3.5), "custom.gang.min_member"),
        (lambda c: c["retry"].__setitem__("maxInterruptions", 10.25), "custom.retry.maxInterruptions"),
        (lambda c: c["retry"]["retryableExitCodes"].__setitem__(0, 75.5), "custom.retry.retryableExitCodes[0]"),
        (lambda c: c["gang"].__setitem__("timeout_seconds", "soon"), "custom.gang.timeout_seconds"),
        (lambda c: c["gang"].__setitem__("type", "Slurm"), "custom.gang.type"),
    ],
)
def test_a_number_that_is_not_a_whole_one_is_refused_naming_the_field(edit: Any, field: str) -> None:
    wire = over_the_wire(serialize(train_free))
    edit(wire.custom)
    with pytest.raises(SpecError) as err:
        spec_from_template(wire, PREFIX, namespace="ml", local=False)
    assert err.value.field == field


@pytest.mark.parametrize(
    ("value", "expected"),
    [(3, 3), (3.0, 3), (0.0, 0), (-2.0, -2), (2.5, None), (float("nan"), None), (float("inf"), None), (True, None), ("3", None)],
)
def test_integral_reads_what_protobuf_gives(value: Any, expected: int | None) -> None:
    from flyte_jobset.custom import integral

    if expected is None:
        with pytest.raises(SpecError, match="the.field"):
            integral("the.field", value)
    else:
        result = integral("the.field", value)
        assert result == expected and type(result) is int


def test_plain_numbers_keeps_quantities_and_strings() -> None:
    from flyte_jobset.custom import plain_numbers

    assert plain_numbers({"a": [8.0, 0.5, "8.0", True], "b": {"c": 30.0}}) == {"a": [8, 0.5, "8.0", True], "b": {"c": 30}}


def test_an_option_the_connector_would_refuse_is_refused_by_the_decorator() -> None:
    with pytest.raises(SpecError) as err:

        @jobset_task(workers=2, gang=WorkloadAPI())
        def gang_of_the_wrong_kind(x: int) -> int:
            return x

    assert err.value.field == "gang" and "WorkloadAPI" in str(err.value)
    with pytest.raises(SpecError) as err:

        @jobset_task(workers=2, gang=Coscheduling(min_member=9))
        def gang_too_large(x: int) -> int:
            return x

    assert err.value.field == "gang.min_member"


# ----- the watchdog -------------------------------------------------------------------------------------------------

STEPS = Watchdog(stall_seconds=600, progress=r"step \d+", startup_seconds=300)


@jobset_task(workers=2, retries=1, watchdog=STEPS)
def train_watched(steps: int) -> int:
    return steps


def test_the_watchdog_travels_in_custom_to_the_jobset_the_connector_builds() -> None:
    """In process and over gRPC (a Struct: numbers as doubles) the connector builds the JobSet with the task's
    watchdog, which the run stores on what it submits."""
    template = serialize(train_watched)
    assert template.custom["watchdog"] == {"stall_seconds": 600.0, "progress": r"step \d+", "checkpoint": None,
                                           "startup_seconds": 300.0, "source": "task"}
    for read in (template, over_the_wire(template)):
        spec = spec_from_template(read, PREFIX, namespace="ml", local=False)
        assert spec.watchdog == STEPS and spec.watchdog.to_annotation() == STEPS.to_annotation()


def test_an_unset_watchdog_is_the_platform_default_read_where_the_task_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """As the count is: the connector, in another process with other settings, submits what the source says."""
    monkeypatch.setenv("JOBSET_WATCHDOG_STALL_SECONDS", "1800")

    @jobset_task(workers=1)
    def defaulted(x: int) -> int:
        return x

    template = serialize(defaulted)
    monkeypatch.setenv("JOBSET_WATCHDOG_STALL_SECONDS", "off")  # the connector's own setting does not apply
    guard = spec_from_template(over_the_wire(template), PREFIX, namespace="ml", local=False).guard
    assert (guard.stall_seconds, guard.source) == (1800, "env JOBSET_WATCHDOG_STALL_SECONDS")
    assert guard.describe() == "watchdog: stalled after 30m without a line from any rank (env JOBSET_WATCHDOG_STALL_SECONDS)"


def test_a_template_without_a_watchdog_gets_the_connectors_platform_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """A template an earlier version registered carries no watchdog: its run gets the platform's default."""
    template = serialize(train)
    template.custom.pop("watchdog")
    monkeypatch.setenv("JOBSET_WATCHDOG_STALL_SECONDS", "off")
    spec = spec_from_template(template, PREFIX, namespace="ml", local=False)
    assert spec.watchdog is None and not spec.guard.on and spec.guard.source == "env JOBSET_WATCHDOG_STALL_SECONDS"


def test_a_bad_watchdog_is_refused_in_one_line_where_the_task_is_written() -> None:
    with pytest.raises(SpecError) as err:

        @jobset_task(workers=2, watchdog=Watchdog(stall_seconds=0))
        def too_eager(x: int) -> int:
            return x

    assert err.value.field == "watchdog.stall_seconds" and "\n" not in str(err.value)
    with pytest.raises(SpecError) as err:

        @jobset_task(workers=2, watchdog=3600)
        def bare(x: int) -> int:
            return x

    assert str(err.value) == "watchdog: 3600 is not a Watchdog; use watchdog=Watchdog(stall_seconds=3600)"
