"""Compatibility module: the diagnosis engine now lives in `jobset_core.diagnosis`.

Kept so that existing imports (`from jobset_core.failures import Diagnosis, diagnose`) keep working.
"""

from jobset_core.diagnosis import Diagnosis, FailureKind, Finding, Grace, HistoryEntry, classify_pod, diagnose

__all__ = ["Diagnosis", "FailureKind", "Finding", "Grace", "HistoryEntry", "classify_pod", "diagnose"]
