"""What the load benchmarks share: a fake cluster, small JobSets, the old runtime, request counting, stats.

Requests are counted at the server (`LocalApiServer.requests`), never in the client, so retries and
reconnects are in the numbers. The old `KubernetesRuntime` (two watch streams per run, Jobs and namespace
events listed on changes) is loaded from git, as `baseline.py` does for the old diagnosis engine, so that
"before" and "now" run side by side on the same machine in the same minute.
"""

from __future__ import annotations

from collections.abc import Iterable

import tenacity

from benchmarks.baseline import ROOT, _module, _source
from benchmarks.report import percentile, save, spread, spread_columns, table
from jobset_core import JobSetSpec, ReplicatedJob, RetryPolicy
from jobset_core.testing import FakeCluster, LocalApiServer, RequestRecord

NAMESPACE = "bench"
# The last revision with one pair of watch streams per run.
PER_RUN_STREAMS_REV = "05fd30c"


def tiny_spec(name: str, pods: int = 1, retries: int = 0) -> JobSetSpec:
    return JobSetSpec(
        name=name,
        namespace=NAMESPACE,
        replicated_jobs=[ReplicatedJob("workers", image="bench:1", command=["train"], parallelism=pods)],
        retry=RetryPolicy(retries=retries, backoff=tenacity.wait_none()),
    )


def fake_cluster(tick: float = 0.02) -> tuple[LocalApiServer, FakeCluster]:
    """The public fake cluster (its API server, and the cluster that scripts the pods)."""
    cluster = FakeCluster([NAMESPACE], tick=tick).start()
    return cluster.server, cluster


def stop(server: LocalApiServer, cluster: FakeCluster) -> None:
    cluster.stop()


def old_runtime_class() -> type:
    """`KubernetesRuntime` as it was with per-run streams, from git."""
    source = _source(PER_RUN_STREAMS_REV, "jobset_core/kube.py")
    return _module(f"_baseline_kube_{PER_RUN_STREAMS_REV}", source).KubernetesRuntime


def is_watch(record: RequestRecord) -> bool:
    return str(record.query.get("watch", "")).lower() == "true"


def split_requests(records: Iterable[RequestRecord]) -> tuple[int, int]:
    """(requests that are not watches, watch requests)."""
    records = list(records)
    watches = sum(1 for r in records if is_watch(r))
    return len(records) - watches, watches


__all__ = ["NAMESPACE", "ROOT", "fake_cluster", "old_runtime_class", "percentile", "save", "split_requests", "spread", "spread_columns", "stop", "table",
           "tiny_spec"]
