"""Hardware and fabric faults told from bugs, on failures written from the upstream components' own words.

Every scenario of `tests/gpu_scenarios.py` in its three views (the whole dump, the pods gone with only what a
watcher kept, the JobSet not failed yet): the hardware named with its node and rank and the line that says what
failed, retried free; the controls (the program's own GPU memory, its assertions, a bad record with victims, a bug
before a hardware fault, the same CUDA error or timeout with no node report) stay application errors.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from jobset_core import FailureKind, RetryPolicy, diagnose
from jobset_core import constants as c
from jobset_core.diagnosis import hardware
from tests import gpu_scenarios as g

K = FailureKind
FIXTURES = Path(__file__).parent / "fixtures" / "diagnosis"


def run(scenario: g.Scenario, view: str, **kwargs):
    objects = g.objects(scenario, view)
    now = objects.pop("now")
    return diagnose(**objects, now=now, **kwargs)


HARDWARE = {
    "ecc": (3, "GPU on node gke-a3-3 reported an uncorrectable ECC error (rank 3, pod llama-workers-0-3-r2w6t, container "
               "trainer exited 1 at 09:41:18Z): torch.AcceleratorError: CUDA error: uncorrectable ECC error encountered"),
    "nvlink": (1, "NVLink on node gke-a3-1 reported an uncorrectable NVLink error (rank 1, pod llama-workers-0-1-m4q9z, "
                  "container trainer exited 1 at 09:12:05Z): torch.AcceleratorError: CUDA error: uncorrectable NVLink error "
                  "detected during the execution"),
    "xid79": (5, "GPU on node gke-a3-5 reported Xid 79: fallen off the bus (node event XIDError from nvidia-gpu-device-plugin "
                 "at 09:40:02Z) (rank 5, pod llama-workers-0-5-v9s4k, container trainer exited 1 at 09:41:18Z): "
                 "torch.AcceleratorError: CUDA error: unspecified launch failure"),
    "infiniband": (2, "InfiniBand link on node gke-a3-2 failed: a transfer to 10.5.0.36<33956> completed in error (status 12, "
                      "transport retry counter exceeded) (rank 2, pod llama-workers-0-2-b8d3f, container trainer exited 1 at "
                      "09:30:44Z): NET/IB : Got completion from peer 10.5.0.36<33956> with status=12 opcode=0 len=0 vendor err 129 (Send)"),
    "watchdog": (6, "NVLink on node gke-a3-6 reported Xid 74: an NVLink error (node event NVRMXid from kernel-monitor at "
                    "09:29:51Z) (rank 6, pod llama-workers-0-6-p3j7m, container trainer exited 143 at 09:39:54Z): "
                    "NVRM: Xid (PCI:0000:3b:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 3"),
    "nvsentinel": (4, "GPU on node gke-a3-4 reported Xid 48: a double-bit (uncorrectable) ECC error in its memory (node "
                      "condition SysLogsXIDError at 09:19:40Z) (rank 4, pod llama-workers-0-4-h5n1c, container trainer "
                      "exited 143 at 09:20:12Z): SysLogsXIDError=True SysLogsXIDErrorIsNotHealthy: ErrorCode:48"),
}


@pytest.mark.parametrize("view", g.VIEWS)
@pytest.mark.parametrize("name", list(HARDWARE))
def test_a_hardware_fault_is_named_with_its_node_rank_and_the_line_that_says_what_failed(name, view):
    rank, said = HARDWARE[name]
    d = run(g.HARDWARE[name](), view)
    assert (d.kind, d.retryable) == (K.HARDWARE_FAILURE, True), d.summary
    assert (d.pod, d.node, d.rank) == (g.pod_name(rank), g.node(rank), rank), d.summary
    assert d.summary.startswith(f"HardwareFailure: {said}"), d.summary
    assert d.faulty_nodes == [g.node(rank)]
    assert "TORCH_USE_CUDA_DSA" not in d.summary and "\n" not in d.summary
    assert d.in_flight is (view == "in_flight")
    # the one budget: the platform's failure is free, and the retry is kept off the node
    decision = RetryPolicy(retries=0).decide(d)
    assert decision.retry and not decision.counted and decision.avoid_nodes == (g.node(rank),)


CONTROLS = {
    "torch-oom": (1, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."),
    "device-assert": (0, "exited 1 at 09:08:44Z: torch.AcceleratorError: CUDA error: device-side assert triggered"),
    "data-error": (4, "exited 1 at 09:15:30Z: ValueError: invalid literal for int() with base 10: 'N/A' (shard 00417, record "
                      "88213)"),
    "bug-then-ecc": (1, "exited 1 at 09:41:18Z: ValueError: invalid literal"),
    "launch-failure-unreported": (5, "exited 1 at 09:41:18Z: torch.AcceleratorError: CUDA error: unspecified launch failure"),
    "watchdog-unreported": (0, "exited 1 at 09:39:52Z: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=6463, "
                               "OpType=ALLREDUCE, NumelIn=268435456, NumelOut=268435456, Timeout(ms)=600000) ran for 600047 "
                               "milliseconds before timing out. (every rank times out alike and no node reported a hardware "
                               "fault before it: no rank can be singled out)"),
}


@pytest.mark.parametrize("view", g.VIEWS)
@pytest.mark.parametrize("name", list(CONTROLS))
def test_the_programs_own_failures_stay_application_errors(name, view):
    rank, said = CONTROLS[name]
    d = run(g.CONTROLS[name](), view)
    assert (d.kind, d.retryable, d.pod, d.rank) == (K.APPLICATION_ERROR, False, g.pod_name(rank), rank), d.summary
    assert said in d.summary, d.summary
    assert d.faulty_nodes == [] and RetryPolicy(retries=3).decide(d).retry is False


def test_every_termination_message_is_the_kubelets_tail():
    for make in (*g.HARDWARE.values(), *g.CONTROLS.values()):
        for p in g.objects(make())["pods"]:
            message = p["status"]["containerStatuses"][0]["state"]["terminated"].get("message", "")
            assert len(message.encode()) <= c.TERMINATION_MESSAGE_LOG_BYTES
            assert len(message.splitlines()) <= c.TERMINATION_MESSAGE_LOG_LINES


def test_an_ecc_error_cut_out_of_the_tail_by_later_lines_is_not_guessed():
    """The kubelet keeps 2048 bytes: an error printed before 2 KiB of other output is gone, and nothing claims it."""
    scenario = g.ecc_on_rank_3()
    scenario.ranks[3].log = g.ECC + "".join(f"[rank3] flushing shard {i:04d} of the checkpoint before exit\n" for i in range(60))
    d = run(scenario, "full")
    assert d.kind is K.APPLICATION_ERROR and d.pod == g.pod_name(3)


def test_the_rank_on_the_broken_node_wins_although_another_rank_timed_out_first():
    d = run(g.every_rank_times_out(), "full")
    first_to_end = g.pod_name(0)
    assert d.pod == g.pod_name(6) != first_to_end
    assert "after it, 7 peers then failed on the lost connection (of the pods still on record)" in d.evidence


def test_a_node_fault_long_before_the_failure_or_after_it_explains_nothing():
    late = g.fallen_off_the_bus_on_rank_5()
    late.node_events = [g.gke_xid_event(5, 79, g.at(41, 30))]  # after the pod failed
    assert run(late, "full").kind is K.APPLICATION_ERROR
    old = g.fallen_off_the_bus_on_rank_5()
    old.node_events = [g.gke_xid_event(5, 79, g.at(-30))]  # more than an hour before
    assert run(old, "full").kind is K.APPLICATION_ERROR


def test_a_report_explains_a_failure_only_within_the_collective_timeout_and_the_grace_period_after_it():
    """`NODE_FAULT_WINDOW`: a rank on a broken GPU fails at its next CUDA call or when its collective times out (10
    minutes by default), its pod within its grace period (30 s); a pod that ran on longer was not the report's victim."""
    assert hardware.NODE_FAULT_WINDOW.total_seconds() == 630
    failed_at = g.at(41, 18)
    for before, kind in ((629, K.HARDWARE_FAILURE), (631, K.APPLICATION_ERROR)):
        case = g.fallen_off_the_bus_on_rank_5()
        case.node_events = [g.gke_xid_event(5, 79, failed_at - timedelta(seconds=before))]
        assert run(case, "full").kind is kind, before


