"""The README's examples are run, so they cannot drift from the code.

Every ```python block runs, in order, in one namespace (later blocks use what earlier ones defined), from the
repository root. A block after `<!-- test: kube -->` talks to a cluster: it runs against LocalApiServer with
the test driver playing the controllers (and Kueue admitting), its `KubernetesRuntime(...)` pointed there. A
block after `<!-- test: fake-cluster -->` is a user's pytest module: every `test_*` function it defines is
called with a fresh `FakeCluster`, as the `fake_cluster` fixture would hand it. The YAML block must be `spec.to_manifest()` of the example, and a plain block after `<!-- test: explain FILE -->`
must be lines of what `jobset explain --from-file FILE` prints.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from jobset_core import KubernetesRuntime
from jobset_core.cli import main as cli_main
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.testing import FakeCluster, LocalApiServer
from tests.kube_driver import ClusterDriver

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCK = re.compile(r"(?:<!-- test: (?P<mark>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<body>.*?)```", re.S)
NS = "ml-team"
JOBSET_API = "jobset.x-k8s.io/v1alpha2"


def blocks(lang: str) -> list[tuple[str | None, str]]:
    return [(m["mark"], m["body"]) for m in BLOCK.finditer(README) if m["lang"] == lang]


def test_the_readme_has_the_examples_this_test_runs() -> None:
    assert len(blocks("python")) >= 4 and len([b for mark, b in blocks("yaml") if mark is None]) == 1
    assert any(mark == "kube" for mark, _ in blocks("python"))


class Kueue(threading.Thread):
    """Admits every suspended JobSet of the namespace, as Kueue does when the queue has room."""

    def __init__(self, server: LocalApiServer) -> None:
        super().__init__(daemon=True)
        self.server, self.stop = server, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.05):
            for jobset in self.server.list(JOBSET_API, "JobSet", NS):
                if jobset["spec"].get("suspend"):
                    self.server.patch(JOBSET_API, "JobSet", jobset["metadata"]["name"], NS, {"spec": {"suspend": False}})


@pytest.fixture
def cluster() -> Iterator[LocalApiServer]:
    with LocalApiServer(seed=11) as server, ClusterDriver(server, NS, tick=0.03) as driver:
        driver.exit("*workers-0-0", 1, reason=None, message="ValueError: bad config")
        kueue = Kueue(server)
        kueue.start()
        yield server
        kueue.stop.set()
        assert not driver.errors, driver.errors


@pytest.fixture
def in_repo_root() -> Iterator[None]:
    before = os.getcwd()
    os.chdir(ROOT)
    yield
    os.chdir(before)


def import_block(body: str, number: int, folder: Path) -> dict[str, Any]:
    """A block that defines Flyte tasks runs as a module: flytekit resolves a task by its module's name."""
    name = f"readme_block_{number}"
    path = folder / f"{name}.py"
    path.write_text(body)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return {k: v for k, v in vars(module).items() if not k.startswith("__")}


