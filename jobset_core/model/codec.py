"""One codec for the workload model: a spec (or a part of one) to plain data and back, for every engine.

What an engine keeps or is given as data is read here and nowhere else: an Airflow operator's `jobset=` dict or
YAML file, a Flyte task template's `custom`. The data form mirrors the Python API:
- a `JobSetSpec`, `GangJobSpec`, `ReplicatedJob`, `Coordinator`, `Network`, `SuccessPolicy` or `DependsOn` is a
  mapping of its fields, each key the field's name (`node_selector`) or its camelCase spelling (`nodeSelector`);
  written, every field is there, unset ones as None;
- a `Watchdog` is a mapping of its fields too (written with its threshold resolved and where it came from);
- a gang backend is the same with its class's name under `type`: `{"type": "Kueue", "queue": "gpu", ...}`;
- a `RetryPolicy` is what it stores on the objects it submits (`RetryPolicy.to_annotation`, camelCase keys): the
  backoff and the interruptible keys stay with the code. Its keys are read tolerantly, as a watcher reads an
  annotation an older or newer version wrote; every other mapping refuses a key it does not know.

Reading checks the shape of every field (a string, an integer, a number, True or False, a mapping, a list, a
nested part) and raises one `SpecError` naming the first bad field's path (`replicated_jobs[1].replicas`, or
under the `path` the caller gives: `custom.replicatedJobs[1].replicas`); what a value means is the spec's own
`validate()`. Numbers are taken as they come: an integer field refuses 2.0, so a transport that turns integers
into doubles (Flyte's protobuf Struct) is the engine's adapter to undo. Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import reprlib
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from jobset_core.errors import SpecError
from jobset_core.model.gang import Coscheduling, GangBackend, Kueue, Volcano, WorkloadAPI
from jobset_core.model.gang_job import GangJobSpec
from jobset_core.model.jobset import Coordinator, DependsOn, JobSetSpec, Network, ReplicatedJob, SuccessPolicy
from jobset_core.model.pod_template import to_plain
from jobset_core.policy.budget import RetryPolicy
from jobset_core.policy.watchdog import Watchdog

GANG_TYPE_KEY = "type"
GANGS: dict[str, type] = {cls.__name__: cls for cls in (Kueue, Coscheduling, Volcano, WorkloadAPI)}
RECORDS: tuple[type, ...] = (JobSetSpec, GangJobSpec, ReplicatedJob, Coordinator, Network, SuccessPolicy, DependsOn,
                             Watchdog, *GANGS.values())
# The fields of `RetryPolicy.to_annotation` that are counts, lists of them, seconds, flags, and lists of strings.
_POLICY_INTS = ("retries", "maxInterruptions")
_POLICY_INT_LISTS = ("retryableExitCodes",)
_POLICY_SECONDS = ("imagePullGraceSeconds", "configErrorGraceSeconds", "createContainerGraceSeconds",
                   "unschedulableTimeoutSeconds", "refillSeconds")
_POLICY_FLAGS = ("countInterruptions", "inClusterRestarts", "finalAttemptOnDemand", "countHardwareFailures",
                 "avoidSuspectNodes")
_POLICY_LISTS = ("retryOn", "signatures", "siteSignatures")
_SHOWN = reprlib.Repr()
_SHOWN.maxstring, _SHOWN.maxother = 60, 60


# ----- to data ------------------------------------------------------------------------------------------------------


def spec_to_dict(value: Any) -> dict[str, Any]:
    """A spec, a part of one (a replicated job, a gang backend, ...) or a retry policy as plain, JSON-safe data
    that `spec_from_dict` reads back to the same."""
    if isinstance(value, RetryPolicy):
        return value.to_annotation()
    if not isinstance(value, RECORDS):
        raise SpecError(type(value).__name__, f"{_shown(value)} is not a part of a workload spec", None)
    data = {f.name: _encode(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)}
    return {GANG_TYPE_KEY: type(value).__name__, **data} if type(value) in GANGS.values() else data


def _encode(name: str, value: Any) -> Any:
    if isinstance(value, (RetryPolicy, *RECORDS)):
        return spec_to_dict(value)
    if isinstance(value, Mapping):
        return {k: _encode(name, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(name, v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return to_plain(name, value)  # a kubernetes model (a pod template): its JSON


# ----- from data ----------------------------------------------------------------------------------------------------


def spec_from_dict(data: Any, kind: type, *, path: str | None = None) -> Any:
    """A `kind` (JobSetSpec, GangJobSpec, ReplicatedJob, ..., `GangBackend` for any gang backend, RetryPolicy)
    from its data; errors name the field's path under `path` (default: the field alone, and the kind's name for
    the whole). An object already of `kind` is taken as it is."""
    where = _Where(path or "", path or kind.__name__)
    if kind is RetryPolicy:
        return _policy(where, data)
    if kind is GangBackend:
        return _gang(where, data)
    if kind not in RECORDS:
        raise SpecError("kind", f"{kind!r} is not a part of a workload spec", f"use one of {', '.join(c.__name__ for c in RECORDS)}")
    return _record(where, data, kind)


@dataclasses.dataclass(frozen=True)
class _Where:
    """Where a value is: `path` prefixes its fields' paths ("" at an unnamed top), `name` names it whole."""

    path: str
    name: str

    def field(self, key: Any) -> _Where:
        path = f"{self.path}.{key}" if self.path else str(key)
        return _Where(path, path)

    def item(self, index: int) -> _Where:
        path = f"{self.path}[{index}]" if self.path else f"[{index}]"
        return _Where(path, path)


