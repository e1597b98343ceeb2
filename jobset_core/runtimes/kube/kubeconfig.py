"""The kubeconfig kubectl reads, by kubectl's rules: which files, how they merge, which context, cluster and user.

Why our own reading: the official Python client merges several files differently from kubectl (its
`KubeConfigMerger` lets the *last* file's `current-context` win), so with `KUBECONFIG=a:b` a run would go to
`b`'s cluster while `kubectl config current-context` says `a`'s. The rules here are client-go's
(`staging/src/k8s.io/client-go/tools/clientcmd/loader.go`, `ClientConfigLoadingRules.Load`,
`NewDefaultClientConfigLoadingRules`, `ResolveLocalPaths`; `tools/clientcmd/api/v1/conversion.go`):

- `KUBECONFIG` is a list of files (split as `filepath.SplitList` does, on `os.pathsep`); a name listed twice is
  read once; empty names are skipped; a file that does not exist is skipped. A file that exists but cannot be
  read or decoded is an error naming it (kubectl: `error loading config file "<file>": ...`). An empty file is an
  empty kubeconfig.
- The first file to set a value wins and it is never changed: `current-context` (an empty one sets nothing), and
  each cluster, context and user *by name*, whole: a later file's entry of the same name is dropped, even the
  fields the first one did not set. Later files only add what is missing.
- A name listed twice within one file is an error (`duplicate name "<name>" in list`).
- Relative file references are resolved against the directory of the file that holds them: a cluster's
  `certificate-authority`; a user's `client-certificate`, `client-key`, `tokenFile`, and its `exec.command` when
  it contains a path separator (one found on PATH is left alone).
- An explicit file (kubectl's `--kubeconfig`; here an engine connection's kubeconfig path) is read alone, and
  must exist.

The result is one kubeconfig in the file's own shape (named lists), which the official client then loads as a
dictionary, so that everything else it does (tokens, exec plugins, certificates) stays the client's.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

# Each named list of a kubeconfig and the key of the entry's body (client-go api/v1 NamedCluster, NamedContext,
# NamedAuthInfo).
SECTIONS = {"clusters": "cluster", "contexts": "context", "users": "user"}
CURRENT_CONTEXT = "current-context"
# The file references of an entry, resolved against its file's directory (loader.go GetClusterFileReferences,
# GetAuthInfoFileReferences).
FILE_REFERENCES = {"clusters": ("certificate-authority",), "users": ("client-certificate", "client-key", "tokenFile")}
WHAT_A_KUBECONFIG_IS = "a mapping of clusters, contexts, users and current-context"


class KubeconfigError(ValueError):
    """A kubeconfig kubectl would refuse too, in one line: the file (None for a kubeconfig given as an object)
    and what is wrong with it."""

    def __init__(self, problem: str, file: str | None = None) -> None:
        super().__init__(f"{file}: {problem}" if file else problem)
        self.problem = problem
        self.file = file


@dataclass(frozen=True)
class Choice:
    """What a context selects, and where each part was defined (a file, or None for a kubeconfig given as an
    object)."""

    context: str
    cluster: str
    user: str | None
    namespace: str | None
    server: str | None
    context_file: str | None
    cluster_file: str | None

    def describe(self) -> str:
        """Where the cluster's address came from, for every message about it: the context and its file, and
        the cluster's file when another file defines it."""
        said = f"kubeconfig context {self.context!r}" + (f" ({self.context_file})" if self.context_file else "")
        if self.cluster_file != self.context_file:
            said += f", cluster {self.cluster!r}" + (f" ({self.cluster_file})" if self.cluster_file else "")
        return said


@dataclass(frozen=True)
class Kubeconfig:
    """Several kubeconfig files merged as kubectl merges them. `document` is in the file's shape (named lists,
    file references absolute); `origins` names the file each entry came from, by (section, name)."""

    document: dict[str, Any]
    origins: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    files: tuple[str, ...] = ()

    @property
    def current_context(self) -> str | None:
        return self.document.get(CURRENT_CONTEXT) or None

    def entry(self, section: str, name: str) -> Mapping[str, Any] | None:
        """The body of the entry of that name (its `cluster`, `context` or `user`), or None."""
        body = SECTIONS[section]
        return next((e.get(body) or {} for e in self.document[section] if e["name"] == name), None)

    def choose(self, context: str | None = None) -> Choice:
        """What `context` (else the current context) selects, as `kubectl config view --minify` shows it.

        Raises KubeconfigError (one line) for a context that is not set or not defined, or one whose cluster
        no file defines."""
        name = context or self.current_context
        if not name:
            raise KubeconfigError("no current-context is set; run `kubectl config use-context NAME`")
        chosen = self.entry("contexts", name)
        if chosen is None:
            raise KubeconfigError(f"there is no context {name!r}; `kubectl config get-contexts` lists them")
        cluster_name = str(chosen.get("cluster") or "")
        cluster = self.entry("clusters", cluster_name)
        if cluster is None:
            raise KubeconfigError(f"context {name!r} names cluster {cluster_name!r}, which is not defined")
        return Choice(
            context=name,
            cluster=cluster_name,
            user=chosen.get("user") or None,
            namespace=chosen.get("namespace") or None,
            server=cluster.get("server"),
            context_file=self.origins.get(("contexts", name)),
            cluster_file=self.origins.get(("clusters", cluster_name)),
        )


def kubeconfig_files(value: str) -> list[str]:
    """The files a `KUBECONFIG` value lists, in order: split on the path separator, empty names skipped, each
    name once (client-go `filepath.SplitList` and `deduplicate`; no `~` expansion, as there)."""
    seen: list[str] = []
    for name in value.split(os.pathsep):
        if name and name not in seen:
            seen.append(name)
    return seen


