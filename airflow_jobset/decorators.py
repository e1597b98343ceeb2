"""`@task.jobset`: a TaskFlow function that runs on every replica of a JobSet; the leader's return value is
the task's result.

Built with `task_decorator_factory`, as `@task.kubernetes` is. The function's source (decorators
stripped) and its arguments travel as JSON in one environment variable; every pod runs the same small
bootstrap with `python -c`, finds its place in the gang from the JobSet environment, and the leader (the
coordinator's replicated job, job 0, pod 0) prints its return value as one marked line, which the operator
reads back from the leader's log. Arguments and the return value must be JSON-serializable, the function must
not use names from outside itself (refused at DAG parse, naming them), and the arguments must fit in one
environment variable (128 KiB; refused before submission, with the size).
"""

from __future__ import annotations

import ast
import base64
import builtins
import dataclasses
import inspect
import json
import symtable
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.sdk.bases.decorator import DecoratedOperator, TaskDecorator, task_decorator_factory

from airflow_jobset.operators import JobSetOperator
from airflow_jobset.runtimes import LOCAL
from jobset_core import (
    Handle,
    JobSetSpec,
    SpecError,
    leader_and_workers,
    leader_container,
    leader_output,
    leader_selector,
)
from jobset_core import constants as c

PAYLOAD_ENV = "JOBSET_TASK_PAYLOAD"
RESULT_MARKER = c.RESULT_MARKER
DEFAULT_IMAGE = "python:3.11-slim"

BOOTSTRAP = f"""
import __future__, base64, json, os
payload = json.loads(base64.b64decode(os.environ[{PAYLOAD_ENV!r}]))
namespace = {{"__name__": "__jobset_task__"}}
code = compile(payload["source"], "<@task.jobset " + payload["name"] + ">", "exec",
               flags=__future__.annotations.compiler_flag, dont_inherit=True)  # annotations stay text
exec(code, namespace)
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


def outside_names(fn: Callable) -> list[str]:
    """Names the shipped source uses but does not define: module-level helpers, imports and constants of the
    function's module, which the pods will not have (only the function's own source is shipped). Annotations
    are not evaluated there, so they do not count; default values do."""
    source = function_source(fn)
    table = symtable.symtable("from __future__ import annotations\n" + source, "<task>", "exec")
    function = next(t for t in table.get_children() if t.get_name() == fn.__name__)
    names: set[str] = set()
    pending = [function]
    while pending:  # the function and what it nests (inner functions, lambdas, comprehensions)
        scope = pending.pop()
        names.update(sym.get_name() for sym in scope.get_symbols() if sym.is_global() and sym.is_referenced())
        pending.extend(scope.get_children())
    node = ast.parse(source).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
        names.update(n.id for n in ast.walk(default) if isinstance(n, ast.Name))
    return sorted(names - set(dir(builtins)))


def check_shippable(fn: Callable) -> None:
    """Refuse at DAG parse a function whose pods would fail with NameError, or whose source cannot be read."""
    try:
        missing = outside_names(fn)
    except (OSError, TypeError) as exc:
        raise SpecError(f"@task.jobset {getattr(fn, '__name__', fn)!s}", f"its source cannot be read ({exc})",
                        "define the function in a file (its source is what the pods run)") from None
    if missing:
        raise SpecError(
            f"@task.jobset {fn.__name__}",
            f"uses {', '.join(missing)} from outside the function; only the function's own source is shipped to the "
            "pods, so they would fail with NameError",
            "import modules and define helpers inside the function, or put them in a module installed in the image "
            "and import it inside the function",
        )


def payload_env(payload: dict[str, Any]) -> str:
    """The payload as the environment variable's value, refused when Linux could not start a program with it."""
    value = base64.b64encode(json.dumps(payload).encode()).decode()
    size = len(PAYLOAD_ENV) + 1 + len(value) + 1  # NAME=value and the NUL, as execve counts it
    if size > c.LINUX_MAX_ARG_STRLEN:
        raise SpecError(
            f"@task.jobset {payload['name']}",
            f"its arguments and source come to {size} bytes in the {PAYLOAD_ENV} environment variable, over the "
            f"{c.LINUX_MAX_ARG_STRLEN} bytes Linux allows one (its pods could not start: argument list too long)",
            "pass large data by reference: a path or URL the function reads, or an XCom it pulls",
        )
    return value


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
        check_shippable(kwargs["python_callable"])
        super().__init__(jobset={}, **kwargs)

    def build_spec(self, context: Any) -> JobSetSpec:
        """Leader + workers, each running the bootstrap on this function and its rendered arguments."""
        shape, coordinator = leader_and_workers(self.workers)
        payload = {
            "source": function_source(self.python_callable),
            "name": self.python_callable.__name__,
            "args": list(self.op_args),
            "kwargs": dict(self.op_kwargs),
            "leader": coordinator.replicated_job,
        }
        python = sys.executable if self.runtime == LOCAL else "python"
        env = {**self.env, PAYLOAD_ENV: payload_env(payload)}
        jobs = [dataclasses.replace(rj, image=self.image, command=[python, "-c", BOOTSTRAP], env=env, resources=self.resources)
                for rj in shape]
        spec = JobSetSpec(name=self.jobset_name, replicated_jobs=jobs, coordinator=coordinator)
        self.jobset = spec
        return super().build_spec(context)

    def result_of(self, context: Any, data: dict[str, Any]) -> Any:
        """The leader's return value, read back from its log."""
        spec, handle = self._spec(context), Handle.from_dict(data["handle"])
        text = leader_output(self._get_runtime(), handle, leader_selector(spec, handle.name), leader_container(spec))
        return result_from_log(text or "")


def jobset_task(python_callable: Callable | None = None, multiple_outputs: bool | None = None, **kwargs: Any) -> TaskDecorator:
    """`@task.jobset(workers=3, image=..., runtime=..., retries=..., watchdog=Watchdog(...))`: run the function on
    every replica; every other argument is `JobSetOperator`'s."""
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_JobSetDecoratedOperator,
        **kwargs,
    )