def _shown(value: Any) -> str:
    return _SHOWN.repr(value)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@functools.cache
def _fields(cls: type) -> dict[str, Any]:
    """Each field's type hint, by field name."""
    return typing.get_type_hints(cls)


@functools.cache
def _keys(cls: type) -> dict[str, str]:
    """{key as written: field name}: the field's name, or its camelCase spelling."""
    names = [f.name for f in dataclasses.fields(cls)]
    return {**{_camel(n): n for n in names}, **{n: n for n in names}}


@functools.cache
def _required(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls)
                 if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


def _mapping(where: _Where, data: Any, what: str) -> Mapping[Any, Any]:
    if not isinstance(data, Mapping):
        raise SpecError(where.name, f"must be a mapping of {what} fields, got {type(data).__name__}", None)
    return data


def _record(where: _Where, data: Any, cls: type) -> Any:
    """One of RECORDS from a mapping of its fields."""
    if isinstance(data, cls):
        return data
    data = _mapping(where, data, cls.__name__)
    keys, hints = _keys(cls), _fields(cls)
    unknown = sorted(str(k) for k in data if not isinstance(k, str) or k not in keys)
    if unknown:
        raise SpecError(where.name, f"unknown {cls.__name__} field(s) {', '.join(unknown)}",
                        f"use {', '.join(f.name for f in dataclasses.fields(cls))}")
    given: dict[str, Any] = {}
    for key, value in data.items():
        name = keys[key]
        if name in given:
            raise SpecError(where.field(key).name, f"is given twice (as {name} and {_camel(name)})", "keep one")
        given[name] = _value(where.field(key), value, hints[name])
    missing = [name for name in _required(cls) if name not in given]
    if missing:
        raise SpecError(where.field(missing[0]).name, f"is required in a {cls.__name__}", None)
    try:
        return cls(**given)
    except SpecError as exc:  # a part that checks itself when made (a Watchdog) names its field under `where`
        head, _, rest = exc.field.partition(".")
        if not rest or head != cls.__name__.lower():
            raise
        raise SpecError(where.field(rest).name, exc.problem, exc.fix) from None


