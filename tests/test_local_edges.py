"""The local runtime's edges: faults that could never fire, faults that did not, the program a pod runs,
and the temporary directory it leaves (none)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tenacity

from jobset_core import GangJobSpec, JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy, SpecError
from jobset_core.runtimes.local import LocalRuntime, Preempt, parse_faults
from jobset_core.runtimes.local.process import container_argv

QUICK = [sys.executable, "-c", "pass"]


def spec(command: list[str] = QUICK) -> JobSetSpec:
    return JobSetSpec(
        name="t",
        replicated_jobs=[
            ReplicatedJob(name="leader", image="x", command=command),
            ReplicatedJob(name="workers", image="x", command=command, replicas=2, parallelism=2),
        ],
        retry=RetryPolicy(retries=0, backoff=tenacity.wait_none()),
    )


def runtime(tmp_path: Path, **kwargs) -> LocalRuntime:
    return LocalRuntime(workdir=tmp_path, stream_output=False, grace_seconds=0.5, tick_seconds=0.1, **kwargs)


@pytest.mark.parametrize(
    "replica",
    ["worker-1-0", "workers-2-0", "workers-0-2", "Workers-0-0", "leader-0-1", "t-workers-5-0", ""],
    ids=["typo", "job-index-beyond-replicas", "pod-index-beyond-pods", "wrong-case", "leader-pod-1", "hostname", "empty"],
)
def test_a_fault_whose_pod_cannot_exist_is_refused_at_submit(tmp_path, replica) -> None:
    if not replica:  # refused even earlier, by the fault itself
        with pytest.raises(SpecError):
            Preempt(replica)
        return
    with runtime(tmp_path, faults=[Preempt(replica)]) as rt:
        with pytest.raises(SpecError) as err:
            rt.submit(spec().manifests(), run_key="k", attempt=0)
        assert err.value.field == "faults[0].replica"
        assert f"{replica!r} matches no pod of JobSet 't'" in str(err.value)
        assert "leader-<0..0>-<0..0>, workers-<0..1>-<0..1>" in str(err.value)
        assert rt.find("k", "default") == [], "nothing may start"


def test_faults_that_can_exist_are_accepted(tmp_path) -> None:
    faults = [Preempt("workers-1-1", after_seconds=60), Preempt("t-leader-0-0", after_seconds=60)]
    with runtime(tmp_path, faults=faults) as rt:
        handle = rt.submit(spec().manifests(), run_key="k", attempt=0)
        assert handle.name == "t"


def test_a_wrong_case_in_the_environment_variable_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("JOBSET_LOCAL_FAULTS", "preempt:Workers-0-1@1s")
    with LocalRuntime(workdir=tmp_path, stream_output=False) as rt, pytest.raises(SpecError, match="'Workers-0-1' matches no pod"):
        rt.submit(spec().manifests(), run_key="k", attempt=0)


def test_gang_job_faults_name_completion_indexes(tmp_path) -> None:
    gang = GangJobSpec(name="g", image="x", command=QUICK, pods=2, retry=RetryPolicy(retries=0))
    with runtime(tmp_path, faults=parse_faults("preempt:2")) as rt, pytest.raises(SpecError, match="completion indexes 0..1"):
        rt.submit(gang.manifests(), run_key="k", attempt=0)
    with runtime(tmp_path, faults=parse_faults("preempt:1@60s;preempt:g-0@60s")) as rt:
        rt.submit(gang.manifests(), run_key="k", attempt=0)


NEVER_FIRES = """
from jobset_core import JobSetRun, JobSetSpec, LocalRuntime, Preempt, ReplicatedJob, RetryPolicy
import sys
quick = [sys.executable, "-c", "pass"]
spec = JobSetSpec(name="t", retry=RetryPolicy(retries=1), replicated_jobs=[
    ReplicatedJob("leader", image="x", command=quick), ReplicatedJob("workers", image="x", command=quick, replicas=2)])
with LocalRuntime(stream_output={stream}, grace_seconds=0.5, tick_seconds=0.1,
                  faults=[Preempt("workers-1-0", after_seconds=120)]) as rt:
    assert JobSetRun(spec, rt, run_key="k", sleep=lambda s: None).run().succeeded
