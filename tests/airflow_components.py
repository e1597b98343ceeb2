"""Airflow's own processes for the tests: api-server, scheduler (LocalExecutor), dag-processor and triggerer,
each a subprocess on one temporary AIRFLOW_HOME (SQLite, as `airflow standalone` sets it up), and the public
REST API (/api/v2) a user acts through.

Everything is tuned for a small machine: one api-server worker, a dag-processor that parses the one test
DAG once, short heartbeats so a killed triggerer's triggers move within seconds. A component that dies, or a
wait that times out, fails with the last lines of every component's log; `stop()` ends every process group
it started (SIGTERM, then SIGKILL), so no port or process outlives the session. Nor does one outlive a test process
that dies without stopping them (SIGKILL, a closed terminal): each component leads a session of its own, which
a watchdog of its own ends then, every process in it whatever its group (`tests/reaper.py`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.reaper import Watchdog

ROOT = Path(__file__).resolve().parents[1]
DAGS = ROOT / "tests" / "airflow_dags"
COMPONENTS = ("api-server", "dag-processor", "scheduler", "triggerer")
LOG_TAIL = 40
T = TypeVar("T")


class ComponentFailed(AssertionError):
    """An Airflow component died, or what a test waited for never happened; carries the logs' tails."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def airflow_env(home: Path, port: int, kubeconfig: str, namespace: str) -> dict[str, str]:
    """The environment of every component: this process's, minus any other Airflow setting."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "JOBSET_"))}
    base = f"http://127.0.0.1:{port}"
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "8",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__MIN_SERIALIZED_DAG_UPDATE_INTERVAL": "5",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__BASE_URL": base,
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": "jobset-plugins-tests-only",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",  # parsed once: the file never changes
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "6",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            # the log servers of the workers and the triggerer: free ports, not the fixed defaults
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps(
                {"conn_type": "kubernetes", "extra": {"kube_config_path": kubeconfig, "namespace": namespace}}
            ),
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def _log_line(item: Any) -> str:
    """One structured task-log entry as a user reads it: the message, then any exception's type and text."""
    if not isinstance(item, dict):
        return str(item)
    errors = item.get("error_detail") or []
    raised = "".join(f"\n{e.get('exc_type')}: {e.get('exc_value')}" for e in errors if isinstance(e, dict))
    return f"{item.get('event', '')}{raised}"


