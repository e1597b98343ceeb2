"""Bad input from every door: only `SpecError` naming the field (never another exception, never a hang).

tests/test_validation.py fuzzes the spec classes with wrong types; here: unicode and non-DNS names and huge
lists in the spec, the Airflow operators' and the Flyte decorator's own arguments, workload files with
unknown fields, and `jobset explain --from-file` on arbitrary bytes.
"""

from __future__ import annotations

from tests import airflow_support  # first: AIRFLOW_HOME must be set before airflow is imported

airflow_support.HOME.mkdir(exist_ok=True)

import string  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from airflow_jobset import GangJobOperator, JobSetOperator  # noqa: E402
from airflow_jobset.specs import load_spec  # noqa: E402
from flyte_jobset import jobset_task  # noqa: E402
from jobset_core import GangJobSpec, JobSetSpec, ReplicatedJob, RetryPolicy, SpecError  # noqa: E402
from jobset_core.cli import EXIT_USAGE, main  # noqa: E402

pytestmark = pytest.mark.faults

IMAGE, CMD = "ghcr.io/acme/train:1", ["python", "train.py"]
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
WRONG = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=80), st.binary(max_size=8),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
NAMES = st.one_of(st.text(max_size=100), st.text(alphabet=string.ascii_lowercase + "-.", max_size=70))


def only_spec_errors(build: Any) -> None:
    try:
        build()
    except SpecError as err:
        assert err.field and str(err).startswith(err.field), str(err)


@FUZZ
@given(name=NAMES, rj_name=NAMES, image=st.text(max_size=40), command=st.lists(st.text(max_size=20), max_size=5),
       env=st.dictionaries(st.text(max_size=20), st.text(max_size=20), max_size=4))
def test_unicode_and_non_dns_names_give_only_spec_errors(name: str, rj_name: str, image: str, command: list[str], env: dict[str, str]) -> None:
    only_spec_errors(lambda: JobSetSpec(name=name, replicated_jobs=[ReplicatedJob(rj_name, image=image, command=command, env=env)]).manifests())
    only_spec_errors(lambda: GangJobSpec(name=name, image=image, command=command, env=env).manifests())


@pytest.mark.parametrize("count", [0, 300, 20000])
def test_huge_lists_are_refused_or_built_without_a_hang(count: int) -> None:
    jobs = [ReplicatedJob(f"r{i}", image=IMAGE, command=CMD) for i in range(min(count, 300))]
    only_spec_errors(lambda: JobSetSpec(name="t", replicated_jobs=jobs).manifests())
    only_spec_errors(lambda: JobSetSpec(name="t", replicated_jobs=[ReplicatedJob("w", image=IMAGE, command=["x"] * count)]).manifests())
    only_spec_errors(lambda: RetryPolicy(retries=1, retryable_exit_codes=list(range(count))))


@FUZZ
@given(retries=WRONG, retry=st.one_of(WRONG, st.just(RetryPolicy(retries=1))), namespace=WRONG, runtime=WRONG, jobset=WRONG)
def test_operator_arguments_give_only_spec_errors(retries: Any, retry: Any, namespace: Any, runtime: Any, jobset: Any) -> None:
    spec = JobSetSpec(name="t", replicated_jobs=[ReplicatedJob("w", image=IMAGE, command=CMD)])
    only_spec_errors(lambda: JobSetOperator(task_id="t", jobset=jobset, retry=retry, runtime=runtime))
    only_spec_errors(lambda: JobSetOperator(task_id="t", jobset=spec, retry=retry, namespace=namespace))
    only_spec_errors(lambda: GangJobOperator(task_id="g", job=jobset, runtime=runtime))


@FUZZ
@given(workers=WRONG, gpus=WRONG, retries=WRONG, leader=WRONG, runtime=WRONG, namespace=WRONG)
def test_decorator_arguments_give_only_spec_errors(workers: Any, gpus: Any, retries: Any, leader: Any, runtime: Any, namespace: Any) -> None:
    def body(x: int) -> int:
        return x

    only_spec_errors(lambda: jobset_task(workers=workers, gpus_per_worker=gpus, retries=retries)(body))
    only_spec_errors(lambda: jobset_task(workers=1, leader=leader, runtime=runtime, namespace=namespace)(body))


GOOD_FILE = {"name": "train", "replicated_jobs": [{"name": "workers", "image": IMAGE, "command": CMD, "replicas": 2}]}


@pytest.mark.parametrize(
    "path,field",
    [((), "JobSetSpec"), (("replicated_jobs", 0), "replicated_jobs[0]"), (("coordinator",), "coordinator")],
)
def test_a_workload_file_with_an_unknown_field_is_refused_naming_it(tmp_path: Path, path: tuple[Any, ...], field: str) -> None:
    data: Any = yaml.safe_load(yaml.safe_dump(GOOD_FILE))
    if path == ("coordinator",):
        data["coordinator"] = {"replicated_job": "workers"}
    target = data
    for part in path:
        target = target[part]
    target["replicass"] = 3
    file = tmp_path / "workload.yaml"
    file.write_text(yaml.safe_dump(data))

    with pytest.raises(SpecError) as err:
        load_spec(str(file), JobSetSpec)
    assert err.value.field == field and "replicass" in str(err.value), str(err.value)


@FUZZ
@given(extra=st.dictionaries(st.text(min_size=1, max_size=12), WRONG, min_size=1, max_size=3))
def test_workload_files_with_any_extra_keys_give_only_spec_errors(extra: dict[str, Any]) -> None:
    only_spec_errors(lambda: load_spec({**GOOD_FILE, **extra}, JobSetSpec))
    only_spec_errors(lambda: load_spec({**GOOD_FILE, "replicated_jobs": [{**GOOD_FILE["replicated_jobs"][0], **extra}]}, JobSetSpec))


@FUZZ
@given(data=st.one_of(st.binary(max_size=200), st.text(max_size=200).map(str.encode),
                      st.recursive(WRONG, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
                      .map(lambda v: yaml.safe_dump(v, allow_unicode=True).encode())))
def test_explain_from_any_file_exits_cleanly(tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str], data: bytes) -> None:
    file = tmp_path_factory.mktemp("explain") / "dump"
    file.write_bytes(data)
    code = main(["explain", "--from-file", str(file)])
    out, err = capsys.readouterr()
    assert code in (0, 1, 2, 3)
    assert "Traceback" not in out + err
    if code == EXIT_USAGE:
        assert err.startswith("jobset explain: ") and err.count("\n") == 1, err
