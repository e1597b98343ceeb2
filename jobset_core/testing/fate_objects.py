"""`Fate` objects: faults told to a running offline cluster from outside its process.

A test, a terminal or another engine's process cannot call into the cluster's Python objects, but it can
talk to its API server: a `Fate` (`fakecluster.jobset-plugins.io/v1`, namespaced) holds one fault in the
mapping form of `jobset_core.sim.fault_parsing` as its `spec`, e.g.

    apiVersion: fakecluster.jobset-plugins.io/v1
    kind: Fate
    metadata: {name: preempt-a-worker}
    spec: {fault: preempt, replica: workers-0-1, jobset: train, attempt: 0}

`kubectl apply -f`, `jobset fake-cluster fate ...` and `add_fate()` all create one. Admission refuses a fate
that is malformed or can never fire on the JobSet it names (422 naming the field), before it exists; the
cluster then plays it on the pods of the Fate's namespace and counts in `status.fired` how often it fired.
Deleting the Fate withdraws the fault. State lives on the object, so nothing else needs to be told.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jobset_core import constants as c
from jobset_core import kinds
from jobset_core.errors import SpecError
from jobset_core.sim.apistore import errors
from jobset_core.sim.apistore.errors import ApiError
from jobset_core.sim.fault_parsing import from_mapping
from jobset_core.sim.fault_targets import never_fires
from jobset_core.sim.faults import Fault
from jobset_core.testing import tables

if TYPE_CHECKING:
    from jobset_core.testing.apiserver import LocalApiServer
    from jobset_core.testing.fates import PodRule

Obj = dict[str, Any]


def _spec_cell(key: str) -> Any:
    return lambda fate, now: str((fate.get("spec") or {}).get(key, ""))


FATE_COLUMNS: list[tables.Column] = [
    ("Name", "string", 0, lambda fate, now: fate["metadata"].get("name", "")),
    ("Fault", "string", 0, _spec_cell("fault")),
    ("Replica", "string", 0, _spec_cell("replica")),
    ("JobSet", "string", 0, _spec_cell("jobset")),
    ("Attempt", "string", 0, _spec_cell("attempt")),
    ("Fired", "integer", 0, lambda fate, now: int((fate.get("status") or {}).get("fired", 0))),
    ("Age", "string", 0, lambda fate, now: tables.age(fate, now)),
]


def fault_of(fate: Obj) -> Fault:
    """The fault a Fate object holds; SpecError naming `spec.<key>` when it holds none."""
    return from_mapping((fate.get("spec") if isinstance(fate, dict) else None) or {}, "spec")


def workloads_named(server: LocalApiServer, namespace: str | None, pattern: str) -> list[Obj]:
    """The JobSets (and gang Jobs of ours, which no JobSet owns) in `namespace` whose name matches `pattern`."""
    return [obj for kind in (adapter.descriptor for adapter in kinds.all_kinds())
            for obj in server.list(kind.api_version, kind.kind, namespace, shared=True)
            if fnmatch.fnmatchcase(obj["metadata"]["name"], pattern)
            and c.JOBSET.member_label not in (obj["metadata"].get("labels") or {})]  # a JobSet's child Job is none


def why_never(fault: Fault, workloads: list[Obj], where: str) -> SpecError | None:
    """Why the fault fires on none of the workloads it names (None when it can fire on one, or names none)."""
    problems = [never_fires(fault, workload, where) for workload in workloads]
    return problems[0] if problems and all(problems) else None


class FateObjects:
    """Serves the Fate kind on a fake cluster's `server` and keeps its kubelet's rules in step with the
    objects, through the cluster's `add_fault(fault, origin=, namespace=)` and `remove_fault(rule)`."""

    def __init__(self, server: LocalApiServer, add_fault: Callable[..., PodRule],
                 remove_fault: Callable[[PodRule], None]) -> None:
        self.server = server
        self.add_fault, self.remove_fault = add_fault, remove_fault
        self.kind = server.register_kind(c.FATE_API_VERSION, c.FATE_KIND, c.FATE_PLURAL)
        server.store.add_admission(self.kind, self._admit)
        tables.register_columns(c.FATE_API_VERSION, c.FATE_KIND, FATE_COLUMNS)
        self._rules: dict[str, PodRule] = {}
        self._fired: dict[str, int] = {}

    def _admit(self, fate: Obj) -> None:
        name = (fate.get("metadata") or {}).get("name", "")
        try:
            fault = fault_of(fate)
            if fault.jobset is not None:
                problem = why_never(fault, workloads_named(self.server, fate["metadata"].get("namespace"),
                                                           fault.jobset), "spec")
                if problem is not None:
                    raise problem
        except SpecError as exc:
            detail = exc.problem + (f"; {exc.fix}" if exc.fix else "")
            raise errors.invalid(self.kind, name, exc.field, c.CAUSE_FIELD_VALUE_INVALID, detail) from None

    def sync(self) -> None:
        """Add the rules of new Fates, withdraw those of deleted ones, write how often each fired."""
        fates = {f["metadata"]["uid"]: f for f in self.server.list(c.FATE_API_VERSION, c.FATE_KIND, None)}
        for uid in set(self._rules) - set(fates):
            self.remove_fault(self._rules.pop(uid))
            self._fired.pop(uid, None)
        for uid, fate in fates.items():
            rule = self._rules.get(uid)
            if rule is None:
                meta = fate["metadata"]
                rule = self._rules[uid] = self.add_fault(
                    fault_of(fate), origin=f"Fate {meta['namespace']}/{meta['name']}", namespace=meta["namespace"])
            if self._fired.get(uid, 0) != rule.used:
                self._write_fired(fate, rule.used)
                self._fired[uid] = rule.used

    def _write_fired(self, fate: Obj, fired: int) -> None:
        try:
            self.server.patch(c.FATE_API_VERSION, c.FATE_KIND, fate["metadata"]["name"],
                                      fate["metadata"]["namespace"], {"status": {"fired": fired}},
                                      subresource="status")
        except ApiError as exc:  # deleted meanwhile: the next sync withdraws its rule
            if exc.code != 404:
                raise


def add_fate(kubeconfig: str | None = None, *, namespace: str | None = None, name: str | None = None,
             **fields: Any) -> Obj:
    """Tell a running offline cluster (`jobset fake-cluster`, `FakeClusterServer`) to play a fault, from any
    process: `add_fate(path, fault="preempt", replica="workers-0-0", attempt=0)`. `fields` are the keys of
    the mapping form (`exitCode` may be written `exit_code`); checked here first, then by the server's
    admission (422 naming the field when it can never fire on the JobSet it names). Returns the Fate."""
    from kubernetes import client, config

    spec = {("exitCode" if key == "exit_code" else key): value for key, value in fields.items() if value is not None}
    fault = from_mapping(spec, "fate")  # one line naming the key, before anything is sent
    api_client = config.new_client_from_config(config_file=kubeconfig)
    if namespace is None:
        _, active = config.list_kube_config_contexts(config_file=kubeconfig)
        namespace = (active.get("context") or {}).get("namespace") or c.DEFAULT_NAMESPACE
    meta = {"name": name} if name else {"generateName": f"{fault.name}-"}
    body = {"apiVersion": c.FATE_API_VERSION, "kind": c.FATE_KIND, "metadata": meta, "spec": spec}
    group, version = c.FATE_API_VERSION.split("/")
    try:
        return client.CustomObjectsApi(api_client).create_namespaced_custom_object(
            group, version, namespace, c.FATE_PLURAL, body)
    finally:
        api_client.close()