class AirflowComponents:
    """The four components on one home; `api` is an authenticated client of the public REST API."""

    def __init__(self, home: Path, env: Mapping[str, str], port: int) -> None:
        self.home, self.env, self.port = home, dict(env), port
        self.watchdog = Watchdog()  # ends the components' sessions if this process dies without stopping them
        self.logs = home / "component-logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self.generation: dict[str, int] = {}
        self.api = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    # ----- processes ---------------------------------------------------------------------------------

    def migrate(self) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "airflow", "db", "migrate"], env=self.env, capture_output=True, text=True,
            timeout=300, check=False,
        )
        if done.returncode != 0:
            raise ComponentFailed(f"airflow db migrate failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")

    def start(self, name: str) -> str:
        """`airflow <name>` in its own process group, its output in `component-logs/<name>-<n>.log`; returns
        its label `<name>-<n>` (a second triggerer is `triggerer-2`)."""
        number = self.generation[name] = self.generation.get(name, 0) + 1
        label = f"{name}-{number}"
        out = open(self.logs / f"{label}.log", "wb")  # noqa: SIM115 - closed once the child has it
        proc = subprocess.Popen(
            [sys.executable, "-m", "airflow", name], env=self.env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=self.home,
        )
        out.close()
        self.watchdog.add(proc.pid)  # the leader of its own session: everything it starts stays in it
        self.procs[label] = proc
        return label

    def signal(self, label: str, sig: signal.Signals) -> None:
        """Signal a component's whole process group (its supervised children too)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.procs[label].pid, sig)

    def kill(self, label: str) -> None:
        """SIGKILL a component's process group and reap it: no cleanup of any kind."""
        self.signal(label, signal.SIGKILL)
        self.procs.pop(label).wait(30)

    def stop(self) -> None:
        """End every component: SIGTERM, then SIGKILL after 15 s; closes the API client."""
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGCONT)  # a stopped one could not act on SIGTERM
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.procs.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # leftovers of the group, if the leader already left
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
        self.stopped = [proc.pid for proc in self.procs.values()]
        self.procs.clear()
        self.api.close()
        self.watchdog.close()  # it ends whatever the groups left in the sessions (an orphan in a group of its own)

    def leftovers(self, grace: float = 10.0) -> list[int]:
        """Process groups of stopped components that still have a process in them after `grace` seconds
        (orphans of a killed group are reaped by init, not at once)."""
        deadline = time.monotonic() + grace
        while True:
            alive = []
            for pgid in getattr(self, "stopped", []):
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    continue
                alive.append(pgid)
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(0.2)

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise ComponentFailed(f"airflow {name} exited with {proc.returncode}\n{self.tails()}")

    def tails(self, lines: int = LOG_TAIL) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"----- {path.name} (last {len(text)} lines) -----\n" + "\n".join(text))
        return "\n".join(parts)

    def lines_about(self, word: str, limit: int = 200) -> str:
        """Every component's log lines that mention `word` (a task id), for a failure's story."""
        found = [
            f"{path.stem}: {line}" for path in sorted(self.logs.glob("*.log"))
            for line in path.read_text(errors="replace").splitlines() if word in line and "http.access" not in line
        ]
        return "\n".join(found[-limit:])

    def mentions(self, phrases: tuple[str, ...]) -> bool:
        """Whether any component's log holds one of `phrases`."""
        return any(
            phrase in path.read_text(errors="replace") for path in self.logs.glob("*.log") for phrase in phrases
        )

    def wait_for(self, check: Callable[[], T | None], timeout: float, what: str, poll: float = 0.5) -> T:
        """Poll `check` until it returns something truthy; fail naming `what` with the logs' tails, or at
        once when a component died meanwhile."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        while True:
            self.check_alive()
            try:
                value = check()
                if value:
                    return value
            except (httpx.HTTPError, KeyError, ValueError) as exc:  # not up yet, or not there yet
                last = exc
            if time.monotonic() >= deadline:
                detail = f" (last error: {last!r})" if last is not None else ""
                raise ComponentFailed(f"timed out after {timeout:.0f}s waiting for {what}{detail}\n{self.tails()}")
            time.sleep(poll)

    # ----- the REST API, as a user acts through it ---------------------------------------------------

    def login(self) -> None:
        """A token from the simple auth manager (every user is an admin in this setup), sent from now on."""
        response = self.api.get("/auth/token")
        response.raise_for_status()
        self.api.headers["Authorization"] = f"Bearer {response.json()['access_token']}"

    def healthy(self) -> bool:
        response = self.api.get("/api/v2/monitor/health")
        if response.status_code != 200:
            return False
        body = response.json()
        return all((body.get(part) or {}).get("status") == "healthy" for part in ("metadatabase", "scheduler", "triggerer", "dag_processor"))

    def dag_known(self, dag_id: str) -> bool:
        return self.api.get(f"/api/v2/dags/{dag_id}").status_code == 200

    def trigger(self, dag_id: str, run_id: str) -> dict[str, Any]:
        response = self.api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"dag_run_id": run_id, "logical_date": None})
        response.raise_for_status()
        return response.json()

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        response = self.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}")
        response.raise_for_status()
        return response.json()

    def state(self, dag_id: str, run_id: str, task_id: str) -> str | None:
        return self.task_instance(dag_id, run_id, task_id).get("state")

    def mark(self, dag_id: str, run_id: str, task_id: str, state: str) -> dict[str, Any]:
        """What "Mark as failed/success" in the UI sends."""
        response = self.api.patch(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}", json={"new_state": state}
        )
        response.raise_for_status()
        return response.json()

    def clear(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        """What "Clear" on one task instance sends (running tasks included)."""
        response = self.api.post(
            f"/api/v2/dags/{dag_id}/clearTaskInstances",
            json={"dry_run": False, "dag_run_id": run_id, "task_ids": [task_id], "only_failed": False, "reset_dag_runs": False},
        )
        response.raise_for_status()
        return response.json()

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        response = self.api.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": "true"}, headers={"Accept": "application/json"},
        )
        response.raise_for_status()
        content = response.json().get("content") or []
        return "\n".join(_log_line(item) for item in content)

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str) -> Any:
        response = self.api.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/{key}",
            params={"deserialize": "true"},
        )
        response.raise_for_status()
        return response.json().get("value")
