"""A test process to be killed: run alone by `tests/test_airflow_components.py`, which SIGKILLs it once the
components it started are up, and checks that nothing they started outlives it (`tests/reaper.py`).

Not collected by a plain `pytest` run (its name does not start with `test_`); named on the command line, it is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

from tests.airflow_components import AirflowComponents, airflow_env, free_port

READY = "JOBSET_KILLED_RUN_READY"  # a file this process writes once the components are started: their sessions
STARTED = ("scheduler", "triggerer")  # each starts processes of its own: executor workers, a trigger runner
WAIT_SECONDS = 600  # killed long before (the killing test runs this with pytest's own timeout off)


def test_start_components_then_wait_to_be_killed() -> None:
    home = Path(tempfile.mkdtemp(prefix="jobset-airflow-killed-"))
    port = free_port()
    components = AirflowComponents(home, airflow_env(home, port, str(home / "no-kubeconfig"), "default"), port)
    try:
        components.migrate()
        for name in STARTED:
            components.start(name)
        Path(os.environ[READY]).write_text(" ".join(str(p.pid) for p in components.procs.values()))
        threading.Event().wait(WAIT_SECONDS)
    finally:  # reached only if nobody kills this process
        components.stop()
        shutil.rmtree(home, ignore_errors=True)