def load_files(paths: Sequence[str], *, explicit: bool = False) -> Kubeconfig:
    """The files merged by kubectl's rules. A missing file is skipped (with `explicit`, it is an error:
    FileNotFoundError); one that cannot be read or is not a kubeconfig is a KubeconfigError naming it; none
    found at all is an empty kubeconfig with no files."""
    read: list[tuple[str, Mapping[str, Any]]] = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            if explicit:
                raise
            continue
        except (OSError, UnicodeDecodeError) as exc:
            raise KubeconfigError(f"cannot be read ({getattr(exc, 'strerror', None) or exc})", path) from None
        try:
            read.append((path, parse(text, path)))
        except yaml.YAMLError as exc:
            raise KubeconfigError(yaml_problem(exc), path) from None
    return merge(read)


def from_document(document: Mapping[str, Any]) -> Kubeconfig:
    """A kubeconfig given as an object (an engine connection's), checked as a file is; it has no file, so its
    file references are left as they are."""
    return merge([(None, checked(document, None))])


def parse(text: str, path: str) -> dict[str, Any]:
    """One file's kubeconfig: YAML (JSON is YAML); empty or only comments is an empty kubeconfig."""
    document = yaml.safe_load(text)
    if document is None:
        return {}
    return checked(document, path)


def checked(document: Any, file: str | None) -> dict[str, Any]:
    """The document when it has a kubeconfig's shape; else one line naming the file and the place: a string
    where a mapping belongs reaches the client as `'str' object does not support item assignment` or `'str'
    object has no attribute 'path'`, which name neither."""
    if not isinstance(document, Mapping):
        raise KubeconfigError(f"it holds a YAML {_kind(document)}, not a kubeconfig ({WHAT_A_KUBECONFIG_IS})", file)
    current = document.get(CURRENT_CONTEXT)
    if current is not None and not isinstance(current, str):
        raise KubeconfigError(f"its {CURRENT_CONTEXT} is a {_kind(current)}, not a context's name", file)
    for section, body in SECTIONS.items():
        problem = section_problem(document.get(section), section, body)
        if problem:
            raise KubeconfigError(problem, file)
    return dict(document)


def section_problem(entries: Any, section: str, body: str) -> str | None:
    """What is wrong with one named list, or None."""
    if entries is None:
        return None
    if not isinstance(entries, list):
        return f"its {section} is a {_kind(entries)}, not a list of {{name, {body}}} entries"
    names: set[str] = set()
    for number, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            return f"{section}[{number}] is not a {{name, {body}}} entry with a name"
        if entry.get(body) is not None and not isinstance(entry[body], Mapping):
            return f"{section}[{number}].{body} is a {_kind(entry[body])}, not a mapping"
        if entry["name"] in names:  # client-go's conversion: `duplicate name "<name>" in list`
            return f"its {section} list {entry['name']!r} twice; keep one"
        names.add(entry["name"])
    return None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in a few words with its place: the parser's own message is a multi-line trace."""
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError):
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"not valid YAML: {exc.problem or exc.context}{where}"
    text = str(exc).strip()
    return f"not valid YAML: {text.splitlines()[0] if text else type(exc).__name__}"


def merge(documents: Iterable[tuple[str | None, Mapping[str, Any]]]) -> Kubeconfig:
    """Documents merged by kubectl's rules, first wins: `current-context` (the first non-empty one), and each
    named entry whole. Each entry's file references are made absolute against its own file's directory."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", **{section: [] for section in SECTIONS}}
    origins: dict[tuple[str, str], str | None] = {}
    files: list[str] = []
    for path, document in documents:
        if path is not None:
            files.append(path)
        if not merged.get(CURRENT_CONTEXT) and document.get(CURRENT_CONTEXT):
            merged[CURRENT_CONTEXT] = document[CURRENT_CONTEXT]
        for section in SECTIONS:
            for entry in document.get(section) or ():
                if (section, entry["name"]) in origins:
                    continue  # the first file's entry of this name wins, whole
                origins[(section, entry["name"])] = path
                merged[section].append(resolved(section, entry, path))
        for key, value in document.items():  # preferences, extensions: the first file's
            if key not in SECTIONS and key != CURRENT_CONTEXT:
                merged.setdefault(key, copy.deepcopy(value))
    return Kubeconfig(merged, origins, tuple(files))


def resolved(section: str, entry: Mapping[str, Any], path: str | None) -> dict[str, Any]:
    """A copy of the entry whose relative file references point into its file's directory."""
    out = copy.deepcopy(dict(entry))
    body = out.get(SECTIONS[section])
    if path is None or not isinstance(body, dict):
        return out
    base = os.path.abspath(os.path.dirname(path))
    for key in FILE_REFERENCES.get(section, ()):
        if key in body:
            body[key] = _absolute(body[key], base)
    plugin = body.get("exec")
    if isinstance(plugin, dict) and isinstance(plugin.get("command"), str) and os.sep in plugin["command"]:
        plugin["command"] = _absolute(plugin["command"], base)  # a command found on PATH is left alone
    return out


def _absolute(reference: Any, base: str) -> Any:
    if not isinstance(reference, str) or not reference or os.path.isabs(reference):
        return reference
    return os.path.join(base, reference)


def _kind(value: Any) -> str:
    return {str: "string", list: "list", int: "number", float: "number", bool: "boolean"}.get(type(value), type(value).__name__)