def test_a_direct_cause_before_a_teardown_wins_over_a_fresh_report_on_the_torn_down_pods_node():
    """The user's case (fixture 90) with the Xid three minutes before the preemption instead of thirteen: the pod on the
    reporting node was torn down after the preemption, so it is the preemption's victim, and its node is not blamed."""
    case = json.loads((FIXTURES / "90-hardware-stale-xid-then-preemption.json").read_text())
    fresh = "2026-11-22T11:57:02Z"
    (event,) = [e for e in case["events"] if e["reason"] == c.GKE_XID_EVENT_REASON]
    event["firstTimestamp"] = event["lastTimestamp"] = fresh
    case["nodes"][0]["status"]["conditions"][-1]["lastTransitionTime"] = fresh
    now = datetime.fromisoformat(case["now"].replace("Z", "+00:00"))
    d = diagnose(jobset=case["jobset"], jobs=case["jobs"], pods=case["pods"], events=case["events"], nodes=case["nodes"], now=now)
    assert (d.kind, d.pod, d.faulty_nodes) == (K.PREEMPTED, "demo-workers-1-2-n52vw", []), d.summary
    # (with no direct cause before it, a torn-down pod on a reporting node is the report's: scenarios nvsentinel, watchdog)


def test_application_xids_and_informational_ones_are_not_hardware():
    for xid in (13, 31, 43, 45, 63, 92, 109):
        case = g.fallen_off_the_bus_on_rank_5()
        case.node_events = [g.gke_xid_event(5, xid, g.at(40, 2))]
        assert run(case, "full").kind is K.APPLICATION_ERROR, xid


