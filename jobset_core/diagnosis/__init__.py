"""Failure demystification: one root cause, retryable or not, from a gang's pods, Jobs, JobSet and events.

A pure pipeline, one module per step, read top to bottom:

- `model`: `Finding` (one fact that could be the cause), `Diagnosis` (the answer), `Grace`, the ranking;
- `pods`: what one pod says (conditions, status reasons, containers and their `lastState`, init
  containers and sidecars, pending states);
- `jobs`: what Jobs and events say once the pods are gone;
- `signals`: what the kubelet and the controllers say outside a pod's status (probe kills, pull and start
  failures, claims that never bind, pods a Job cannot create);
- `scope`: only this workload's objects, once each, of its current restart attempt;
- `damage`: the fields that are there but cannot be read, named in the evidence;
- `teardown`: who deleted a pod: a controller's teardown (the Job's decision, deadline or suspension, the JobSet's
  end, the garbage collector) or someone else;
- `root`: the root-cause choice across a gang (earliest wins, teardown victims set aside);
- `history`: the cause of each in-cluster restart;
- `kueue`: preemption by suspension, deactivation;
- `kueue_admission`: a workload Kueue held suspended past its admission timeout;
- `podgroups`: the Workload API's PodGroups: whether the scheduler placed a gang, and whether it preempted one;
- `gangs`: a gang the scheduler holds, said as a gang (its minCount, what is placed, why not the rest);
- `summary`: the one line a person reads first;
- `pipeline`: `diagnose`, the steps above in order.
"""

from jobset_core.diagnosis.model import Diagnosis, Finding, HistoryEntry
from jobset_core.diagnosis.pipeline import diagnose
from jobset_core.diagnosis.pods import classify_pod
from jobset_core.policy.grace import Grace
from jobset_core.policy.kinds import FailureKind

__all__ = ["Diagnosis", "FailureKind", "Finding", "Grace", "HistoryEntry", "classify_pod", "diagnose"]
