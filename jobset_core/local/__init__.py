"""The local runtime: every pod of a JobSet or gang Job is a process on this machine.

Same manifests, same failure policies, same `diagnose` as on a cluster; see `runtime.LocalRuntime` and,
for fault injection (`JOBSET_LOCAL_FAULTS`), `jobset_core.emulation.faults`.
"""

from jobset_core.emulation.faults import (
    FAULTS_ENV,
    Crash,
    Evict,
    Fault,
    NodeShutdown,
    OOMKill,
    Preempt,
    faults_from_env,
    parse_faults,
)
from jobset_core.local.runtime import LocalRuntime

__all__ = ["FAULTS_ENV", "Crash", "Evict", "Fault", "LocalRuntime", "NodeShutdown", "OOMKill", "Preempt",
           "faults_from_env", "parse_faults"]
