"""GPU hardware faults, emulated: the `hardware` fault of the one vocabulary, played by the offline cluster (the
node's event and condition, the program's CUDA error, exit 1 with the log tail), by the local runtime on a real
process, and read back by the Kubernetes runtime (the Nodes and their events, for GPU workloads only).
The scheduler's node affinity, selector and taints are checked here too: a retry kept off a broken node
lands elsewhere, or nowhere, as kube-scheduler says it.

Everything over real HTTP with the official `kubernetes` client; every wait polls a condition with a deadline.
"""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import tenacity
from kubernetes import client

from jobset_core import JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy
from jobset_core import constants as c
from jobset_core.errors import SpecError
from jobset_core.lifecycle.contract import Handle, Observation, state_of
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.nodes import MAX_NODES, failed_pod_nodes, gpu_workload, torn_down
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.runtimes.local import LocalRuntime
from jobset_core.sim.fault_parsing import from_mapping, parse_faults, to_mapping
from jobset_core.sim.faults import Crash, Hardware
from jobset_core.sim.gpu import cuda_error_of, torch_cuda_message, torch_traceback, xid_reason
from jobset_core.sim.node import EMULATED_VERSION, fault_output, log_tail
from jobset_core.sim.scheduling import (
    Refusal,
    failed_scheduling_message,
    insufficient,
    pod_requests,
    refusal_message,
    tolerates,
    why_not,
)
from jobset_core.testing import FakeCluster, LocalApiServer, rules_from_yaml
from tests.kube_driver import ClusterDriver
from tests.waiting import wait_until

NS = "gpu-team"
ROOT = Path(__file__).resolve().parents[1]
ROLE = ROOT / "plugins" / "kubernetes" / "rbac.yaml"
GPU_ROLE = ROOT / "plugins" / "kubernetes" / "rbac-gpu-nodes.yaml"
KUBECTL = shutil.which("kubectl")
NODE_EVENTS = f"{c.INVOLVED_OBJECT_KIND_FIELD}={c.NODE_KIND}"



def gpu_spec(name: str = "train", *, gpus: int | None = 8, affinity: dict[str, Any] | None = None,
             command: list[str] | None = None, retries: int = 0) -> JobSetSpec:
    """workers x2 (2 pods each), each pod asking for `gpus` GPUs (None: a CPU workload)."""
    template = {"spec": {"affinity": affinity}} if affinity else None
    return JobSetSpec(
        name=name,
        namespace=NS,
        replicated_jobs=[ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=command or ["python", "train.py"],
                                       replicas=2, parallelism=2, resources={"nvidia.com/gpu": gpus} if gpus else None,
                                       pod_template=template)],
        retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none()),
    )


def avoiding(*nodes: str) -> dict[str, Any]:
    """The required node affinity a retry carries to keep off nodes: one matchFields NotIn per node (the API
    server allows one value for a field requirement), ANDed in one term."""
    fields = [{"key": c.NODE_NAME_FIELD, "operator": c.OPERATOR_NOT_IN, "values": [node]} for node in nodes]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": fields}]}}}


def submit(api: client.ApiClient, spec: JobSetSpec) -> dict[str, Any]:
    """Create the JobSet with the official client, as `kubectl apply` would."""
    manifest = spec.manifests()[-1]
    group, version = c.JOBSET_API_VERSION.split("/")
    return client.CustomObjectsApi(api).create_namespaced_custom_object(group, version, NS, c.JOBSET_PLURAL, manifest)


def pods_of(core: client.CoreV1Api, name: str) -> list[Any]:
    return core.list_namespaced_pod(NS, label_selector=f"{c.JOBSET_NAME_LABEL}={name}").items


def terminated(pod: Any) -> Any:
    states = [s.state.terminated for s in pod.status.container_statuses or [] if s.state and s.state.terminated]
    return states[0] if states else None


# ----------------------------------------------------------------------------------------------------
# the vocabulary


def test_the_hardware_fault_in_both_spellings() -> None:
    assert parse_faults("hardware:workers-0-1@2s") == (Hardware("workers-0-1", after_seconds=2.0),)
    assert parse_faults("hardware:workers-0-1@2s,xid=79") == (Hardware("workers-0-1", after_seconds=2.0, xid=79),)
    mapped = from_mapping({"fault": "hardware", "replica": "workers-0-1", "after": 2, "xid": 79})
    assert mapped == Hardware("workers-0-1", after_seconds=2.0, xid=79)
    assert from_mapping(to_mapping(mapped)) == mapped and to_mapping(mapped)["xid"] == 79
    assert Hardware("w-0-0").xid == 48
    assert "Xid 79: GPU, fallen off the bus" in mapped.describe()


