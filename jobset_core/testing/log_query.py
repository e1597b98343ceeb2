"""What a `GET .../pods/{name}/log` asks, read and answered as the API server and the kubelet do.

The API server checks the options (pkg/apis/core/validation ValidatePodLogOptions: 422), picks the container
(pkg/registry/core/pod/strategy.go LogLocation: the only one, else a 400 naming them) and hands the kubelet
`sinceTime` formatted as RFC3339, whole seconds. The kubelet (pkg/kubelet/kuberuntime/logs/logs.go) then:
- `NewLogOptions`: `sinceSeconds` is `now - sinceSeconds` on the kubelet's clock; a `sinceTime` later than that
  wins;
- `ReadLogs`: `tailLines` seeks to the last N lines of the log first; `since` then skips, among those, every
  line written before it (`timestamp.Before(since)`: a line written at `since` is kept);
- `logWriter.write`: `timestamps=true` prefixes each line with its moment in RFC3339NanoFixed (nine digits of
  nanoseconds) and a space; `limitBytes` counts those prefixes too and cuts the line that reaches it, so the
  answer may end mid-line.
Pure: the query and the lines in, the bytes out; the handler does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobset_core import constants as c
from jobset_core.sim.apistore import errors
from jobset_core.sim.apistore.errors import ApiError

from .logs import NANOS, Line, to_nanos

TRUE = ("1", "t", "T", "true", "TRUE", "True")  # Go's strconv.ParseBool
FALSE = ("0", "f", "F", "false", "FALSE", "False")


@dataclass(frozen=True)
class LogQuery:
    """The options of one log request, checked; `since` in nanoseconds since the epoch (None: from the start)."""

    container: str
    follow: bool = False
    timestamps: bool = False
    since: int | None = None
    tail: int | None = None
    limit: int | None = None


def log_timestamp(nanos: int) -> str:
    """A line's moment as the kubelet prefixes it: RFC3339NanoFixed in UTC, e.g. `2026-01-01T00:00:30.000000000Z`."""
    seconds, fraction = divmod(nanos, NANOS)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{fraction:09d}Z"


def _flag(query: Mapping[str, str], key: str) -> bool:
    value = query.get(key)
    if value is None or value in FALSE:
        return False
    if value in TRUE:
        return True
    raise errors.bad_request(c.GO_PARSE_BOOL_FORMAT.format(value=value))


def _integer(query: Mapping[str, str], key: str) -> int | None:
    value = query.get(key)
    if value is None:
        return None
    try:
        return int(value, 10)
    except ValueError:
        raise errors.bad_request(c.GO_PARSE_INT_FORMAT.format(value=value)) from None


def _since_time(value: str | None) -> int | None:
    """`sinceTime` as the kubelet receives it: parsed as RFC3339, then whole seconds (the API server formats it
    with time.RFC3339 for the kubelet, dropping any fraction)."""
    if value is None:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None or "T" not in value.upper():
        raise errors.bad_request(c.GO_PARSE_TIME_FORMAT.format(value=value, layout=c.RFC3339_LAYOUT))
    return int(moment.timestamp()) * NANOS


def _invalid(pod: str, field: str, value: Any, detail: str) -> ApiError:
    """422 as the pods/log REST answers ValidatePodLogOptions' errors (`errors.NewInvalid(Kind("PodLogOptions"))`)."""
    kind = c.POD_LOG_OPTIONS_KIND
    cause = c.FIELD_INVALID_FORMAT.format(field=field, value=value, detail=detail)
    return ApiError(422, c.STATUS_INVALID, c.INVALID_OBJECT_FORMAT.format(kind=kind, name=pod, causes=cause),
                    {"name": pod, "kind": kind, "causes": [{"reason": c.CAUSE_FIELD_VALUE_INVALID,
                                                            "message": cause.removeprefix(f"{field}: "),
                                                            "field": field}]})


def pick_container(pod: Mapping[str, Any], asked: str | None) -> str:
    """The container whose log is asked: the one named (it must be the pod's), else the pod's only one."""
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    containers = [ct.get("name", "") for ct in spec.get("containers") or []]
    every = containers + [ct.get("name", "") for key in ("initContainers", "ephemeralContainers")
                          for ct in spec.get(key) or []]
    if asked:
        if asked not in every:
            raise errors.bad_request(c.LOG_CONTAINER_NOT_VALID_FORMAT.format(container=asked, pod=name))
        return asked
    if len(containers) != 1:
        raise errors.bad_request(c.LOG_CONTAINER_REQUIRED_FORMAT.format(pod=name, names=" ".join(containers)))
    return containers[0]


def parse_query(query: Mapping[str, str], pod: Mapping[str, Any], now: float) -> LogQuery:
    """The request's options checked as the API server checks them, `since` resolved on the kubelet's `now`."""
    name = pod["metadata"]["name"]
    tail, limit, seconds = _integer(query, "tailLines"), _integer(query, "limitBytes"), _integer(query, "sinceSeconds")
    since_time = _since_time(query.get("sinceTime"))
    if tail is not None and tail < 0:
        raise _invalid(name, "tailLines", tail, c.LOG_OPTION_NEGATIVE)
    if limit is not None and limit < 1:
        raise _invalid(name, "limitBytes", limit, c.LOG_OPTION_NOT_POSITIVE)
    if seconds is not None and since_time is not None:
        raise ApiError(422, c.STATUS_INVALID, c.INVALID_OBJECT_FORMAT.format(
            kind=c.POD_LOG_OPTIONS_KIND, name=name, causes=c.FIELD_FORBIDDEN_FORMAT.format(detail=c.LOG_OPTION_SINCE_BOTH)))
    if seconds is not None and seconds < 1:
        raise _invalid(name, "sinceSeconds", seconds, c.LOG_OPTION_NOT_POSITIVE)
    since = to_nanos(now) - seconds * NANOS if seconds is not None else since_time
    return LogQuery(container=pick_container(pod, query.get("container")), follow=_flag(query, "follow"),
                    timestamps=_flag(query, "timestamps"), since=since, tail=tail, limit=limit)


def selected(query: LogQuery, last: Callable[[int], list[Line]],
             since: Callable[[int | None], Iterable[Line]]) -> Iterable[Line]:
    """The lines the query selects, in order: the last `tail` lines (`last(n)`), of them those at or after
    `since`; without a tail, the log from `since` on (`since(moment)`, consumed only as far as it is read)."""
    if query.tail is None:
        return since(query.since)
    lines = last(query.tail)
    return lines if query.since is None else [line for line in lines if line[0] >= query.since]


def rendered(query: LogQuery, lines: Iterable[Line], budget: int | None) -> Iterator[bytes]:
    """Each line as the kubelet writes it (its timestamp first when asked), until `budget` bytes are written
    (None: no limit); the line that reaches it is cut."""
    remain = budget
    for moment, text in lines:
        data = text.encode()
        if query.timestamps:
            data = (log_timestamp(moment) + c.LOG_TIMESTAMP_DELIMITER).encode() + data
        if remain is not None:
            data = data[:remain]
            remain -= len(data)
        if data:
            yield data
        if remain is not None and remain <= 0:
            return
