"""The two spellings of the fault vocabulary (`faults`), one parser each way.

Its own room so that the vocabulary stays the types alone: the runtimes and the emulated nodes play `Fault`
objects, and only the places that read faults from people (an environment variable, a flag, a fates file, a
`Fate` object) need the parsing and its error messages. Text (env `JOBSET_LOCAL_FAULTS`, `--fault`)::

    faults  := fault (";" fault)*
    fault   := kind ":" replica ["=" exit_code] ["@" delay] ("," option)*
    kind    := preempt | evict | node-pressure | node-shutdown | crash | oom | succeed | image-pull
             | unschedulable | hardware | prints | hang
    delay   := number ["s" | "ms"]              (seconds by default)
    option  := ("attempt" | "restart" | "times") "=" (integer | "any") | "jobset=" glob | "xid=" integer
             | "every=" delay | "line=" text     (a line with no "," or ";": the mapping form takes any)

    e.g.  preempt:workers-0-1@2s;crash:leader-0-0=3@1s,attempt=1;hardware:workers-0-1@2s,xid=79
          prints:workers-*,times=any,every=30s,line=step {n} rank {rank};hang:workers-0-1@600s

Only `crash` takes an exit code, only `hardware` an `xid`, only `prints` `every` and `line`. Mappings (a YAML
fates file, a `Fate` object's spec): `{fault: crash, replica: leader-0-0, exitCode: 3, after: 1, attempt: 1}`,
`{fault: hardware, replica: workers-0-1, after: 2, xid: 79}`, `{fault: prints, replica: workers-*, times: any,
every: 30, line: "step {n}"}`, `{fault: hang, replica: workers-0-1, after: 600}`, with keys `fault replica jobset
attempt restart after times exitCode xid every line output` (a hang's `output` is what it prints on SIGTERM).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from jobset_core.errors import SpecError
from jobset_core.sim.faults import KIND_NAMES, Crash, Fault, Hardware, Prints, check_xid, kind_of

FAULTS_ENV = "JOBSET_LOCAL_FAULTS"
ANY = "any"
EXAMPLE = "e.g. 'preempt:workers-0-1@2s;crash:leader-0-0=3@1s,attempt=1'"


# ----- the text grammar -----------------------------------------------------------------------------------

_HEAD = re.compile(
    r"^(?P<kind>[A-Za-z_-]+):(?P<replica>[A-Za-z0-9.*?\[\]-]+)(?:=(?P<code>\d+))?"
    r"(?:@(?P<delay>\d+(?:\.\d+)?)(?P<unit>ms|s)?)?$"
)


def _bad(part: str, problem: str, where: str = FAULTS_ENV) -> SpecError:
    return SpecError(where, f"{part!r}: {problem}", f"use {EXAMPLE}")


def _option(part: str, option: str, kwargs: dict[str, Any], where: str) -> None:
    key, _, value = (s.strip() for s in option.partition("="))
    if key == "jobset" and value:
        kwargs["jobset"] = value
    elif key in ("attempt", "restart", "times") and (value.isdigit() or value == ANY):
        kwargs[key] = None if value == ANY else int(value)
    elif key == "xid" and value.isdigit():
        kwargs["xid"] = int(value)
    elif key == "every" and value:
        kwargs["every_seconds"] = _seconds(value, where)
    elif key == "line" and value:
        kwargs["line"] = value
    else:
        raise _bad(part, f"option {option!r} is not attempt=<n>, restart=<n>, times=<n>, jobset=<glob>, xid=<n>, "
                   "every=<seconds> or line=<text>", where)


def parse_one(part: str, where: str = FAULTS_ENV) -> Fault:
    """One fault in the text grammar (see the module docstring)."""
    head, *options = [p.strip() for p in part.split(",")]
    match = _HEAD.match(head)
    if match is None:
        raise _bad(part, "is not kind:replica[=exit_code][@delay]", where)
    try:
        cls = kind_of(match["kind"], where)
    except SpecError as exc:
        raise _bad(part, f"{exc.problem} ({exc.fix})", where) from None
    kwargs: dict[str, Any] = {"replica": match["replica"]}
    if match["delay"] is not None:
        delay = float(match["delay"])
        kwargs["after_seconds"] = delay / 1000 if match["unit"] == "ms" else delay
    if match["code"] is not None:
        if cls is not Crash:
            raise _bad(part, "only crash takes an exit code", where)
        kwargs["exit_code"] = int(match["code"])
    for option in options:
        _option(part, option, kwargs, where)
    _check_kind_options(cls, part, kwargs, where)
    try:
        return cls(**kwargs)
    except SpecError as exc:
        raise _bad(part, f"{exc.field.split('.')[-1]} {exc.problem}" + (f"; {exc.fix}" if exc.fix else ""),
                   where) from None


def _check_kind_options(cls: type[Fault], part: str, kwargs: dict[str, Any], where: str) -> None:
    """The options only one kind takes: `xid` (hardware, a fatal one), `every` and `line` (prints)."""
    if "xid" in kwargs:
        if cls is not Hardware:
            raise _bad(part, "only hardware takes an xid", where)
        try:
            check_xid(kwargs["xid"], where)
        except SpecError as exc:
            raise _bad(part, f"xid {exc.problem}; {exc.fix}", where) from None
    if cls is not Prints and ("every_seconds" in kwargs or "line" in kwargs):
        raise _bad(part, "only prints takes every and line", where)


def parse_faults(text: str | None, where: str = FAULTS_ENV) -> tuple[Fault, ...]:
    """Parse the text grammar; empty text means no faults. `where` is what errors name (the variable, the flag)."""
    if not text or not text.strip():
        return ()
    return tuple(parse_one(part.strip(), where) for part in text.split(";") if part.strip())


def faults_from_env(environ: Mapping[str, str] | None = None) -> tuple[Fault, ...]:
    environ = os.environ if environ is None else environ
    return parse_faults(environ.get(FAULTS_ENV))


# ----- the mapping form (fates files, Fate objects) --------------------------------------------------------

# mapping key -> dataclass field; both spellings of the multi-word keys are accepted
_KEYS = {"fault": "", "replica": "replica", "jobset": "jobset", "attempt": "attempt", "restart": "restart",
         "after": "after_seconds", "times": "times", "exitCode": "exit_code", "exit_code": "exit_code",
         "xid": "xid", "every": "every_seconds", "line": "line", "output": "output"}


def _seconds(value: Any, field: str) -> float:
    if isinstance(value, str):
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m)?\s*", value)
        if match is None:
            raise SpecError(field, f"{value!r} is not a duration", "use seconds, e.g. 2, 2.5, '2s' or '500ms'")
        number = float(match[1])
        return number / 1000 if match[2] == "ms" else number * 60 if match[2] == "m" else number
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(field, f"{value!r} is not a duration", "use seconds, e.g. 2, 2.5, '2s' or '500ms'")
    return float(value)


def _integral(value: Any, field: str) -> Any:
    """YAML and JSON give integers; a protobuf Struct or a JSON number may give 3.0: accept integral floats."""
    if value == ANY or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(field, f"{value!r} is not an integer", "use a whole number, or 'any'")
    return value


_MAPPING_KEYS = {"after_seconds": "after", "exit_code": "exitCode", "every_seconds": "every"}


def from_mapping(data: Any, where: str = "fate") -> Fault:
    """A fault from `{fault: ..., replica: ..., ...}`; errors name `where` and the key, with the fix."""
    if isinstance(data, str):
        return parse_one(data, where)
    if not isinstance(data, Mapping):
        raise SpecError(where, f"{data!r} is not a mapping", "write e.g. {fault: preempt, replica: workers-0-0}")
    _check_keys(data, where)
    cls = kind_of(str(data["fault"]), f"{where}.fault")
    kwargs = {_KEYS[key]: _value(cls, key, value, where) for key, value in data.items() if _KEYS[key]}
    if kwargs.get("exit_code", 0) is None:
        del kwargs["exit_code"]  # `exitCode: null` is no exit code: a crash's default (1), as in the text form
    try:
        return cls(**kwargs)
    except SpecError as exc:
        key = _MAPPING_KEYS.get(exc.field.split(".")[-1], exc.field.split(".")[-1])
        raise SpecError(f"{where}.{key}", exc.problem, exc.fix) from None


def _check_keys(data: Mapping[str, Any], where: str) -> None:
    """Every key known (a typo names the closest), and the two a fate cannot do without."""
    for key in data:
        if key not in _KEYS:
            canonical = {k.lower(): k for k in _KEYS if k != "exit_code"}
            close = difflib.get_close_matches(str(key).lower(), list(canonical), n=1)
            hint = f"did you mean {canonical[close[0]]!r}?" if close else f"use {', '.join(canonical.values())}"
            raise SpecError(f"{where}.{key}", "is not a key of a fate", hint)
    if "fault" not in data:
        raise SpecError(f"{where}.fault", "is missing", f"name one of {KIND_NAMES}")
    if "replica" not in data:
        raise SpecError(f"{where}.replica", "is missing", "name a pod, e.g. workers-0-1, leader-0-0 or workers-*")


def _value(cls: type[Fault], key: str, value: Any, where: str) -> Any:
    """One mapping value as the dataclass field takes it (durations, integral numbers, text)."""
    target = _KEYS[key]
    if target == "exit_code" and cls is not Crash:
        raise SpecError(f"{where}.{key}", f"only a crash takes an exit code, not {cls.name}", "remove it")
    if target == "xid" and cls is not Hardware:
        raise SpecError(f"{where}.{key}", f"only a hardware fault takes an Xid, not {cls.name}", "remove it")
    if target in ("every_seconds", "line") and cls is not Prints:
        raise SpecError(f"{where}.{key}", f"only a prints fault takes {key}, not {cls.name}", "remove it")
    if target in ("after_seconds", "every_seconds"):
        return _seconds(value, f"{where}.{key}")
    if target in ("attempt", "restart", "times", "exit_code", "xid"):
        return _integral(value, f"{where}.{key}")
    return str(value) if value is not None else None


def to_mapping(fault: Fault) -> dict[str, Any]:
    """The mapping form of a fault (what `from_mapping` reads back)."""
    out: dict[str, Any] = {"fault": fault.name, "replica": fault.replica}
    defaults = {f.name: f.default for f in fields(Fault)}
    for key, target in _KEYS.items():
        if not target or key == "exit_code" or not hasattr(fault, target):
            continue
        value = getattr(fault, target)
        if target == "exit_code" or value != defaults.get(target):
            out[key] = ANY if value is None else value
    return out