@pytest.mark.parametrize(
    ("spelled", "field", "words"),
    [
        ("crash:leader-0-0,xid=79", "JOBSET_LOCAL_FAULTS", "only hardware takes an xid"),
        ("hardware:w-0-0,xid=13", "JOBSET_LOCAL_FAULTS", "xid 13 is not a fatal Xid"),
        ("hardware:w-0-0=3", "JOBSET_LOCAL_FAULTS", "only crash takes an exit code"),
        ({"fault": "crash", "replica": "w-0-0", "exitCode": 1, "xid": 79}, "fate.xid", "only a hardware fault takes an Xid"),
        ({"fault": "hardware", "replica": "w-0-0", "xid": 999}, "fate.xid", "999 is not a fatal Xid"),
        ({"fault": "hardware", "replica": "w-0-0", "xdi": 79}, "fate.xdi", "is not a key of a fate"),
    ],
    ids=["xid-on-crash-text", "application-xid", "exit-code-on-hardware", "xid-on-crash-mapping", "unknown-xid", "typo"],
)
def test_a_misspelled_hardware_fault_is_refused_naming_the_field(spelled: Any, field: str, words: str) -> None:
    with pytest.raises(SpecError) as refused:
        parse_faults(spelled) if isinstance(spelled, str) else from_mapping(spelled)
    assert refused.value.field == field and words in str(refused.value), str(refused.value)
    if "fatal Xid" in words:
        assert "48, 62, 64, 74, 79" in str(refused.value), "the allowed Xids are listed"
    if field == "fate.xdi":
        assert "did you mean 'xid'?" in str(refused.value)


def test_the_default_output_is_pytorchs_error_for_the_xid_family() -> None:
    assert [cuda_error_of(x) for x in (48, 64, 94, 95, 140)] == [c.CUDA_ECC_UNCORRECTABLE] * 5
    assert [cuda_error_of(x) for x in (74, 144, 150)] == [c.CUDA_NVLINK_UNCORRECTABLE] * 3
    assert [cuda_error_of(x) for x in (79, 62, 119, 120, 143)] == [c.CUDA_LAUNCH_FAILURE] * 5
    ecc = torch_traceback(48).splitlines()
    assert ecc[0] == "Traceback (most recent call last):" and "    loss.backward()" in ecc
    assert ecc[-5:] == [
        "torch.AcceleratorError: CUDA error: uncorrectable ECC error encountered",
        "Search for `cudaErrorECCUncorrectable' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html "
        "for more information.",
        "For more detailed error information, run with CUDA_LOG_FILE=stderr",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        "",
    ]
    assert torch_cuda_message(c.CUDA_LAUNCH_FAILURE)[2:] == [
        "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
        "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    ]
    assert "cudaErrorNvlinkUncorrectable" in torch_traceback(74)
    assert fault_output(Hardware("w", output="my own words")) == "my own words\n"
    assert fault_output(Crash("w")) == ""


def test_the_termination_message_is_the_logs_tail_the_kubelets_way() -> None:
    many = "".join(f"line {n}\n" for n in range(200))
    assert log_tail(many).splitlines() == [f"line {n}" for n in range(120, 200)]
    wide = "".join(f"{n:03d} " + "x" * 60 + "\n" for n in range(50))
    tail = log_tail(wide)
    assert len(tail.encode()) == c.TERMINATION_MESSAGE_LOG_BYTES and tail.endswith("049 " + "x" * 60 + "\n")
    assert log_tail(b"\xe2\x82\xac" * 1000).startswith(("\ufffd", "\u20ac")), "a cut character is replaced, not fatal"
    assert log_tail("") == ""


def test_the_device_plugins_condition_reason_is_gos_json_of_the_xids() -> None:
    assert xid_reason(None, 79) == '{"79":true}'
    assert xid_reason('{"79":true}', 48) == '{"48":true,"79":true}'
    assert xid_reason('{"79":true}', 79) is None, "a known Xid leaves the node alone"


# ----------------------------------------------------------------------------------------------------
# the scheduler's filters


def node(name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {c.HOSTNAME_LABEL: name, **(labels or {})}}, "spec": {"taints": taints or []}}


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": spec}