def _gang(where: _Where, data: Any) -> Any:
    """A gang backend from `{"type": <class name>, <its fields>}`."""
    if isinstance(data, tuple(GANGS.values())):
        return data
    data = _mapping(where, data, "gang backend")
    kind = data.get(GANG_TYPE_KEY)
    cls = GANGS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise SpecError(where.field(GANG_TYPE_KEY).name, f"{_shown(kind)} is not one of {', '.join(GANGS)}",
                        "e.g. {'type': 'Kueue', 'queue': 'gpu'}")
    return _record(where, {k: v for k, v in data.items() if k != GANG_TYPE_KEY}, cls)


# ----- one value by its type hint -------------------------------------------------------------------------------


def _options(hint: Any) -> tuple[Any, ...]:
    """The types a hint allows (a union's members, or the hint itself)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _accepts(option: Any, value: Any) -> bool:
    """Whether `value` has the shape `option` asks for (its contents are checked on reading it)."""
    origin = typing.get_origin(option) or option
    if option is Any:
        return True
    if option in (int, float):
        return isinstance(value, (int, float) if option is float else int) and not isinstance(value, bool)
    if option in (str, bool):
        return isinstance(value, option)
    if option in (RetryPolicy, GangBackend, *RECORDS):
        return isinstance(value, (Mapping, tuple(GANGS.values()) if option is GangBackend else option))
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return isinstance(value, Mapping)
    if isinstance(origin, type) and issubclass(origin, Sequence):
        return isinstance(value, (list, tuple))
    return False


_WHAT = {str: "a string", int: "an integer", float: "a number", bool: "True or False"}


def _describe(option: Any) -> str:
    origin = typing.get_origin(option) or option
    if option in _WHAT:
        return _WHAT[option]
    if option in (RetryPolicy, GangBackend, *RECORDS):
        return f"a mapping of {'gang backend' if option is GangBackend else option.__name__} fields"
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return "a mapping"
    return "a list"


def _value(where: _Where, value: Any, hint: Any) -> Any:
    options = _options(hint)
    if value is None and type(None) in options:
        return None
    option = next((o for o in options if o is not type(None) and _accepts(o, value)), None)
    if option is None:
        wanted = " or ".join(dict.fromkeys(_describe(o) for o in options if o is not type(None)))
        raise SpecError(where.name, f"must be {wanted}, got {_shown(value)}", None)
    return _read(where, value, option)


def _read(where: _Where, value: Any, option: Any) -> Any:
    """`value`, of the shape `option` accepts, read as that option."""
    if option is RetryPolicy:
        return _policy(where, value)
    if option is GangBackend:
        return _gang(where, value)
    if option in RECORDS:
        return _record(where, value, option)
    origin = typing.get_origin(option)
    if isinstance(origin, type) and issubclass(origin, Mapping):
        return dict(value)
    if isinstance(origin, type) and issubclass(origin, Sequence):
        (item,) = typing.get_args(option) or (Any,)
        return [_value(where.item(i), v, item) for i, v in enumerate(value)]
    return value


# ----- the retry policy: its annotation's form ---------------------------------------------------------------


def _policy(where: _Where, data: Any) -> RetryPolicy:
    """A retry policy from its stored form; `retries` unset takes the platform default. Unknown keys are left
    alone, as `RetryPolicy.from_annotation` leaves them."""
    if isinstance(data, RetryPolicy):
        return data
    checked = dict(_mapping(where, data, "RetryPolicy"))
    for key, value in data.items():
        if key in _POLICY_INTS:
            checked[key] = _value(where.field(key), value, int | None)
        elif key in _POLICY_INT_LISTS:
            checked[key] = _value(where.field(key), value, list[int])
        elif key in _POLICY_SECONDS:
            seconds = _value(where.field(key), value, float | None)
            checked[key] = float(seconds) if seconds is not None else None
        elif key in _POLICY_FLAGS:
            checked[key] = _value(where.field(key), value, bool | None)
        elif key in _POLICY_LISTS:
            checked[key] = _value(where.field(key), value, list[Any] | None)
    base = RetryPolicy(retries=checked.get("retries"))  # None: the platform default, and where it came from
    checked.setdefault("source", base.retries_source)
    checked["retries"] = base.retries
    return RetryPolicy.from_annotation(checked, base)