"""


@pytest.mark.parametrize("stream", [True, False])
def test_a_fault_that_never_fired_is_one_warning_when_the_submission_ends(stream: bool) -> None:
    """In a program of the user's own (no logging set up: Python prints warnings to stderr itself), the warning
    is printed once: on the streamed output when pod output is streamed, else as a logged warning."""
    done = subprocess.run([sys.executable, "-c", NEVER_FIRES.format(stream=stream)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    expected = "fault never fired: preempt workers-1-0 after 120s (attempt 0, restart 0)"
    both = done.stdout + done.stderr
    assert both.count(expected) == 1, both
    assert (f"[jobset-local] warning: {expected}" in done.stdout) is stream


def test_a_fault_that_fired_is_not_reported(tmp_path, capsys) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(30)"]
    rt = LocalRuntime(workdir=tmp_path, stream_output=True, grace_seconds=0.5, tick_seconds=0.1,
                      faults=[Preempt("leader-0-0", after_seconds=0.2)])
    with rt:
        result = JobSetRun(spec(sleeper), rt, run_key="k", sleep=lambda s: None).run()
    assert not result.succeeded and result.diagnosis.kind == "Preempted"
    assert "fault never fired" not in capsys.readouterr().out


def test_a_missing_program_shows_the_container_runtime_message_in_the_diagnosis(tmp_path) -> None:
    with runtime(tmp_path) as rt:
        result = JobSetRun(spec(["no-such-program-xyz"]), rt, run_key="k", sleep=lambda s: None).run()
    assert any('exec: "no-such-program-xyz": no such file or directory' in e for e in result.diagnosis.evidence)


@pytest.mark.parametrize("program", ["python", "python3"])
def test_python_runs_the_interpreter_of_the_program(program) -> None:
    pod = {"spec": {"containers": [{"name": "main", "command": [program, "-c", "x"]}]}}
    assert container_argv(pod, {}) == [sys.executable, "-c", "x"]
    other = {"spec": {"containers": [{"name": "main", "command": ["python2", "x"]}]}}
    assert container_argv(other, {}) == ["python2", "x"]


def test_the_temporary_workdir_goes_with_the_runtime(tmp_path) -> None:
    with LocalRuntime(stream_output=False) as rt:
        JobSetRun(spec(), rt, run_key="k", sleep=lambda s: None).run()
        temporary = rt.workdir
        assert temporary.name.startswith("jobset-local-") and any(temporary.rglob("*.log"))
    assert not temporary.exists()

    with LocalRuntime(stream_output=False, keep_logs=True) as rt:
        JobSetRun(spec(), rt, run_key="k", sleep=lambda s: None).run()
        kept = rt.workdir
    assert any(kept.rglob("*.log"))
    subprocess.run(["rm", "-rf", str(kept)], check=True)

    with runtime(tmp_path / "mine") as rt:
        JobSetRun(spec(), rt, run_key="k", sleep=lambda s: None).run()
    assert any((tmp_path / "mine").rglob("*.log")), "a workdir the user gave is never removed"


def test_the_temporary_workdir_is_removed_at_interpreter_exit_without_close(tmp_path) -> None:
    program = textwrap.dedent(
        """
        import sys
        from jobset_core import JobSetRun, JobSetSpec, ReplicatedJob, RetryPolicy, LocalRuntime
        spec = JobSetSpec(name="t", replicated_jobs=[ReplicatedJob(name="w", image="x", command=[sys.executable, "-c", "pass"])],
                          retry=RetryPolicy(retries=0))
        rt = LocalRuntime(stream_output=False)
        JobSetRun(spec, rt, run_key="k").run()
        print(rt.workdir)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    workdir = Path(done.stdout.strip().splitlines()[-1])
    assert workdir.name.startswith("jobset-local-") and not workdir.exists()


def test_a_fault_at_an_attempt_the_run_never_reaches_is_refused_before_anything_starts(tmp_path) -> None:
    once = JobSetSpec(name="t", retry=RetryPolicy(retries=0), replicated_jobs=[ReplicatedJob("w", image="x", command=QUICK)])
    with runtime(tmp_path, faults=parse_faults("preempt:w-0-0@1s,attempt=1")) as rt, pytest.raises(SpecError) as err:
        JobSetRun(once, rt, run_key="k").run()
    assert str(err.value).startswith("faults[0].attempt: the run of 't-")
    assert "has at most 1 attempt (0..0): attempt 1 never happens; use an attempt between 0 and 0" in str(err.value)
    assert rt.cluster.list("jobset.x-k8s.io/v1alpha2", "JobSet") == []