def test_the_filters_read_affinity_selectors_and_taints_as_kube_scheduler() -> None:
    gpu_error = {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"}
    assert tolerates({"key": "nvidia.com/gpu-error", "operator": "Exists"}, gpu_error)
    assert tolerates({"operator": "Exists"}, gpu_error) and not tolerates({"key": "other", "operator": "Exists"}, gpu_error)
    assert not tolerates({"key": "nvidia.com/gpu-error", "value": "warn"}, gpu_error)
    assert not tolerates({"key": "nvidia.com/gpu-error", "operator": "Exists", "effect": "NoExecute"}, gpu_error)
    assert why_not(pod(), node("a", taints=[gpu_error])) == "node(s) had untolerated taint {nvidia.com/gpu-error: fatal}"
    assert why_not(pod(), node("a", taints=[{**gpu_error, "effect": "PreferNoSchedule"}])) is None
    assert why_not(pod(nodeSelector={"pool": "h100"}), node("a")) == c.SCHEDULER_AFFINITY_MISMATCH
    assert why_not(pod(nodeSelector={"pool": "h100"}), node("a", {"pool": "h100"})) is None
    expressions = [{"key": "pool", "operator": "In", "values": ["h100", "a100"]}, {"key": "bad", "operator": "DoesNotExist"}]
    either = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": expressions}, {"matchFields": [{"key": c.NODE_NAME_FIELD, "operator": "In", "values": ["z"]}]}]}}}
    assert why_not(pod(affinity=either), node("a", {"pool": "a100"})) is None
    assert why_not(pod(affinity=either), node("a", {"pool": "a100", "bad": ""})) == c.SCHEDULER_AFFINITY_MISMATCH
    assert why_not(pod(affinity=either), node("z")) is None, "the terms are ORed"
    assert why_not(pod(affinity=avoiding("a", "b")), node("b")) == c.SCHEDULER_AFFINITY_MISMATCH
    assert why_not(pod(affinity=avoiding("a", "b")), node("c")) is None
    assert failed_scheduling_message(
        [c.SCHEDULER_AFFINITY_MISMATCH, *["node(s) had untolerated taint {nvidia.com/gpu-error: fatal}"] * 3]
    ) == ("0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 3 node(s) had untolerated "
          "taint {nvidia.com/gpu-error: fatal}. preemption: 0/4 nodes are available: 4 Preemption is not helpful for scheduling.")


def test_a_pods_requests_are_summed_as_kube_scheduler_sums_them() -> None:
    """PodRequests: containers summed, a limit alone stands for its request (the API server's defaulting), an init
    container is a floor, a sidecar adds to the sum, the overhead is added last."""
    gpu = {"resources": {"limits": {"nvidia.com/gpu": "8"}, "requests": {"cpu": "500m", "memory": "1Gi"}}}
    wanted = pod_requests(pod(
        containers=[gpu, {"resources": {"requests": {"cpu": "1.5"}}}],
        initContainers=[{"resources": {"requests": {"cpu": "4"}}},
                        {"restartPolicy": "Always", "resources": {"requests": {"memory": "512Mi"}}}],
        overhead={"cpu": "250m"}))
    assert wanted == {"nvidia.com/gpu": 8, "cpu": Decimal("4.25"), "memory": Decimal(2**30 + 2**29)}
    assert pod_requests(pod(containers=[{"resources": {"requests": {"cpu": "0"}}}])) == {}, "nothing asked: fits anywhere"


def test_node_resources_fit_is_short_of_allocatable_minus_what_is_bound_there() -> None:
    node8 = {"metadata": {"name": "a"}, "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96"}}}
    asks = {"nvidia.com/gpu": Decimal(4)}
    assert insufficient(asks, node8, {"nvidia.com/gpu": Decimal(4)}) is None
    assert insufficient(asks, node8, {"nvidia.com/gpu": Decimal(6)}) == Refusal(("Insufficient nvidia.com/gpu",), True)
    assert insufficient({"nvidia.com/gpu": Decimal(16)}, node8, {}) == Refusal(("Insufficient nvidia.com/gpu",), False)
    assert insufficient({"example.com/fpga": Decimal(1)}, node8, {}) == Refusal(("Insufficient example.com/fpga",), False)
    tainted = Refusal(("node(s) had untolerated taint {nvidia.com/gpu-error: fatal}",))
    full = Refusal(("Insufficient cpu", "Insufficient nvidia.com/gpu"), True)
    assert refusal_message([tainted, full, full, Refusal(("Insufficient nvidia.com/gpu",), False)]) == (
        "0/4 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu-error: fatal}, 2 Insufficient cpu, "
        "3 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 2 No preemption victims found for "
        "incoming pod, 2 Preemption is not helpful for scheduling.")


# ----------------------------------------------------------------------------------------------------
# the offline cluster


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with FakeCluster([NS]) as fake:
        yield fake
        assert not fake.errors, fake.errors


def test_the_offline_cluster_has_nodes_a_kubelet_registered(cluster: FakeCluster) -> None:
    core = client.CoreV1Api(cluster.api_client())
    nodes = core.list_node().items
    assert [n.metadata.name for n in nodes] == [f"node-{i}" for i in range(4)]
    first = core.read_node("node-0")
    assert first.metadata.labels == {c.HOSTNAME_LABEL: "node-0", c.OS_LABEL: "linux", c.ARCH_LABEL: "amd64"}
    ready = next(x for x in first.status.conditions if x.type == "Ready")
    assert (ready.status, ready.reason, ready.message) == ("True", "KubeletReady", "kubelet is posting ready status")
    assert first.status.capacity["nvidia.com/gpu"] == "8" and first.status.allocatable["nvidia.com/gpu"] == "8"
    assert {"cpu", "memory", "pods"} <= set(first.status.allocatable)
    version = client.VersionApi(cluster.api_client()).get_code().git_version
    assert first.status.node_info.kubelet_version == version == EMULATED_VERSION


