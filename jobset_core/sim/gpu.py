"""What a broken GPU makes the node and the program say: the one text both emulated kubelets play.

A hardware fault (`faults.Hardware`, an NVIDIA Xid) travels as on a GKE GPU node: the driver logs the Xid in the
kernel log; GKE's GPU device plugin (container-engine-accelerators `pkg/gpu/nvidia/health_check/health_checker.go`)
posts a Warning event `XIDError` ("Caught XID error, XID=79") on the Node and, for the Xids it monitors, sets
the Node's condition `XidCriticalError` whose reason is the JSON map of the Xids seen (`{"79":true}`) and whose
message is the node's boot id; the training process then fails on its next CUDA call with PyTorch's error
(c10/cuda/CUDAException.cpp, raised as `torch.AcceleratorError` since PyTorch 2.8) and exits 1.

Which CUDA error the program meets depends on what failed: memory (ECC, row remapping) gives
`cudaErrorECCUncorrectable`, NVLink `cudaErrorNvlinkUncorrectable`, and a GPU that is lost or whose firmware
stopped answering `cudaErrorLaunchFailure` ("unspecified launch failure", reported asynchronously).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.events import record_event
from jobset_core.sim.records import now_seconds
from jobset_core.sim.store import ClusterStore, write_status

Obj = dict[str, Any]
ECC_XIDS = frozenset({48, 64, 94, 95, 140})  # the GPU's memory: double-bit ECC, row remapping, contained or not
NVLINK_XIDS = frozenset({74, *range(144, 151)})  # NVLink and NVLink5
# A realistic training step dying in the backward pass (CPython 3.12 traceback, PyTorch 2.8 wheel paths).
TRACEBACK_HEAD = (
    "Traceback (most recent call last):",
    '  File "/workspace/train.py", line 212, in <module>',
    "    main()",
    '  File "/workspace/train.py", line 188, in main',
    "    loss.backward()",
    '  File "/usr/local/lib/python3.12/site-packages/torch/_tensor.py", line 647, in backward',
    "    torch.autograd.backward(",
    '  File "/usr/local/lib/python3.12/site-packages/torch/autograd/__init__.py", line 354, in backward',
    "    _engine_run_backward(",
    '  File "/usr/local/lib/python3.12/site-packages/torch/autograd/graph.py", line 829, in _engine_run_backward',
    "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
    "           " + "^" * 50,
)


def cuda_error_of(xid: int) -> str:
    """The cudaGetErrorString text the program meets after this Xid."""
    if xid in ECC_XIDS:
        return c.CUDA_ECC_UNCORRECTABLE
    if xid in NVLINK_XIDS:
        return c.CUDA_NVLINK_UNCORRECTABLE
    return c.CUDA_LAUNCH_FAILURE


def torch_cuda_message(error: str) -> list[str]:
    """PyTorch's lines for a CUDA error, in its order: the error, the help line, the async or log-file hint,
    the device-side-assertion line (a release wheel has no DSA)."""
    lines = [c.CUDA_ERROR_PREFIX + error, c.TORCH_CUDA_ERROR_HELP_FORMAT.format(name=c.CUDA_ERROR_NAMES[error])]
    lines += c.TORCH_CUDA_ASYNC_LINES if error in c.CUDA_ASYNC_ERRORS else (c.TORCH_CUDA_LOG_FILE_LINE,)
    return [*lines, c.TORCH_CUDA_DSA_LINE]


def torch_traceback(xid: int) -> str:
    """What a PyTorch training process prints when its GPU fails with this Xid: the traceback, then
    `torch.AcceleratorError: CUDA error: ...` with PyTorch's hint lines. The exception's text ends with a
    newline, so Python's print of it leaves an empty line last, as a real log does."""
    first, *rest = torch_cuda_message(cuda_error_of(xid))
    return "\n".join([*TRACEBACK_HEAD, f"{c.TORCH_ACCELERATOR_ERROR}: {first}", *rest]) + "\n\n"


def xid_reason(previous: str | None, xid: int) -> str | None:
    """The condition's reason with this Xid added (Go's json.Marshal of a map: sorted keys, no spaces); None
    when it already names it (the plugin then leaves the node alone) or cannot be read."""
    try:
        seen = json.loads(previous) if previous else {}
    except ValueError:
        return None
    if not isinstance(seen, dict) or str(xid) in seen:
        return None
    seen[str(xid)] = True
    return json.dumps(dict(sorted(seen.items())), separators=(",", ":"))


def xid_conditions(node: Mapping[str, Any], xid: int) -> list[Obj] | None:
    """The Node's conditions once `XidCriticalError` names this Xid (monitorXidevent), or None when nothing
    changes. A new condition has both times now and the boot id as its message."""
    status = node.get("status") or {}
    conditions = [dict(x) for x in status.get("conditions") or []]
    for cond in conditions:
        if cond.get("type") == c.GKE_XID_CONDITION:
            reason = xid_reason(cond.get("reason"), xid)
            if reason is None:
                return None
            cond["reason"] = reason
            return conditions
    stamp = now_seconds()
    conditions.append({
        "type": c.GKE_XID_CONDITION, "status": "True", "lastHeartbeatTime": stamp, "lastTransitionTime": stamp,
        "reason": xid_reason(None, xid), "message": (status.get("nodeInfo") or {}).get("bootID", ""),
    })
    return conditions


def report_xid(store: ClusterStore, node_name: str, xid: int) -> None:
    """GKE's GPU device plugin on `node_name` catches Xid `xid`: the `XIDError` Warning event on the Node and,
    for a monitored Xid, the `XidCriticalError` condition (only when the Node object exists: there is no
    status to write otherwise). Its recorder is client-go's core/v1 one with source component only."""
    node = store.get(c.CORE_API_VERSION, c.NODE_KIND, node_name, None)
    involved = node or {"apiVersion": "v1", "kind": c.NODE_KIND, "metadata": {"name": node_name}}
    record_event(store, involved, c.EVENT_TYPE_WARNING, c.GKE_XID_EVENT_REASON, c.GKE_XID_EVENT_FORMAT.format(xid=xid),
                 component=c.GKE_GPU_DEVICE_PLUGIN)
    if node is None or xid not in c.GKE_MONITORED_XIDS:
        return
    conditions = xid_conditions(node, xid)
    if conditions is not None:
        write_status(store, node, {"conditions": conditions})
