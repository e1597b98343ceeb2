"""What a hung rank prints when it is stopped: the text the offline cluster's `Hang` appends on SIGTERM.

A rank blocked in a collective (an NCCL all-reduce waiting for a peer that never comes) prints nothing; a
training program that registered `faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)` dumps
every thread's Python stack when the kubelet's SIGTERM arrives, then dies of the signal (exit 143): the dump is
the last thing in its log, so under FallbackToLogsOnError it is the termination message, and it says where the
rank was stuck. The default is such a dump (CPython's format, `constants.FAULTHANDLER_*`), for a main thread in
`torch.distributed.all_reduce` and a data-loader thread waiting on its queue.
"""

from __future__ import annotations

from jobset_core import constants as c
from jobset_core.sim.faults import Hang

_MAIN_THREAD = 0x00007F3A9C1B5740
_LOADER_THREAD = 0x00007F3A2B7FE640
_SITE = "/usr/local/lib/python3.12/site-packages"
# (file, line, function), innermost first, as faulthandler lists them
_LOADER_FRAMES = (
    ("/usr/local/lib/python3.12/threading.py", 355, "wait"),
    ("/usr/local/lib/python3.12/queue.py", 171, "get"),
    (f"{_SITE}/torch/utils/data/_utils/pin_memory.py", 53, "do_one_step"),
    (f"{_SITE}/torch/utils/data/_utils/pin_memory.py", 76, "_pin_memory_loop"),
    ("/usr/local/lib/python3.12/threading.py", 1012, "run"),
    ("/usr/local/lib/python3.12/threading.py", 1075, "_bootstrap_inner"),
    ("/usr/local/lib/python3.12/threading.py", 1032, "_bootstrap"),
)
_MAIN_FRAMES = (
    (f"{_SITE}/torch/distributed/distributed_c10d.py", 2806, "all_reduce"),
    (f"{_SITE}/torch/distributed/c10d_logger.py", 81, "wrapper"),
    ("/workspace/train.py", 171, "train_step"),
    ("/workspace/train.py", 188, "main"),
    ("/workspace/train.py", 212, "<module>"),
)


def faulthandler_dump() -> str:
    """Every thread's stack as faulthandler prints it on SIGTERM: the other threads first, the current last,
    a blank line after each."""
    def thread(header: str, frames: tuple[tuple[str, int, str], ...]) -> list[str]:
        return [header, *(c.FAULTHANDLER_FRAME_FORMAT.format(file=f, line=n, function=fn) for f, n, fn in frames), ""]

    lines = [*thread(c.FAULTHANDLER_THREAD_FORMAT.format(ident=_LOADER_THREAD), _LOADER_FRAMES),
             *thread(c.FAULTHANDLER_CURRENT_THREAD_FORMAT.format(ident=_MAIN_THREAD), _MAIN_FRAMES)]
    return "\n".join(lines)


def sigterm_output(fault: Hang) -> str:
    """What the hung process prints on SIGTERM: the fault's `output`, else the faulthandler dump; ends with a
    newline."""
    text = fault.output or faulthandler_dump()
    return text if text.endswith("\n") else text + "\n"