def test_the_offline_cluster_plays_a_hardware_fault_as_gke_reports_it(cluster: FakeCluster) -> None:
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    cluster.hardware("workers-0-1", xid=79, after=0.2)
    cluster.hardware("workers-1-0", xid=74, after=0.2)  # not one the device plugin monitors: no condition
    submit(api, gpu_spec("gke"))

    def failed() -> dict[str, Any]:
        found = {p.spec.hostname: p for p in pods_of(core, "gke") if terminated(p) and terminated(p).exit_code == 1}
        return found if len(found) == 2 else {}

    hit = wait_until(failed, "both struck pods to exit 1")
    lost, nvlink = hit["gke-workers-0-1"], hit["gke-workers-1-0"]
    end = terminated(lost)
    assert (end.exit_code, end.reason) == (1, "Error")
    assert end.message == log_tail(torch_traceback(79))
    assert end.message.rstrip().endswith(c.TORCH_CUDA_DSA_LINE)
    assert "CUDA error: unspecified launch failure" in end.message
    log = core.read_namespaced_pod_log(lost.metadata.name, NS, _preload_content=False).data.decode()
    assert log.startswith("Traceback (most recent call last):") and "torch.AcceleratorError" in log

    events = core.list_namespaced_event(
        "default", field_selector=f"{NODE_EVENTS},{c.INVOLVED_OBJECT_NAME_FIELD}={lost.spec.node_name}").items
    assert [(e.type, e.reason, e.message) for e in events] == [("Warning", "XIDError", "Caught XID error, XID=79")]
    assert events[0].source.component == "nvidia-gpu-device-plugin" and events[0].involved_object.kind == "Node"
    assert events[0].involved_object.namespace is None
    by_kind = core.list_namespaced_event("default", field_selector=NODE_EVENTS).items
    assert sorted(e.message for e in by_kind) == ["Caught XID error, XID=74", "Caught XID error, XID=79"]
    assert core.list_namespaced_event(NS, field_selector=NODE_EVENTS).items == [], "node events live in default"

    broken = core.read_node(lost.spec.node_name)
    xid = next(x for x in broken.status.conditions if x.type == "XidCriticalError")
    assert (xid.status, xid.reason, xid.message) == ("True", '{"79":true}', broken.status.node_info.boot_id)
    if nvlink.spec.node_name != lost.spec.node_name:
        assert not any(x.type == "XidCriticalError" for x in core.read_node(nvlink.spec.node_name).status.conditions)


def test_a_long_output_keeps_only_its_tail_as_the_termination_message(cluster: FakeCluster) -> None:
    words = "".join(f"step {n}: loss 0.{n:04d}\n" for n in range(300)) + "boom\n"
    cluster.hardware("workers-0-0", xid=48, after=0.1, message=words)
    cluster.exit("workers-1-1", 3, after=0.1, message=words)
    core = client.CoreV1Api(cluster.api_client())
    submit(cluster.api_client(), gpu_spec("long"))

    def ended() -> list[Any]:
        found = [terminated(p) for p in pods_of(core, "long") if terminated(p) and terminated(p).exit_code in (1, 3)]
        return found if len(found) == 2 else []

    for end in wait_until(ended, "both pods to fail"):
        assert end.message == log_tail(words) and len(end.message.splitlines()) == 80 and end.message.endswith("boom\n")


def test_a_pod_kept_off_a_node_lands_on_the_others(cluster: FakeCluster) -> None:
    core = client.CoreV1Api(cluster.api_client())
    submit(cluster.api_client(), gpu_spec("away", gpus=4, affinity=avoiding("node-0")))  # 4 pods on 3 nodes of 8 GPUs
    placed = wait_until(lambda: [p.spec.node_name for p in pods_of(core, "away") if p.spec.node_name] if len(
        [p for p in pods_of(core, "away") if p.spec.node_name]) == 4 else [], "four pods bound")
    assert "node-0" not in placed and set(placed) == {"node-1", "node-2", "node-3"}


def test_a_pod_every_node_refuses_stays_pending_as_the_scheduler_says(cluster: FakeCluster) -> None:
    core = client.CoreV1Api(cluster.api_client())
    taint = {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"}
    for name in ("node-1", "node-2", "node-3"):
        core.patch_node(name, {"spec": {"taints": [taint]}})
    submit(cluster.api_client(), gpu_spec("nowhere", gpus=2, affinity=avoiding("node-0")))  # all 4 fit on one node

    def pending() -> list[Any]:
        found = [p for p in pods_of(core, "nowhere")
                 if any(x.type == "PodScheduled" and x.status == "False" for x in p.status.conditions or [])]
        return found if len(found) == 4 else []

    stuck = wait_until(pending, "four unschedulable pods")
    message = ("0/4 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 3 node(s) had untolerated "
               "taint {nvidia.com/gpu-error: fatal}. preemption: 0/4 nodes are available: 4 Preemption is not helpful "
               "for scheduling.")
    for found in stuck:
        scheduled = next(x for x in found.status.conditions if x.type == "PodScheduled")
        assert (found.status.phase, scheduled.reason, scheduled.message) == ("Pending", "Unschedulable", message)
        assert found.spec.node_name is None
    events = core.list_namespaced_event(NS, field_selector=f"reason={c.EVENT_FAILED_SCHEDULING}").items
    assert len(events) == 4 and {e.message for e in events} == {message}

    core.patch_node("node-2", {"spec": {"taints": []}})  # the node is repaired: the pods bind there
    wait_until(lambda: {p.spec.node_name for p in pods_of(core, "nowhere")} == {"node-2"}, "the pods on node-2")


INSUFFICIENT_GPU_NO_HELP = ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
                            "4 Preemption is not helpful for scheduling.")


