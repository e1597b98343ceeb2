"""Security: no secret reaches an output, the local runtime never uses a shell, derived names are safe.

A failing run with a secret in its env, a Secret reference (`valueFrom.secretKeyRef`) whose Secret sits on
the cluster, and a bearer token in the client configuration: every output is searched for them (the log
records, stdout/stderr, the result and its diagnosis as dicts, the exception, the Flyte connector's message,
custom info and deck). The Airflow XComs and task log get the same check in test_airflow_operators.py.
"""

from __future__ import annotations

import ast
import asyncio
import json
import logging
import re
import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import tenacity
from flytekit import task
from flytekit.extend.backend.utils import is_terminal_phase
from flytekit.tools.translator import get_serializable
from hypothesis import given, settings
from hypothesis import strategies as st

from flyte_jobset import JobSet, JobSetConnector
from flyte_jobset.constants import DECK_FILE
from jobset_core import JobSetRun, JobSetSpec, LocalRuntime, ReplicatedJob, RetryPolicy, make_run_key
from jobset_core.lifecycle.drive import attempt_name
from jobset_core.model.validation import check_dns1035, check_label_value
from jobset_core.runtimes.kube.client import ApiRetry
from jobset_core.runtimes.kube.runtime import KubernetesRuntime
from jobset_core.testing import LocalApiServer
from tests.kube_driver import ClusterDriver
from tests.test_flyte_connector import SETTINGS, local, metadata
from tests.test_kube_runtime import NS, driver, run_to_end, server  # noqa: F401

pytestmark = pytest.mark.faults

ROOT = Path(__file__).resolve().parents[1]
SECRET_ENV = "env-s3cr3t-7f3a9c"
SECRET_REF_VALUE = "ref-s3cr3t-b41d2e"
TOKEN = "tok-s3cr3t-0c9e88"
SECRETS = (SECRET_ENV, SECRET_REF_VALUE, TOKEN)
SECRET_ENV_LIST = [
    {"name": "WANDB_API_KEY", "value": SECRET_ENV},
    {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": "password"}}},
]


def plant_secret(server: LocalApiServer) -> None:  # noqa: F811 - a parameter, not the fixture
    server.register_kind("v1", "Secret", "secrets", has_status=False)
    server.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-creds", "namespace": NS},
                   "stringData": {"password": SECRET_REF_VALUE}, "data": {}})


def runtime_with_token(server: LocalApiServer) -> KubernetesRuntime:  # noqa: F811 - a parameter
    client = server.api_client()
    client.configuration.api_key = {"authorization": TOKEN}
    client.configuration.api_key_prefix = {"authorization": "Bearer"}
    return KubernetesRuntime(client, NS, retry=ApiRetry(max_seconds=20, initial=0.05, max_wait=0.5),
                             watch_timeout_seconds=2, tick_seconds=0.1)


def leaked(*outputs: Any) -> list[str]:
    text = "\n".join(o if isinstance(o, str) else json.dumps(o, default=str) for o in outputs)
    return [s for s in SECRETS if s in text]


