"""The workload model: a few lines of Python in, a JobSet or gang Job manifest the API server accepts out.

Everything here is pure. Builders validate all input first and raise `SpecError` naming the field and the
fix, so nothing is ever half-submitted. The retry policy is always part of the manifest: child Jobs carry
the podFailurePolicy and the JobSet the failurePolicy that make the one retry budget work in the cluster.

This module is where the model's public names are found; each shape has its own room: `pod_template.py` (the
pod of one replica), `jobset.py` (a JobSet and its replicated jobs), `gang_job.py` (a gang Job) and
`workload.py` (what the two workloads share).
"""

from __future__ import annotations

from jobset_core.model.gang_job import GangJobSpec
from jobset_core.model.jobset import Coordinator, DependsOn, JobSetSpec, Network, ReplicatedJob, SuccessPolicy

__all__ = ["Coordinator", "DependsOn", "GangJobSpec", "JobSetSpec", "Network", "ReplicatedJob", "SuccessPolicy"]