def scheduled_false(pods: list[Any]) -> list[Any]:
    """The pods the scheduler refused, as `kubectl describe pod` shows them: PodScheduled False."""
    return [p for p in pods if any(x.type == "PodScheduled" and x.status == "False" for x in p.status.conditions or [])]


def refusal_of(pod: Any) -> tuple[str, str, str, str | None]:
    scheduled = next(x for x in pod.status.conditions if x.type == "PodScheduled")
    return pod.status.phase, scheduled.reason, scheduled.message, pod.spec.node_name


def test_a_pod_asking_for_more_gpus_than_a_node_has_is_refused_as_kube_scheduler_refuses_it(cluster: FakeCluster) -> None:
    """16 GPUs per pod on nodes of 8 allocatable: no node can ever fit it, whatever is evicted (fit.go marks it
    Unresolvable), so the message says preemption cannot help."""
    core = client.CoreV1Api(cluster.api_client())
    submit(cluster.api_client(), gpu_spec("huge", gpus=16))
    stuck = wait_until(lambda: (lambda found: found if len(found) == 4 else [])(scheduled_false(pods_of(core, "huge"))),
                       "four unschedulable pods")
    assert {refusal_of(p) for p in stuck} == {("Pending", "Unschedulable", INSUFFICIENT_GPU_NO_HELP, None)}
    events = core.list_namespaced_event(NS, field_selector=f"reason={c.EVENT_FAILED_SCHEDULING}").items
    assert len(events) == 4 and {(e.type, e.message) for e in events} == {("Warning", INSUFFICIENT_GPU_NO_HELP)}


def test_pods_that_fill_the_nodes_keep_the_next_ones_pending_until_their_room_is_free(cluster: FakeCluster) -> None:
    """Four pods of 8 GPUs fill the four nodes; four more wait, told that no victim could be evicted (their
    request fits an empty node), and are bound once the first JobSet is gone and its pods with it."""
    api = cluster.api_client()
    core = client.CoreV1Api(api)
    submit(api, gpu_spec("first"))
    placed = wait_until(lambda: (lambda n: n if len(n) == 4 else [])([p.spec.node_name for p in pods_of(core, "first") if p.spec.node_name]),
                        "the first JobSet's four pods bound")
    assert sorted(placed) == [f"node-{i}" for i in range(4)], "one pod of 8 GPUs per node of 8"
    submit(api, gpu_spec("second"))
    waiting = wait_until(lambda: (lambda found: found if len(found) == 4 else [])(scheduled_false(pods_of(core, "second"))),
                         "the second JobSet's four pods refused")
    no_victim = ("0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No "
                 "preemption victims found for incoming pod.")
    assert {refusal_of(p) for p in waiting} == {("Pending", "Unschedulable", no_victim, None)}

    group, version = c.JOBSET_API_VERSION.split("/")
    client.CustomObjectsApi(api).delete_namespaced_custom_object(group, version, NS, c.JOBSET_PLURAL, "first",
                                                                 propagation_policy="Foreground")
    bound = wait_until(lambda: (lambda n: n if len(n) == 4 else [])([p.spec.node_name for p in pods_of(core, "second") if p.spec.node_name]),
                       "the second JobSet's pods bound once the first's ended")
    assert sorted(bound) == [f"node-{i}" for i in range(4)]


def test_cpu_and_memory_beyond_a_nodes_allocatable_are_refused_too(cluster: FakeCluster) -> None:
    """A node of 96 CPUs and about 1 TB: a pod asking 200 CPUs and 2 Ti is short of both on every node."""
    core = client.CoreV1Api(cluster.api_client())
    spec = JobSetSpec(name="fat", namespace=NS, replicated_jobs=[ReplicatedJob(
        "workers", image="ghcr.io/acme/train:1", command=["python", "train.py"], resources={"cpu": "200", "memory": "2Ti"})])
    submit(cluster.api_client(), spec)
    stuck = wait_until(lambda: scheduled_false(pods_of(core, "fat")), "the pod refused")
    assert refusal_of(stuck[0])[2] == ("0/4 nodes are available: 4 Insufficient cpu, 4 Insufficient memory. preemption: "
                                      "0/4 nodes are available: 4 Preemption is not helpful for scheduling.")