def test_no_secret_in_logs_results_or_errors_of_a_failing_run(
    server: LocalApiServer, driver: ClusterDriver, caplog: pytest.LogCaptureFixture,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    plant_secret(server)
    spec = JobSetSpec(name="leak", namespace=NS, replicated_jobs=[
        ReplicatedJob("workers", image="ghcr.io/acme/train:1", command=["python", "train.py"], replicas=2, env=SECRET_ENV_LIST),
    ], retry=RetryPolicy(retries=1, backoff=tenacity.wait_none()))
    driver.exit("workers-1-0", 1, after=0.3, message="ValueError: bad shard")
    server.faults.fail_next(2, status=503)
    events: list[str] = []
    with caplog.at_level(logging.DEBUG):
        run = JobSetRun(spec, runtime_with_token(server), run_key=make_run_key("leak"), sleep=lambda s: None,
                        on_event=lambda e: events.append(e.message))
        result = run_to_end(run)
        server.faults.forbid("list", "jobsets")
        with pytest.raises(Exception) as denied:
            JobSetRun.resume(result.handle.to_dict(), runtime_with_token(server)).step()
    out, err = capsys.readouterr()

    assert not result.succeeded and "ValueError: bad shard" in result.message
    assert leaked(caplog.text, out, err, result.to_dict(), events, str(denied.value), repr(denied.value)) == []


@task(task_config=JobSet(replicated_jobs=[ReplicatedJob("leader", env=SECRET_ENV_LIST)], retry=RetryPolicy(retries=0)))
def leaky(x: int) -> int:
    return x


def test_no_secret_in_the_flyte_connectors_message_custom_info_or_deck(
    server: LocalApiServer, driver: ClusterDriver, tmp_path: Path, caplog: pytest.LogCaptureFixture,  # noqa: F811
) -> None:
    plant_secret(server)
    connector = JobSetConnector(runtimes={"kubernetes": runtime_with_token(server)})
    template = get_serializable(OrderedDict(), SETTINGS, leaky).template
    driver.exit("leader-0-0", 3, after=0.3, message="RuntimeError: cannot open checkpoint")
    prefix = tmp_path.as_uri()
    with caplog.at_level(logging.DEBUG):
        meta = asyncio.run(connector.create(template, prefix, None, metadata("exec-leak", 0)))
        resource = tenacity.Retrying(
            stop=tenacity.stop_after_delay(25), wait=tenacity.wait_fixed(0.2),
            retry=tenacity.retry_if_result(lambda r: not is_terminal_phase(r.phase)), reraise=True,
        )(lambda: asyncio.run(connector.get(meta)))

    assert "RuntimeError: cannot open checkpoint" in resource.message
    deck = (local(prefix) / DECK_FILE).read_text()
    assert leaked(resource.message, resource.custom_info, [link.uri for link in resource.log_links], deck, caplog.text) == []


# ----------------------------------------------------------------------------------------------------
# no shell


def test_the_local_runtime_never_starts_a_shell() -> None:
    for path in (ROOT / "jobset_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "shell":
                assert isinstance(node.value, ast.Constant) and node.value.value is False, f"{path}: shell={ast.unparse(node.value)}"
            if isinstance(node, ast.Attribute) and node.attr in ("system", "popen") and getattr(node.value, "id", "") == "os":
                pytest.fail(f"{path}: os.{node.attr} runs a shell")


def test_a_command_with_shell_syntax_stays_literal(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    argv_file = tmp_path / "argv.json"
    code = f"import json, sys; json.dump(sys.argv[1:], open({str(argv_file)!r}, 'w'))"
    hostile = ["; rm -rf " + str(victim), "$(touch " + str(tmp_path / "pwned") + ")", "`id`", "a | b && c"]
    spec = JobSetSpec(name="lit", replicated_jobs=[ReplicatedJob("w", image="local", command=[sys.executable, "-c", code, *hostile])])
    with LocalRuntime(workdir=tmp_path / "pods", stream_output=False, tick_seconds=0.1) as runtime:
        result = JobSetRun(spec, runtime, run_key=make_run_key("literal")).run()

    assert result.succeeded, result.message
    assert json.loads(argv_file.read_text()) == hostile
    assert victim.is_dir() and not (tmp_path / "pwned").exists()


# ----------------------------------------------------------------------------------------------------
# names derived from user input


ENGINE_IDS = st.text(min_size=1, max_size=300).filter(lambda s: s.strip("/") != "")


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(ENGINE_IDS, min_size=1, max_size=4), attempt=st.integers(0, 999))
def test_run_keys_and_attempt_names_are_dns_labels_and_deterministic(parts: list[str], attempt: int) -> None:
    key = make_run_key(*parts)
    spec = JobSetSpec(name="train", replicated_jobs=[ReplicatedJob("workers", image="i:1", command=["x"])])
    name = attempt_name(spec, key, attempt)
    assert check_label_value("run_key", key) == key and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", key), key
    assert check_dns1035("name", name) == name and len(name) <= 63, name
    assert make_run_key(*parts) == key and attempt_name(spec, key, attempt) == name


@pytest.mark.parametrize(
    "first,second",
    [
        (("My DAG", "train"), ("my-dag", "train")),         # the same readable text
        (("dag.v1", "t"), ("dag_v1", "t")),
        (("a" * 80, "x"), ("a" * 80, "y")),                  # differing after the readable part is cut
        (("flyte/proj", "wf.train"), ("flyte", "proj/wf.train")),
        (("日本語", "train"), ("中文", "train")),             # nothing readable left
    ],
)
def test_different_engine_ids_never_share_a_run_key(first: tuple[str, ...], second: tuple[str, ...]) -> None:
    assert make_run_key(*first) != make_run_key(*second)
