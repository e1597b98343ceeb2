"""One fault vocabulary: the text form (the local runtime's `JOBSET_LOCAL_FAULTS`, `--fault`) and the mapping form
(a fates file, a `Fate` object, `jobset fake-cluster fate`) give the same faults with the same defaults, and refuse
the same mistakes naming the same field."""

from __future__ import annotations

import pytest

from jobset_core.errors import SpecError
from jobset_core.sim.fault_parsing import from_mapping, parse_one, to_mapping
from jobset_core.sim.faults import Crash, Hardware


@pytest.mark.parametrize(
    "text,mapping",
    [
        ("crash:workers-0-0@1s", {"fault": "crash", "replica": "workers-0-0", "after": 1}),
        ("crash:workers-0-0=3@1s", {"fault": "crash", "replica": "workers-0-0", "after": "1s", "exitCode": 3}),
        ("hardware:workers-0-1@2s", {"fault": "hardware", "replica": "workers-0-1", "after": 2}),
        ("hardware:workers-0-1@2s,xid=79", {"fault": "hardware", "replica": "workers-0-1", "after": 2, "xid": 79}),
        ("preempt:leader-*@500ms,restart=any", {"fault": "preempt", "replica": "leader-*", "after": "500ms", "restart": "any"}),
    ],
)
def test_both_spellings_give_the_same_fault_with_the_same_defaults(text: str, mapping: dict) -> None:
    assert parse_one(text) == from_mapping(mapping)
    assert from_mapping(to_mapping(parse_one(text))) == parse_one(text)


def test_a_crash_ends_with_exit_code_1_unless_told() -> None:
    assert parse_one("crash:w-0-0").exit_code == from_mapping({"fault": "crash", "replica": "w-0-0"}).exit_code == 1
    assert from_mapping({"fault": "crash", "replica": "w-0-0", "exitCode": None}) == Crash("w-0-0")
    assert from_mapping({"fault": "hardware", "replica": "w-0-0"}) == Hardware("w-0-0")


@pytest.mark.parametrize(
    "text,mapping,what",
    [
        ("preempt:w-0-0=3", {"fault": "preempt", "replica": "w-0-0", "exitCode": 3}, "exit code"),
        ("crash:w-0-0,xid=79", {"fault": "crash", "replica": "w-0-0", "xid": 79}, "xid"),
        ("hardware:w-0-0,xid=13", {"fault": "hardware", "replica": "w-0-0", "xid": 13}, "not a fatal Xid"),
        ("crash:w-0-0=300", {"fault": "crash", "replica": "w-0-0", "exitCode": 300}, "1..255"),
        ("presmpt:w-0-0", {"fault": "presmpt", "replica": "w-0-0"}, "did you mean 'preempt'"),
    ],
)
def test_both_spellings_refuse_the_same_mistakes(text: str, mapping: dict, what: str) -> None:
    with pytest.raises(SpecError) as as_text:
        parse_one(text)
    with pytest.raises(SpecError) as as_mapping:
        from_mapping(mapping)
    assert what in str(as_text.value) and what in str(as_mapping.value), (as_text.value, as_mapping.value)