def test_a_site_signature_names_its_own_hardware_and_a_bad_one_is_a_clear_error():
    d = run(g.site_signature_on_rank_6(), "full", signatures=[(r"MYSITE-E\d+", "HardwareFailure")])
    assert (d.kind, d.pod, d.faulty_nodes) == (K.HARDWARE_FAILURE, g.pod_name(6), [g.node(6)])
    assert "the site's signature 'MYSITE-E\\\\d+'" in d.summary and d.summary.endswith("fabric port flap on hsn3, giving up")
    assert run(g.site_signature_on_rank_6(), "full").kind is K.APPLICATION_ERROR
    # a site can say the opposite too: a line of its own framework that means "retry me"
    d = run(g.site_signature_on_rank_6(), "full", signatures=[("fabric port flap", "SystemError")])
    assert (d.kind, d.retryable) == (K.SYSTEM_ERROR, True)
    with pytest.raises(ValueError, match=r"signatures: '\(MYSITE' is not a regular expression"):
        run(g.site_signature_on_rank_6(), "full", signatures=[("(MYSITE", "HardwareFailure")])
    with pytest.raises(ValueError, match="is not a \\(pattern, failure kind\\) pair"):
        run(g.site_signature_on_rank_6(), "full", signatures=[("MYSITE", "Broken")])


def test_a_site_signature_on_a_node_event_marks_that_node():
    case = g.every_rank_times_out(None)
    case.node_events = [g._node_event(3, "HsnLinkDown", "hsn2: link down (cable fault, port 17)", g.at(35), "acme-fabric-monitor")]
    d = run(case, "full", signatures=[("link down \\(cable fault", "HardwareFailure")])
    assert (d.kind, d.pod) == (K.HARDWARE_FAILURE, g.pod_name(3))
    assert "node event HsnLinkDown from acme-fabric-monitor" in d.summary


def test_a_pod_deleted_by_someone_is_the_culprit_although_its_job_failed_in_the_same_second():
    d = run(g.deleted_by_someone(), "full")
    assert (d.kind, d.pod, d.retryable) == (K.INTERRUPTED, g.pod_name(2), True)
    assert "was deleted at 09:22:07Z (exit 143) by someone, not in a controller's teardown" in d.summary
    # Without the Job controller's word on the pods it deleted (events are rate-limited and folded), the times still
    # say it: the Job counted a failure before it decided, and the deleted pod is the only one that had ended by then.
    objects = g.objects(g.deleted_by_someone())
    now = objects.pop("now")
    objects["events"] = [e for e in objects["events"] if e["reason"] != c.EVENT_SUCCESSFUL_DELETE]
    assert diagnose(**objects, now=now).pod == g.pod_name(2)


