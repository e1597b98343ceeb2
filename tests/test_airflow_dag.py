"""The example DAG under `airflow dags test`, as the README tells a new user to run it: no cluster needed.

One metadata DB per test run (`airflow db migrate` once) and one DAG run (each costs about 30 s here,
most of it starting Airflow's in-process execution API), so everything the run shows is checked on it.
"""

from __future__ import annotations

from tests import airflow_support  # first: AIRFLOW_HOME must be set before airflow is imported

airflow_support.HOME.mkdir(exist_ok=True)

import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402

DAG_ID = "jobset_example"


@pytest.fixture(scope="module")
def dag_test_output() -> str:
    airflow_support.migrate_db()
    env = {k: v for k, v in os.environ.items() if k != "JOBSET_LOCAL_FAULTS" and k != "JOBSET_EXAMPLE_RUNTIME"}
    done = subprocess.run(  # one stream, in the order it was written (Airflow 3.1 logs the trigger to stderr)
        [sys.executable, "-m", "airflow", "dags", "test", DAG_ID],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240, env=env, check=False,
    )
    out = done.stdout
    assert done.returncode == 0, out[-6000:]
    return out


@pytest.mark.timeout(300)
def test_example_dag_trains_through_an_injected_preemption(dag_test_output: str) -> None:
    out = dag_test_output
    assert "in-cluster restart 1 (Preempted); 1 of 3 counted restarts used" in out
    assert re.search(r"history: restart 1: Preempted in train-[0-9a-f]+-0-workers-1-0-", out), out[-4000:]
    assert re.search(r"JobSet default/train-[0-9a-f]+-0 succeeded \(1 in-cluster restart \+ 0 resubmissions used\)", out)
    weights = re.search(r"trained weights \[([^\]]*)\]", out)
    assert weights is not None
    got = [float(w) for w in weights.group(1).split(",")]
    assert all(abs(g - t) < 0.02 for g, t in zip(got, (3.0, -2.0, 0.5), strict=True)), got


@pytest.mark.timeout(300)
def test_example_dag_runs_the_deferrable_gang_job_after_training_through_the_trigger(dag_test_output: str) -> None:
    out = dag_test_output
    assert all(f"shard {i} done" in out for i in range(3))
    assert out.index("trained weights") < out.index("shard 0 done")
    deferred = out.index("Pausing task as DEFERRED")
    triggered = out.index("running trigger in line", deferred)
    finished = re.search(r"Job default/shards-[0-9a-f]+-0 succeeded \(0 in-cluster restarts", out)
    assert finished is not None and finished.start() > triggered  # decided in the worker, after the trigger
