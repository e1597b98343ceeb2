"""The run's timeline page (Flyte Deck, `jobset explain --html`): parsed back, on captures from real controllers."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from jobset_core import diagnose
from jobset_core.timeline import CASCADE, CULPRIT, AttemptTimeline, render_timeline

REAL = Path(__file__).resolve().parent / "fixtures" / "real"


class Page(HTMLParser):
    """Bars by pod (their CSS classes and tooltip) and the header facts by class."""

    def __init__(self) -> None:
        super().__init__()
        self.bars: dict[str, dict[str, Any]] = {}
        self.facts: dict[str, list[str]] = {}
        self._fact: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("data-pod"):
            self.bars[found["data-pod"]] = {"classes": set((found.get("class") or "").split()), "title": found.get("title")}
        if tag == "li":
            self._fact = found.get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "li":
            self._fact = None

    def handle_data(self, data: str) -> None:
        if self._fact is not None:
            self.facts.setdefault(self._fact, []).append(data)


def parse(html: str) -> Page:
    page = Page()
    page.feed(html)
    return page


def capture(name: str) -> dict[str, Any]:
    return json.loads((REAL / f"{name}.json").read_text())


def test_culprit_and_cascade_are_marked_with_restarts_and_budget() -> None:
    objs = capture("A2-app-error-after-restart")
    diagnosis = diagnose(jobset=objs["jobset"], jobs=objs["jobs"], pods=objs["pods"], events=objs["events"])
    attempt = AttemptTimeline(objs["jobset"]["metadata"]["name"], objs["pods"], diagnosis, "failed")

    page = parse(render_timeline([attempt], budget="1 in-cluster restart + 0 resubmissions used", summary=diagnosis.summary))

    culprit = diagnosis.pod
    assert culprit == "a-workers-0-0-tfbrv"
    assert {CULPRIT, "failed"} <= page.bars[culprit]["classes"]
    assert "exit 1" in page.bars[culprit]["title"]
    peers = {pod: bar["classes"] for pod, bar in page.bars.items() if pod != culprit}
    assert peers and all(CASCADE in classes and CULPRIT not in classes for classes in peers.values())
    causes = " ".join(page.facts["cause"])
    assert "restart 1: Preempted" in causes and "final: ApplicationError" in causes
    assert page.facts["budget"] == ["budget: 1 in-cluster restart + 0 resubmissions used"]


def test_a_run_that_is_still_going_marks_no_culprit() -> None:
    objs = capture("A1-preempted-restarted")
    diagnosis = diagnose(jobset=objs["jobset"], jobs=objs["jobs"], pods=objs["pods"], events=objs["events"])

    page = parse(render_timeline([AttemptTimeline("a", objs["pods"], diagnosis, "running")]))

    assert page.bars and all(bar["classes"] & {"running"} for bar in page.bars.values())
    assert not any(bar["classes"] & {CULPRIT, CASCADE} for bar in page.bars.values())
    assert any("restart 1: Preempted" in fact for fact in page.facts["cause"])


def test_text_from_the_cluster_is_escaped() -> None:
    pod = {
        "metadata": {"name": "p-<script>", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
    }

    html = render_timeline([AttemptTimeline("js", [pod], None, "<b>running</b>")], title="t")

    assert "<script>" not in html and "p-&lt;script&gt;" in html and "&lt;b&gt;running" in html
    assert "no pod has started yet" in render_timeline([AttemptTimeline("js")])
