"""A Dockerfile read as the builder reads it: instructions, their flags, and the words after variable expansion.

Only what the project's Dockerfiles use is understood (ARG, FROM, USER, WORKDIR, ENV, COPY, RUN, CMD,
ENTRYPOINT, EXPOSE, LABEL); any other instruction or flag is refused with its line, so a Dockerfile cannot
silently use something the emulation does not do. The rules followed are the Dockerfile reference's
(docs.docker.com/reference/dockerfile): a trailing backslash continues a line and comment lines inside a
continued instruction are dropped; an ARG before the first FROM is visible to FROM only, and inside the stage
only once declared again by name (`ARG NAME`); a `--build-arg` replaces a declared ARG's default; ENV wins over
an ARG of the same name; `$NAME`, `${NAME}`, `${NAME:-word}` and `${NAME:+word}` are expanded in the
instructions that expand (not in RUN, CMD or ENTRYPOINT, whose shell form the shell expands); single quotes
keep their text as is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

KNOWN = {"ARG", "FROM", "USER", "WORKDIR", "ENV", "COPY", "RUN", "CMD", "ENTRYPOINT", "EXPOSE", "LABEL"}
FLAGS = {"COPY": {"chown", "chmod"}, "FROM": set(), "RUN": set()}
SHELL = ["/bin/sh", "-c"]  # the default SHELL on Linux
PIP_VALUE_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
                     "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root"}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class DockerfileError(ValueError):
    """A Dockerfile the emulation cannot read, with the line that says where."""


@dataclass(frozen=True)
class Instruction:
    op: str
    text: str  # the arguments after the flags, continuation lines joined
    line: int  # where it starts, for messages
    flags: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        flags = "".join(f"--{k}={v} " for k, v in self.flags.items())
        return f"{self.op} {flags}{self.text}"

    def exec_form(self) -> list[str] | None:
        """The JSON (exec) form of RUN, CMD or ENTRYPOINT, or None for the shell form."""
        if not self.text.startswith("["):
            return None
        try:
            words = json.loads(self.text)
        except json.JSONDecodeError:
            return None  # Docker runs a malformed JSON array as a shell command
        return words if isinstance(words, list) and all(isinstance(w, str) for w in words) else None

    def argv(self) -> list[str]:
        """What RUN, CMD or ENTRYPOINT execute: the exec form as written, the shell form through the shell."""
        return self.exec_form() or [*SHELL, self.text]


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction text) with continuations joined and comment lines dropped."""
    lines: list[tuple[int, str]] = []
    start, parts = 0, []
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not parts and (not stripped or stripped.startswith("#")):
            continue
        if parts and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not parts:
            start = number
        if raw.rstrip().endswith("\\"):
            parts.append(raw.rstrip()[:-1])
            continue
        parts.append(raw)
        lines.append((start, " ".join(p.strip() for p in parts if p.strip())))
        parts = []
    if parts:
        lines.append((start, " ".join(p.strip() for p in parts if p.strip())))
    return lines


def _split_flags(op: str, rest: str, line: int) -> tuple[dict[str, str], str]:
    flags: dict[str, str] = {}
    while rest.startswith("--"):
        word, _, rest = rest.partition(" ")
        name, _, value = word[2:].partition("=")
        if name not in FLAGS.get(op, set()):
            raise DockerfileError(f"line {line}: `{op} --{name}` is not something the emulation does")
        flags[name] = value
        rest = rest.lstrip()
    return flags, rest


def parse(text: str) -> list[Instruction]:
    """Every instruction of a Dockerfile's text, in order."""
    instructions = []
    for line, logical in logical_lines(text):
        op, _, rest = logical.partition(" ")
        op = op.upper()
        if op not in KNOWN:
            raise DockerfileError(f"line {line}: {op} is not an instruction the emulation knows")
        flags, rest = _split_flags(op, rest.strip(), line)
        instructions.append(Instruction(op, rest, line, flags))
    return instructions


def read(path: Path) -> list[Instruction]:
    return parse(path.read_text())


# ----- words and variables -------------------------------------------------------------------------------------


def _variable(text: str, i: int, values: Mapping[str, str]) -> tuple[str, int]:
    """The expansion of the `$...` at text[i], and where the text goes on after it."""
    if text.startswith("${", i):
        end = text.index("}", i)
        body = text[i + 2:end]
        name, operator, word = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(:[-+])?(.*)", body).groups()  # type: ignore[union-attr]
        value = values.get(name, "")
        if operator == ":-":
            value = value or expand(word, values)
        elif operator == ":+":
            value = expand(word, values) if value else ""
        return value, end + 1
    found = _NAME.match(text, i + 1)
    if found is None:
        return "$", i + 1
    return values.get(found[0], ""), found.end()