@pytest.mark.parametrize(
    "text,reason,component",
    [
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered\nCUDA kernel errors might be asynchronously reported at "
         "some other API call,so the stacktrace below might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
         "ECCUncorrectable", "GPU"),
        ("torch.AcceleratorError: CUDA error: uncorrectable NVLink error detected during the execution", "NVLinkUncorrectable", "NVLink"),
        ("pynvml.NVMLError_GpuIsLost: GPU is lost", "GPULost", "GPU"),
        ("Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost. Reboot the system to recover this GPU", "GPULost", "GPU"),
        ("[  812.441251] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "Xid79", "GPU"),
        ("NVRM: Xid (PCI:0000:1a:00 GPU-I:01): 48, pid=4211, name=python, Ch 00000008, DBE", "Xid48", "GPU"),
        ("NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system has\nNVRM: fallen off the bus and "
         "is not responding to commands.", "Xid79", "GPU"),
        ("host:12:13 [0] transport/net_ib.cc:1302 NCCL WARN NET/IB : Got completion from peer 10.1.2.3<4456> with error 12, "
         "opcode 0, len 0, vendor err 129 (Send)", "IBCompletionError", "InfiniBand link"),
        ("host:12:13 [1] transport/net_ib.cc:1912 NCCL WARN NET/IB: Got completion from peer 10.1.2.3<4456> with "
         "status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 hca mlx5_0", "IBCompletionError", "InfiniBand link"),
        ("host:12:13 [0] transport/net_ib.cc:101 NCCL WARN NET/IB : mlx5_3:1 Got async event : port error", "IBAsyncEvent",
         "network adapter mlx5_3"),
        ("host:12:13 [0] transport/net_ib.cc:98 NCCL WARN NET/IB : mlx5_0:1 async fatal event: local catastrophic error",
         "IBAsyncEvent", "network adapter mlx5_0"),
    ],
)
def test_each_signature_family_from_its_upstream_text(text, reason, component):
    found = hardware.log_evidence(text).fault
    assert found is not None and (found.reason, found.component) == (reason, component)
    assert found.quote in text


@pytest.mark.parametrize(
    "text",
    [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB",
        "RuntimeError: CUDA error: out of memory",
        "RuntimeError: CUDA error: device-side assert triggered",
        "RuntimeError: CUDA error: invalid device ordinal\nGPU device may be out of range, do you have enough GPUs?",
        "NET/IB : mlx5_0:1 Got async event : GID table change",
        c.NCCL_REMOTE_ERROR_TEXT,
        "socketProgress: Connection closed by remote peer llama-workers-0-3.llama<49622>",
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=4211, name=python, Graphics SM Warp Exception",
    ],
)
def test_what_no_hardware_fault_says(text):
    assert hardware.log_evidence(text).fault is None


def test_node_reports_from_each_health_reporter():
    gke = {"type": c.GKE_XID_CONDITION, "status": "True", "reason": '{"79":true}', "message": "3e9c4b8a-boot",
           "lastTransitionTime": "2026-11-22T09:40:02Z"}
    taint = {"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule", "timeAdded": "2026-11-22T09:40:05Z"}
    nodes = [g.node_object(1, [gke]), g.node_object(2, taints=[taint]), g.node_object(3, [g.nvsentinel_condition(63, g.at(1))])]
    faults = hardware.node_faults([], nodes)
    assert [f.reason for f in faults["gke-a3-1"]] == ["Xid79"]
    assert faults["gke-a3-2"][0].what == "is tainted nvidia.com/gpu-error=fatal:NoSchedule by its GPU health check"
    # Xid 63 (a row-remapping event) is informational; NVSentinel still calls the node unhealthy, and says so
    assert faults["gke-a3-3"][0].what == "is unhealthy"
    assert hardware.node_faults([g.gke_xid_event(4, 43, g.at(2))], []) == {}


def test_the_kubelet_tail_keeps_80_lines_cut_to_2048_bytes():
    log = "".join(f"line {i}\n" for i in range(200))
    assert g.kubelet_tail(log).splitlines()[0] == "line 120"
    long = "x" * 3000 + "\nlast\n"
    tail = g.kubelet_tail(long)
    assert len(tail.encode()) == 2048 and tail.endswith("last\n")
    assert re.fullmatch(r"x+\nlast\n", tail)
