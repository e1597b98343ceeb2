"""`@task.jobset`: a TaskFlow function that runs on every replica of a JobSet; the leader's return value is
the task's result.

Built with `task_decorator_factory`, as `@task.kubernetes` is. The function's source (decorators
stripped) and its arguments travel as JSON in one environment variable; every pod runs the same small
bootstrap with `python -c`, finds its place in the gang from the JobSet environment, and the leader (the
coordinator's replicated job, job 0, pod 0) prints its return value as one marked line, which the operator
reads back from the leader's log. Arguments and the return value must be JSON-serializable.
"""

from __future__ import annotations

import ast
import base64
import inspect
import json
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory

from airflow_jobset.logs import leader_output
from airflow_jobset.operators import JobSetOperator
from airflow_jobset.runtimes import LOCAL
from jobset_core import Coordinator, JobSetSpec, ReplicatedJob

PAYLOAD_ENV = "JOBSET_TASK_PAYLOAD"
RESULT_MARKER = "JOBSET_TASK_RESULT "
LEADER = "leader"
WORKERS = "workers"
DEFAULT_IMAGE = "python:3.11-slim"

BOOTSTRAP = f"""
import base64, json, os
payload = json.loads(base64.b64decode(os.environ[{PAYLOAD_ENV!r}]))
namespace = {{"__name__": "__jobset_task__"}}
exec(compile(payload["source"], "<@task.jobset " + payload["name"] + ">", "exec"), namespace)
result = namespace[payload["name"]](*payload["args"], **payload["kwargs"])
me = (os.environ.get("REPLICATED_JOB_NAME"), os.environ.get("JOB_INDEX", "0"), os.environ.get("JOB_COMPLETION_INDEX", "0"))
if me == (payload["leader"], "0", "0"):
    print({RESULT_MARKER!r} + base64.b64encode(json.dumps(result).encode()).decode(), flush=True)
"""


def function_source(fn: Callable) -> str:
    """The function's own source without its decorators (whatever name the decorator was imported as)."""
    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    return "\n".join(source.splitlines()[node.lineno - 1 :]) + "\n"


def result_from_log(text: str) -> Any:
    """The leader's return value from its log (the last marked line: a restarted leader prints again)."""
    lines = [line for line in text.splitlines() if RESULT_MARKER in line]
    if not lines:
        raise ValueError("the leader's log holds no result line")
    encoded = lines[-1].split(RESULT_MARKER, 1)[1].strip()
    return json.loads(base64.b64decode(encoded))


class _JobSetDecoratedOperator(DecoratedOperator, JobSetOperator):
    custom_operator_name = "@task.jobset"
    template_fields: Sequence[str] = ("op_args", "op_kwargs", "namespace")
    shallow_copy_attrs: Sequence[str] = ("python_callable",)

    def __init__(
        self,
        *,
        workers: int = 1,
        image: str = DEFAULT_IMAGE,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        resources: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.workers = workers
        self.image = image
        self.env = dict(env or {})
        self.resources = resources
        self.jobset_name = name or kwargs["python_callable"].__name__.replace("_", "-").lower()
        super().__init__(jobset={}, **kwargs)

    def build_spec(self, context: Any) -> JobSetSpec:
        """Leader + workers, each running the bootstrap on this function and its rendered arguments."""
        payload = {
            "source": function_source(self.python_callable),
            "name": self.python_callable.__name__,
            "args": list(self.op_args),
            "kwargs": dict(self.op_kwargs),
            "leader": LEADER,
        }
        python = sys.executable if self.runtime == LOCAL else "python"
        env = {**self.env, PAYLOAD_ENV: base64.b64encode(json.dumps(payload).encode()).decode()}
        common: dict[str, Any] = dict(image=self.image, command=[python, "-c", BOOTSTRAP], env=env, resources=self.resources)
        jobs = [ReplicatedJob(LEADER, **common)]
        if self.workers:
            jobs.append(ReplicatedJob(WORKERS, replicas=self.workers, **common))
        spec = JobSetSpec(name=self.jobset_name, replicated_jobs=jobs, coordinator=Coordinator(LEADER))
        self.jobset = spec
        return super().build_spec(context)

    def _finish(self, context: Any, data: dict[str, Any]) -> Any:
        data = super()._finish(context, data)  # raises on failure
        from jobset_core import Handle

        text = leader_output(self._get_runtime(), self._spec(context), Handle.from_dict(data["handle"]))
        return result_from_log(text or "")


def jobset_task(python_callable: Callable | None = None, multiple_outputs: bool | None = None, **kwargs: Any) -> TaskDecorator:
    """`@task.jobset(workers=3, image=..., runtime=..., retries=...)`: run the function on every replica."""
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_JobSetDecoratedOperator,
        **kwargs,
    )