def _lex(text: str, values: Mapping[str, str], split: bool) -> list[str]:
    """Quotes removed and variables expanded (not inside '...'); cut at unquoted blanks when `split`."""
    words: list[str] = []
    current: list[str] | None = None
    i, quote = 0, ""
    while i < len(text):
        char = text[i]
        if split and char.isspace() and not quote:
            if current is not None:
                words.append("".join(current))
                current = None
            i += 1
            continue
        current = [] if current is None else current
        if char in "'\"" and quote in ("", char):
            quote = "" if quote else char
            i += 1
        elif char == "\\" and quote != "'" and i + 1 < len(text):
            current.append(text[i + 1])
            i += 2
        elif char == "$" and quote != "'":
            value, i = _variable(text, i, values)
            current.append(value)
        else:
            current.append(char)
            i += 1
    if quote:
        raise DockerfileError(f"unterminated {quote} in {text!r}")
    if current is not None:
        words.append("".join(current))
    return words


def words(text: str, values: Mapping[str, str]) -> list[str]:
    """The words of an instruction's arguments: quotes removed, variables expanded (not inside '...')."""
    return _lex(text, values, split=True)


def expand(text: str, values: Mapping[str, str]) -> str:
    """A whole argument with its variables expanded and its quotes removed, blanks kept."""
    return "".join(_lex(text, values, split=False))


def assignments(text: str, values: Mapping[str, str]) -> dict[str, str]:
    """ENV's or LABEL's `KEY=VALUE ...`, or the older `KEY VALUE` form (one key, the rest its value)."""
    first = text.split(None, 1)[0]
    if "=" not in first:
        key, _, value = text.partition(" ")
        return {key: expand(value.strip(), values)}
    return dict(word.split("=", 1) for word in words(text, values))


# ----- ARG scoping -----------------------------------------------------------------------------------------------


@dataclass
class Stage:
    """The one build stage of a Dockerfile with what its instructions see.

    `global_args` are the ARGs declared before FROM (with build args applied); `args` those declared in the
    stage so far; `env` the ENV of the image so far (the base's first)."""

    base: str
    instructions: list[Instruction]
    build_args: dict[str, str]
    global_args: dict[str, str]
    args: dict[str, str] = field(default_factory=dict)

    def declare(self, text: str) -> None:
        """`ARG NAME` or `ARG NAME=default` inside the stage."""
        name, has_default, default = text.strip().partition("=")
        if name in self.build_args:
            self.args[name] = self.build_args[name]
        elif has_default:
            self.args[name] = expand(default, self.args)
        else:
            self.args[name] = self.global_args.get(name, "")


def stage_of(instructions: list[Instruction], build_args: Mapping[str, str]) -> Stage:
    """Split at FROM: ARGs before it (their build-arg values), FROM expanded with them, the rest in order."""
    global_args: dict[str, str] = {}
    froms = [i for i, instruction in enumerate(instructions) if instruction.op == "FROM"]
    if len(froms) != 1:
        raise DockerfileError(f"{len(froms)} FROM instructions: the emulation builds one stage")
    for instruction in instructions[:froms[0]]:
        if instruction.op != "ARG":
            raise DockerfileError(f"line {instruction.line}: only ARG may come before FROM")
        name, has_default, default = instruction.text.strip().partition("=")
        global_args[name] = build_args.get(name, expand(default, global_args) if has_default else "")
    (base,) = words(instructions[froms[0]].text, global_args)[:1]
    return Stage(base, instructions[froms[0] + 1:], dict(build_args), global_args)


# ----- what a Dockerfile's RUN lines ask pip for ---------------------------------------------------------------


def pip_requirements(argv: list[str]) -> list[str]:
    """The requirements on a `pip install` command line (options skipped; options that read files refused)."""
    for i, word in enumerate(argv):
        if word == "install" and i > 0 and PurePosixPath(argv[i - 1]).name in ("pip", "pip3"):
            wanted = []
            for arg in argv[i + 1:]:
                if arg.split("=")[0] in PIP_VALUE_OPTIONS:
                    raise DockerfileError(f"pip install {arg}: the emulated index does not do it")
                if not arg.startswith("-"):
                    wanted.append(arg)
            return wanted
    return []


def shell_commands(text: str) -> list[str]:
    """A shell line cut at `&&`, `||`, `;` and `|` (enough to find the pip commands of a RUN)."""
    for separator in ("&&", "||", ";", "|"):
        text = text.replace(separator, "\n")
    return [part.strip() for part in text.splitlines() if part.strip()]


class Dockerfile:
    """A Dockerfile's instructions with its ARG defaults, for tests that read what it asks for (no build)."""

    def __init__(self, path: Path) -> None:
        self.instructions = read(path)
        self.args = {i.text.split("=", 1)[0]: i.text.split("=", 1)[1] for i in self.instructions
                     if i.op == "ARG" and "=" in i.text}
        self.base = stage_of(self.instructions, {}).base

    def all(self, op: str) -> list[Instruction]:
        return [instruction for instruction in self.instructions if instruction.op == op]

    def copies(self) -> list[list[str]]:
        """The sources and destination of every COPY, expanded."""
        return [words(copy.text, self.args) for copy in self.all("COPY")]

    def cmd(self) -> list[str]:
        (cmd,) = self.all("CMD")
        return cmd.argv()

    def pip_installs(self) -> list[str]:
        """The requirements of every `pip install` of its RUN lines, expanded with the ARG defaults."""
        return [wanted for run in self.all("RUN") for part in shell_commands(run.text)
                for wanted in pip_requirements(words(part, self.args))]