def test_python_examples_run(
    cluster: LocalApiServer, in_repo_root: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def runtime_on_the_test_cluster(api_client: Any = None, namespace: str | None = None, **kwargs: Any) -> KubernetesRuntime:
        return KubernetesRuntime(
            api_client or cluster.api_client(), namespace, retry=ApiRetry(max_seconds=10, initial=0.05, max_wait=0.2),
            watch_timeout_seconds=2, tick_seconds=0.1, cancel_timeout_seconds=10, **kwargs,
        )

    namespace: dict[str, Any] = {"__name__": "readme"}
    kube_results: list[Any] = []
    ran: list[str] = []
    for number, (mark, body) in enumerate(blocks("python")):
        if mark == "kube":
            body = body.replace("KubernetesRuntime(", "runtime_on_the_test_cluster(")
            namespace["runtime_on_the_test_cluster"] = runtime_on_the_test_cluster
        if "flytekit" in body:
            namespace.update(import_block(body, number, tmp_path))
            continue
        exec(compile(body, f"README.md python block {number}", "exec"), namespace)
        if mark == "fake-cluster":
            ran.extend(run_user_tests(namespace, body))
        if mark == "kube":
            kube_results.append(namespace["result"])
    kube_result, polled = kube_results[0], kube_results[1]
    # The polling example: one look at a fresh submission, then a cancel from "another process".
    assert polled.handle is not None and not polled.succeeded
    assert cluster.list(JOBSET_API, "JobSet", NS, label_selector=f"jobset-plugins.io/run-key={polled.handle.run_key}") == []
    out = capsys.readouterr().out
    # the comment in the README says what the cluster run prints
    assert kube_result.message.startswith("ApplicationError: container main in pod train-")
    assert "not retrying: ApplicationError is not retryable; goodput " in kube_result.message
    assert "ApplicationError: container trainer in pod a-workers-0-0-tfbrv exited 1" in out
    assert namespace["result"].succeeded, namespace["result"].message  # the local run went through a preemption
    assert namespace["handle"].namespace == NS
    assert ran == ["test_my_workflow_survives_a_preemption_and_fails_fast_on_a_bug"]


def run_user_tests(namespace: dict[str, Any], body: str) -> list[str]:
    """Call each test function the block defines with a fresh fake cluster; their asserts are the check."""
    names = re.findall(r"^def (test_\w+)\(", body, re.M)
    for name in names:
        with FakeCluster() as fake_cluster:
            namespace[name](fake_cluster)
            assert not fake_cluster.errors, fake_cluster.errors
    return names


def test_the_yaml_is_the_manifest_of_the_example(in_repo_root: None) -> None:
    namespace: dict[str, Any] = {}
    exec(blocks("python")[0][1], namespace)
    (body,) = [b for mark, b in blocks("yaml") if mark is None]
    assert yaml.safe_load(body) == namespace["spec"].to_manifest()


@pytest.mark.parametrize("mark,body", [(m, b) for m, b in blocks("") if m and m.startswith("explain ")])
def test_printed_output_is_what_the_cli_prints(mark: str, body: str, in_repo_root: None, capsys) -> None:
    cli_main(["explain", "--from-file", mark.split(" ", 1)[1]])
    printed = capsys.readouterr().out.splitlines()
    shown = body.strip().splitlines()
    assert shown[0] == printed[0]
    at = [printed.index(line) for line in shown]
    assert at == sorted(at), "the README's lines must appear in the CLI's order"


# A path the README names: a folder of the repository, then anything without spaces, ending in a file suffix or a
# slash; optionally `::test_name`.
PATH = re.compile(r"`((?:jobset_core|flyte_jobset|airflow_jobset|plugins|examples|tests|docs|benchmarks)/[^`\s]*?)(?:::(\w+))?`")


def test_every_file_and_test_the_readme_names_is_in_the_repository() -> None:
    """A newcomer reads only the README: whatever it points at must be there (no design notes or fixtures kept
    elsewhere), and each test it cites as proof must exist by that name."""
    named = PATH.findall(README)
    assert len(named) > 30
    for path, test in named:
        target = ROOT / path.rstrip("/")
        assert target.exists() or any(ROOT.glob(path)), f"the README names {path}, which is not in the repository"
        if test:
            assert re.search(rf"^(async )?def {test}\(", target.read_text(), re.M), f"{path} has no {test}"
    assert "../" not in README


def test_the_readme_states_the_airflow_versions_pyproject_allows() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    (airflow,) = [d for d in project["optional-dependencies"]["airflow"] if d.startswith("apache-airflow>")]
    low = re.search(r">=(\d+\.\d+)", airflow)[1]
    assert f"Airflow {low} or later in {low.split('.')[0]}.x" in README


def test_benchmarks_is_the_last_section_and_holds_only_the_summary() -> None:
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings[-1] == "Benchmarks"
    benchmarks = README.split("\n## Benchmarks\n", 1)[1]
    assert "docs/BENCHMARKS.md" in benchmarks and len(benchmarks.splitlines()) < 30
    for needed in ("Install", "First run", "Troubleshooting", "Exit codes", "What happens when...", "One retry budget"):
        assert needed in headings


def test_the_diagnose_snippet_judges_the_dump_as_of_when_it_was_taken(in_repo_root: None, capsys) -> None:
    """The README's `diagnose()` example, run as written: a dump is judged at its own time (`dump_time`), as `jobset
    explain --from-file` judges it, so the pods Terminating in capture A2 are not "stuck" for the months since."""
    (body,) = [b for _, b in blocks("python") if "from jobset_core import diagnose" in b]
    exec(compile(body, "README.md diagnose() example", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "ApplicationError False ApplicationError: container trainer in pod a-workers-0-0-tfbrv exited 1" in out
    assert "past its grace period" not in out and "Terminating" not in out
