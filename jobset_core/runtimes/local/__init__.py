"""The local runtime: every pod of a JobSet or gang Job is a process on this machine.

Same manifests, same failure policies, same `diagnose` as on a cluster; see `runtime.LocalRuntime` and,
for fault injection (`JOBSET_LOCAL_FAULTS`), `jobset_core.sim.fault_parsing`.
"""

from jobset_core.runtimes.local.runtime import LocalRuntime
from jobset_core.sim.fault_parsing import FAULTS_ENV, faults_from_env, parse_faults
from jobset_core.sim.faults import (
    Crash,
    Evict,
    Fault,
    Hardware,
    NodePressure,
    NodeShutdown,
    OOMKill,
    Preempt,
    Succeed,
)

__all__ = ["FAULTS_ENV", "Crash", "Evict", "Fault", "Hardware", "LocalRuntime", "NodePressure", "NodeShutdown",
           "OOMKill", "Preempt", "Succeed", "faults_from_env", "parse_faults"]
