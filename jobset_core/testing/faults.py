"""Deterministic fault injection applied at the HTTP layer.

Retry and recovery code is only trustworthy if tests can make the server fail
on purpose: bursts of 5xx, throttling with Retry-After, RBAC denials, slow
answers, watches that break or expire. Everything is driven by explicit counts
or a seeded RNG, so a failing test replays identically.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from jobset_core.sim.apistore import errors
from jobset_core.sim.apistore.errors import ApiError
from jobset_core.sim.apistore.kinds import ResourceKind

DEFAULT_USER = "system:serviceaccount:default:default"


@dataclass(frozen=True)
class RequestInfo:
    """What the fault plan may match on; built by the HTTP handler per request."""

    method: str
    path: str
    verb: str | None = None
    kind: ResourceKind | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


@dataclass
class Decision:
    """What to do to one request: wait first, then possibly fail."""

    delay: float = 0.0
    error: ApiError | None = None


@dataclass(frozen=True)
class WatchDrop:
    """Cut a watch stream after ``events`` events; ``abrupt`` skips the final chunk."""

    events: int
    abrupt: bool


@dataclass
class _Match:
    methods: frozenset[str] | None
    path_contains: str | None

    def accepts(self, info: RequestInfo) -> bool:
        if self.methods is not None and info.method.upper() not in self.methods:
            return False
        return self.path_contains is None or self.path_contains in info.path


@dataclass
class _FailNext:
    match: _Match
    remaining: int
    status: int
    retry_after: float | None


@dataclass
class _FailRatio:
    match: _Match
    ratio: float
    statuses: tuple[int, ...]
    rng: random.Random
    remaining: int | None
    retry_after: float | None


@dataclass
class _Delay:
    match: _Match
    seconds: float
    remaining: int | None


@dataclass
class _Forbid:
    verb: str
    resource: str
    user: str


@dataclass
class _Counter:
    remaining: int
    payload: WatchDrop | None = None


def _methods(methods: Iterable[str] | str | None) -> frozenset[str] | None:
    if methods is None:
        return None
    if isinstance(methods, str):
        methods = [methods]
    return frozenset(m.upper() for m in methods)


class FaultPlan:
    """Scripted failures for the next requests; all methods return ``self`` for chaining."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fail_next: list[_FailNext] = []
        self._ratios: list[_FailRatio] = []
        self._delays: list[_Delay] = []
        self._forbids: list[_Forbid] = []
        self._drops: list[_Counter] = []
        self._expiries: list[_Counter] = []

    def fail_next(
        self,
        n: int = 1,
        status: int = 503,
        retry_after: float | None = None,
        methods: Iterable[str] | str | None = None,
        path_contains: str | None = None,
    ) -> FaultPlan:
        """Answer the next ``n`` matching requests with ``status`` and a Status body."""
        with self._lock:
            self._fail_next.append(
                _FailNext(_Match(_methods(methods), path_contains), n, status, retry_after)
            )
        return self

    def fail_ratio(
        self,
        ratio: float,
        statuses: Iterable[int] = (500, 503, 429),
        seed: int = 0,
        count: int | None = None,
        methods: Iterable[str] | str | None = None,
        path_contains: str | None = None,
        retry_after: float | None = None,
    ) -> FaultPlan:
        """Fail each matching request with probability ``ratio`` (seeded), up to ``count`` times."""
        with self._lock:
            self._ratios.append(
                _FailRatio(
                    _Match(_methods(methods), path_contains),
                    ratio,
                    tuple(statuses),
                    random.Random(seed),
                    count,
                    retry_after,
                )
            )
        return self

    def drop_watch_after(self, events: int = 0, times: int = 1, abrupt: bool = False) -> FaultPlan:
        """Close the next ``times`` watch streams after ``events`` events.

        A clean drop ends the chunked body like a server-side close; ``abrupt``
        closes the socket mid-body, which clients see as a protocol error.
        """
        with self._lock:
            self._drops.append(_Counter(times, WatchDrop(events, abrupt)))
        return self

    def expire_watches(self, times: int = 1) -> FaultPlan:
        """Answer the next ``times`` watches with a 410 Expired ERROR event."""
        with self._lock:
            self._expiries.append(_Counter(times))
        return self

    def delay(
        self,
        seconds: float,
        count: int | None = None,
        methods: Iterable[str] | str | None = None,
        path_contains: str | None = None,
    ) -> FaultPlan:
        """Hold matching responses for ``seconds`` (``count`` times, or until cleared)."""
        with self._lock:
            self._delays.append(_Delay(_Match(_methods(methods), path_contains), seconds, count))
        return self

    def forbid(self, verb: str, plural: str, user: str = DEFAULT_USER) -> FaultPlan:
        """Deny ``verb`` on ``plural`` (``jobsets``, ``jobsets.jobset.x-k8s.io`` or ``pods/status``; ``*`` wildcards)."""
        with self._lock:
            self._forbids.append(_Forbid(verb, plural, user))
        return self

    def clear(self) -> FaultPlan:
        """Remove every scripted fault."""
        with self._lock:
            for rules in (
                self._fail_next,
                self._ratios,
                self._delays,
                self._forbids,
                self._drops,
                self._expiries,
            ):
                rules.clear()
        return self

    # ------------------------------------------------------- used by the server

    def decide(self, info: RequestInfo) -> Decision:
        """Consume the faults that apply to one request."""
        decision = Decision()
        with self._lock:
            for delay in self._delays:
                if delay.remaining != 0 and delay.match.accepts(info):
                    decision.delay += delay.seconds
                    if delay.remaining is not None:
                        delay.remaining -= 1
            decision.error = self._forbidden(info) or self._next_failure(info)
        return decision

    def take_watch_expiry(self) -> bool:
        """True if this watch must be expired (consumes one)."""
        with self._lock:
            return self._take(self._expiries) is not None

    def take_watch_drop(self) -> WatchDrop | None:
        """The drop to apply to this watch, if any (consumes one)."""
        with self._lock:
            counter = self._take(self._drops)
            return counter.payload if counter else None

    @staticmethod
    def _take(counters: list[_Counter]) -> _Counter | None:
        for counter in counters:
            if counter.remaining > 0:
                counter.remaining -= 1
                return counter
        return None

    def _forbidden(self, info: RequestInfo) -> ApiError | None:
        if info.kind is None or info.verb is None:
            return None
        kind = info.kind
        names = {kind.plural, kind.qualified_resource, "*"}
        if info.subresource:
            names = {f"{n}/{info.subresource}" for n in (kind.plural, kind.qualified_resource, "*")}
        for rule in self._forbids:
            if rule.verb in (info.verb, "*") and rule.resource in names:
                return errors.forbidden(
                    kind, info.verb, info.name, info.namespace, rule.user, info.subresource
                )
        return None

    def _next_failure(self, info: RequestInfo) -> ApiError | None:
        for rule in self._fail_next:
            if rule.remaining > 0 and rule.match.accepts(info):
                rule.remaining -= 1
                return errors.injected(rule.status, rule.retry_after)
        for ratio in self._ratios:
            if ratio.remaining == 0 or not ratio.match.accepts(info):
                continue
            if ratio.rng.random() < ratio.ratio:
                if ratio.remaining is not None:
                    ratio.remaining -= 1
                return errors.injected(ratio.rng.choice(ratio.statuses), ratio.retry_after)
        return None