def test_a_run_asking_for_more_gpus_than_any_node_has_ends_unschedulable_not_succeeded(cluster: FakeCluster) -> None:
    """What a user tests Unschedulable with: the run ends after the policy's timeout, diagnosed from the
    scheduler's own words, and deletes what it submitted."""
    spec = gpu_spec("nofit", gpus=16)
    spec = JobSetSpec(name=spec.name, namespace=NS, replicated_jobs=spec.replicated_jobs,
                      retry=RetryPolicy(retries=0, unschedulable_timeout_seconds=0.5, backoff=tenacity.wait_none()))
    result = JobSetRun(spec, cluster.runtime(NS), run_key="nofit-run").run()
    assert not result.succeeded and result.diagnosis is not None
    assert result.diagnosis.kind == "Unschedulable", result.diagnosis.summary
    said = [result.diagnosis.summary, *result.diagnosis.evidence]
    assert any(INSUFFICIENT_GPU_NO_HELP in line for line in said), said


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_kubectl_lists_the_nodes_of_jobset_fake_cluster_and_sees_a_hardware_fault(tmp_path: Path) -> None:
    from tests.test_fake_cluster_server import ServerProcess, jobset_manifest

    served = ServerProcess(tmp_path, "--nodes", "3", "--node-label", "pool=h100")
    try:
        table = served.kubectl("get", "nodes", "-l", "pool=h100").stdout.splitlines()
        assert table[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        assert [row.split()[:3] for row in table[1:]] == [[f"node-{i}", "Ready", "<none>"] for i in range(3)]
        assert all(row.split()[-1] == EMULATED_VERSION for row in table[1:])
        wide = served.kubectl("get", "nodes", "-o", "wide").stdout
        assert "INTERNAL-IP" in wide and "CONTAINER-RUNTIME" in wide
        manifest = tmp_path / "js.yaml"
        manifest.write_text(json.dumps(jobset_manifest("hw")))
        served.kubectl("apply", "-f", str(manifest))
        added = served.fate("hardware", "--replica", "workers-0-0", "--jobset", "hw", "--xid", "79")
        assert added.returncode == 0, added.stderr
        refused = served.fate("hardware", "--replica", "workers-0-0", "--jobset", "hw", "--xid", "31")
        assert refused.returncode == 2 and "fate.xid" in refused.stderr and "not a fatal Xid" in refused.stderr

        def node_events() -> list[dict[str, Any]]:
            listed = served.kubectl("get", "events", "-n", "default", "--field-selector", NODE_EVENTS, "-o", "json")
            return json.loads(listed.stdout)["items"]

        event = wait_until(node_events, "the node's XIDError event", timeout=30)[0]
        assert (event["reason"], event["message"]) == ("XIDError", "Caught XID error, XID=79")
        described = served.kubectl("describe", "node", event["involvedObject"]["name"]).stdout
        assert "XidCriticalError" in described and '{"79":true}' in described
    finally:
        served.stop()


# ----------------------------------------------------------------------------------------------------
# the local runtime


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def settled(runtime: LocalRuntime, handle: Handle) -> Observation:
    """The observation once the attempt ended and every pod with it."""
    def done() -> Observation | None:
        seen = runtime.observe(handle)
        ended = seen.main is not None and state_of(seen.main).terminal
        return seen if ended and all((p.get("status") or {}).get("phase") in c.POD_ENDED_PHASES for p in seen.pods) else None

    return wait_until(done, "the attempt to end", timeout=30)


def test_the_local_runtime_plays_a_hardware_fault_on_a_real_process(tmp_path: Path) -> None:
    runtime = LocalRuntime(workdir=tmp_path, faults=[Hardware("workers-0-1", after_seconds=0.3, xid=79)],
                           grace_seconds=0.5, stream_output=False, tick_seconds=0.1)
    try:
        spec = gpu_spec("local-gpu", command=py("print('epoch 1 loss 0.5', flush=True)\nimport time\ntime.sleep(60)"))
        handle = runtime.submit(spec.manifests(), run_key="local-gpu", attempt=0)
        seen = settled(runtime, handle)
    finally:
        runtime.close()
    struck = next(p for p in seen.pods if p["spec"]["hostname"] == "local-gpu-workers-0-1")
    end = struck["status"]["containerStatuses"][0]["state"]["terminated"]
    assert (end["exitCode"], end["reason"]) == (1, "Error")
    assert end["message"].startswith("epoch 1 loss 0.5\nTraceback (most recent call last):")
    assert end["message"] == log_tail("epoch 1 loss 0.5\n" + torch_traceback(79))
    assert end["message"].rstrip().endswith(c.TORCH_CUDA_DSA_LINE)
    node_name = struck["spec"]["nodeName"]
    assert [n["metadata"]["name"] for n in seen.nodes] == [node_name]
    xid = next(x for x in seen.nodes[0]["status"]["conditions"] if x["type"] == c.GKE_XID_CONDITION)
    assert (xid["status"], xid["reason"]) == ("True", '{"79":true}')
    said = [e for e in seen.events if e["involvedObject"]["kind"] == c.NODE_KIND]
    assert [(e["reason"], e["message"], e["metadata"]["namespace"]) for e in said] == [
        ("XIDError", "Caught XID error, XID=79", "default")]


def test_the_local_runtime_runs_a_pod_that_avoids_its_node_there_and_says_so(tmp_path: Path, caplog: Any) -> None:
    runtime = LocalRuntime(workdir=tmp_path, faults=(), grace_seconds=0.5, stream_output=False, tick_seconds=0.1)
    local = runtime._node.name
    try:
        spec = gpu_spec("elsewhere", affinity=avoiding(local), command=py("print('ran')"))
        with caplog.at_level("INFO", logger="jobset_core.runtimes.local.runtime"):
            handle = runtime.submit(spec.manifests(), run_key="elsewhere", attempt=0)
            seen = settled(runtime, handle)
    finally:
        runtime.close()
    assert all(p["status"]["phase"] == c.PHASE_SUCCEEDED and p["spec"]["nodeName"] == local for p in seen.pods)
    said = [r.getMessage() for r in caplog.records if "asks to avoid node" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith("pod elsewhere-workers-") and said[0].endswith(
        f"asks to avoid node {local} (its required node affinity or node selector excludes it); "
        "the local runtime has one node: it runs there")


# ----------------------------------------------------------------------------------------------------
# the Kubernetes runtime reads the nodes' words, for GPU workloads only


def make_runtime(server: LocalApiServer) -> KubernetesRuntime:
    return KubernetesRuntime(server.api_client(), NS, retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
                             watch_timeout_seconds=2, tick_seconds=0.1, cancel_timeout_seconds=15)


def node_reads(server: LocalApiServer) -> list[str]:
    """The requests that read node facts: a Node by name, or the node events of `default`."""
    return [r.path for r in server.requests
            if r.path.startswith("/api/v1/nodes") or (r.path == "/api/v1/namespaces/default/events"
                                                     and NODE_EVENTS in str(r.query.get("fieldSelector", "")))]


def failed_look(runtime: KubernetesRuntime, handle: Handle) -> Observation:
    """A direct look once the attempt ended and its teardown with it (every failure it will have is there)."""
    def ended() -> Observation | None:
        seen = runtime.observe(handle)
        done = seen.main is not None and state_of(seen.main).terminal
        return seen if done and all((p.get("status") or {}).get("phase") in c.POD_ENDED_PHASES for p in seen.pods) else None

    wait_until(ended, "the attempt and its teardown to end", timeout=20)
    return runtime.observe(handle)


@pytest.fixture
def gpu_cluster() -> Iterator[tuple[LocalApiServer, ClusterDriver]]:
    with LocalApiServer(seed=11, namespaces=[NS]) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        yield server, driver
        assert not driver.errors, driver.errors


def test_a_gpu_failure_brings_the_nodes_and_their_events_into_the_observation(
    gpu_cluster: tuple[LocalApiServer, ClusterDriver],
) -> None:
    server, driver = gpu_cluster
    driver.hardware("workers-0-1", xid=79, after=0.2)
    runtime = make_runtime(server)
    handle = runtime.submit(gpu_spec("gpu").manifests(), run_key="gpu-run", attempt=0)
    seen = failed_look(runtime, handle)
    failed, nodes = failed_pod_nodes(seen.pods)
    struck = next(p for p in seen.pods if p["spec"].get("hostname") == "gpu-workers-0-1")
    assert nodes[0] == struck["spec"]["nodeName"], "the failure that is not a teardown is read first"
    assert [n["metadata"]["name"] for n in seen.nodes] == nodes
    broken = seen.nodes[0]
    assert broken["kind"] == "Node" and any(x["type"] == c.GKE_XID_CONDITION for x in broken["status"]["conditions"])
    said = [e for e in seen.events if e["involvedObject"]["kind"] == c.NODE_KIND]
    assert [(e["involvedObject"]["name"], e["message"]) for e in said] == [(nodes[0], "Caught XID error, XID=79")]
    times = [str(e.get("lastTimestamp") or e.get("eventTime") or "") for e in seen.events]
    assert times == sorted(times), "node events are among the others, by time"

    server.clear_requests()
    again = runtime.observe(handle)
    assert node_reads(server) == [], "the same failure is not read twice"
    assert again.nodes == seen.nodes


def node_reads_of_first_look(nodes: list[str]) -> list[str]:
    """What the first look read: each Node once (the events list is one request besides)."""
    return [f"/api/v1/nodes/{n}" for n in nodes]


def test_a_gpu_look_costs_one_get_per_node_and_one_list_of_events(gpu_cluster: tuple[LocalApiServer, ClusterDriver]) -> None:
    server, driver = gpu_cluster
    driver.hardware("workers-1-0", xid=48, after=0.2)
    runtime = make_runtime(server)
    handle = runtime.submit(gpu_spec("cost").manifests(), run_key="cost-run", attempt=0)
    wait_until(lambda: any(p.get("status", {}).get("phase") == c.PHASE_FAILED
                           for p in server.list("v1", "Pod", NS)), "a failed pod")
    wait_until(lambda: state_of(server.get(c.JOBSET_API_VERSION, "JobSet", handle.name, NS) or {}).terminal, "the end")
    wait_until(lambda: all((p.get("status") or {}).get("phase") in c.POD_ENDED_PHASES
                           for p in server.list("v1", "Pod", NS)), "every pod ended")
    server.clear_requests()
    seen = runtime.observe(handle)
    _, nodes = failed_pod_nodes(seen.pods)
    reads = node_reads(server)
    assert sorted(reads) == sorted([*node_reads_of_first_look(nodes), "/api/v1/namespaces/default/events"])
    assert len(nodes) <= MAX_NODES


def test_a_cpu_workload_reads_nothing_of_the_nodes(gpu_cluster: tuple[LocalApiServer, ClusterDriver]) -> None:
    server, driver = gpu_cluster
    driver.hardware("workers-0-1", xid=79, after=0.2)  # the node reports it; a CPU run does not ask
    runtime = make_runtime(server)
    handle = runtime.submit(gpu_spec("cpu", gpus=None).manifests(), run_key="cpu-run", attempt=0)
    seen = failed_look(runtime, handle)
    assert any(p["status"].get("phase") == c.PHASE_FAILED for p in seen.pods)
    assert seen.nodes == [] and node_reads(server) == []
    assert not any(e["involvedObject"]["kind"] == c.NODE_KIND for e in seen.events)


def test_a_watch_brings_the_nodes_at_the_decision(gpu_cluster: tuple[LocalApiServer, ClusterDriver]) -> None:
    server, driver = gpu_cluster
    driver.hardware("workers-1-1", xid=79, after=0.2)
    runtime = make_runtime(server)
    handle = runtime.submit(gpu_spec("watched").manifests(), run_key="watched-run", attempt=0)
    watch = runtime.watch(handle)
    deadline = time.monotonic() + 20
    try:
        for seen in watch:
            if seen.state.terminal or time.monotonic() > deadline:
                break
    finally:
        watch.close()
    assert seen.state.terminal, "the attempt did not end in time"
    assert seen.nodes and any(x["type"] == c.GKE_XID_CONDITION for n in seen.nodes for x in n["status"]["conditions"])
    assert any(e["reason"] == "XIDError" for e in seen.events)


@pytest.mark.parametrize("with_gpu_role", [True, False], ids=["with-rbac-gpu-nodes", "without"])
def test_the_runtime_works_with_and_without_the_optional_node_role(with_gpu_role: bool, caplog: Any) -> None:
    rules = rules_from_yaml(ROLE) + (rules_from_yaml(GPU_ROLE) if with_gpu_role else [])
    with LocalApiServer(seed=5, namespaces=[NS], authorize=rules) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        driver.hardware("workers-0-0", xid=79, after=0.2)
        driver.exit("workers-1-1", 1, after=0.4)
        runtime = make_runtime(server)
        handle = runtime.submit(gpu_spec("rbac").manifests(), run_key="rbac-run", attempt=0)
        with caplog.at_level("INFO", logger="jobset_core.runtimes.kube.nodes"):
            seen = failed_look(runtime, handle)
            for _ in range(3):
                runtime.observe(handle)
        runtime.node_reader.facts((NS, "another-attempt"), ["p"], ["node-1", "node-2"])  # a new failure: no new ask
        assert server.authorizer is not None
        denied = list(server.authorizer.denied)
        assert not driver.errors, driver.errors
    if with_gpu_role:
        assert denied == [] and seen.nodes
    else:
        assert denied == [("get", "", "nodes")], "a 403 is asked once per runtime"
        assert seen.nodes == [] and any(e["reason"] == "XIDError" for e in seen.events)
        said = [r for r in caplog.records if "forbidden" in r.getMessage()]
        assert len(said) == 1 and said[0].levelname == "INFO" and "rbac-gpu-nodes.yaml" in said[0].getMessage()


def test_the_nodes_read_are_those_of_real_failures_first_and_bounded() -> None:
    def failed(name: str, node: str, code: int, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})}
        term = {"exitCode": code, "reason": "Error"}
        return {"metadata": meta, "spec": {"nodeName": node},
                "status": {"phase": "Failed", "containerStatuses": [{"state": {"terminated": term}}]}}

    teardown = [failed(f"t{n}", f"node-{n}", 143) for n in range(20)]
    real = failed("culprit", "node-77", 1)
    names, nodes = failed_pod_nodes([*teardown, real])
    assert nodes[0] == "node-77" and len(nodes) == MAX_NODES and "culprit" in names
    assert torn_down(teardown[0]) and not torn_down(real) and torn_down(failed("d", "n", 1, deleting=True))
    assert gpu_workload(None, [{"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}])
    assert not gpu_workload(None, [{"spec": {"containers": [{"resources": {"limits": {"cpu": "8"}}}]}}])
