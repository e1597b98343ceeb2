"""Build an image from its Dockerfile in a throwaway root, then run commands in it as the image would.

`python -m tests.image_emulation.build REQUEST.json` runs as root inside a private mount namespace (the test
starts it under `unshare --mount --propagation private`) and prints one JSON report: every step with the user
it ran as, its exit status and the end of its output, the image's configuration (user, working directory,
environment, CMD), and every check command run in the finished image. A step that fails ends the build, as
`docker build` does, and the report says which step and why.

Each instruction does what the builder does (see `dockerfile.py` for the language, `bases.py` for what FROM
brings): ARG and ENV as the builder scopes them; USER and WORKDIR (created owned by the current USER, as
BuildKit's `dispatchWorkdir` does); COPY from the build context with the source's permission bits, owned by
root or by `--chown`, missing directories created with the same owner; RUN through `/bin/sh -c` (or its exec
form) as the current USER, in WORKDIR, with the image's ENV and the ARGs in scope (BuildKit's `dispatchRun`
adds them as environment variables); CMD and ENTRYPOINT recorded. What differs from a real build is said in
`rootfs.py` (this machine's programs) and `python_env.py` (the package index).
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from tests.image_emulation import accounts, python_env
from tests.image_emulation.bases import DEFAULT_PATH, BaseImage, base_image
from tests.image_emulation.dockerfile import (
    DockerfileError,
    Instruction,
    Stage,
    assignments,
    expand,
    pip_requirements,
    read,
    shell_commands,
    stage_of,
    words,
)
from tests.image_emulation.rootfs import Rootfs

COMMAND = "@COMMAND"  # in a check: the image's CMD up to its first option
OUTPUT_TAIL = 3000


class StepFailed(Exception):
    """A step the builder would stop at, in one line, with what the step did."""

    def __init__(self, message: str, done: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.done = done or {}


@dataclass
class Image:
    """The image's configuration so far."""

    user: str
    workdir: str
    env: dict[str, str]
    cmd: list[str] | None = None
    entrypoint: list[str] | None = None
    exposed: list[str] = field(default_factory=list)


class Builder:
    def __init__(self, rootfs: Rootfs, stage: Stage, base: BaseImage, contexts: list[Path], wheel: Path,
                 project: str) -> None:
        self.rootfs, self.stage, self.base = rootfs, stage, base
        self.contexts, self.wheel, self.project = contexts, wheel, project
        self.image = Image(base.user, base.workdir, dict(base.env), list(base.cmd), list(base.entrypoint))

    # ----- the base ------------------------------------------------------------------------------------------

    def lay_base(self) -> None:
        """The base image's accounts, directories and Python environment, with what it already holds."""
        etc = self.rootfs.path("/etc")
        (etc / "passwd").write_text("\n".join(self.base.passwd) + "\n")
        (etc / "group").write_text("\n".join(self.base.group) + "\n")
        (etc / "shadow").write_text("".join(f"{line.split(':')[0]}:*:19000:0:99999:7:::\n" for line in self.base.passwd))
        (etc / "gshadow").write_text("".join(f"{line.split(':')[0]}:*::\n" for line in self.base.group))
        for directory in self.base.directories:
            path = self.rootfs.path(directory.path)
            path.mkdir(parents=True, exist_ok=True)
            shutil.chown(path, directory.uid, directory.gid)
            path.chmod(directory.mode)
        python = python_env.interpreter(self.base.python)
        python_env.exposed(self.rootfs.root, [python])
        uid, gid = self.base.python_env_owner
        owner = accounts.Identity("base", uid, gid, (gid,), "/")
        made = self.rootfs.run([str(python), "-m", "venv", "--without-pip", self.base.python_env], owner,
                               {"PATH": self.base.env["PATH"]}, "/")
        if made.returncode:
            raise StepFailed(f"the base's Python environment: {made.stderr.strip()}")
        self._provide([*python_env.ALWAYS, *self.base.preinstalled])

    def _provide(self, asked: list[str]) -> None:
        """Put what pip is asked for (and what it needs) in the emulated index, readable by every user."""
        dists = python_env.closure(asked, self.project, python_env.wheel_requirements(self.wheel))
        python_env.exposed(self.rootfs.root, [Path(str(dist.locate_file(""))) for dist in dists.values()])
        python_env.populate(self.rootfs.root, self.base.python_env, self.base.python_env_owner, self.base.python, dists)

    # ----- instructions --------------------------------------------------------------------------------------

    def values(self) -> dict[str, str]:
        """What the instructions that expand see: the ARGs in scope, then ENV (which wins)."""
        return {**self.stage.args, **self.image.env}

    def identity(self) -> accounts.Identity:
        try:
            return accounts.identity(self.image.user, self.rootfs.read("/etc/passwd"), self.rootfs.read("/etc/group"))
        except LookupError as error:
            raise StepFailed(str(error)) from None

    def apply(self, instruction: Instruction) -> dict[str, Any]:
        """Carry out one instruction; what a RUN did (its user, exit status and output), else nothing."""
        return getattr(self, f"do_{instruction.op.lower()}")(instruction) or {}

    def do_arg(self, instruction: Instruction) -> None:
        self.stage.declare(instruction.text)

    def do_env(self, instruction: Instruction) -> None:
        self.image.env.update(assignments(instruction.text, self.values()))

    def do_label(self, instruction: Instruction) -> None:
        """Metadata only."""

    def do_expose(self, instruction: Instruction) -> None:
        self.image.exposed += words(instruction.text, self.values())

    def do_user(self, instruction: Instruction) -> None:
        self.image.user = expand(instruction.text, self.values())

    def do_cmd(self, instruction: Instruction) -> None:
        self.image.cmd = instruction.argv()

    def do_entrypoint(self, instruction: Instruction) -> None:
        """A new ENTRYPOINT resets the CMD the base image had (a later CMD sets it again)."""
        self.image.entrypoint = instruction.argv()
        self.image.cmd = []

    def do_workdir(self, instruction: Instruction) -> None:
        workdir = str(PurePosixPath(self.image.workdir, expand(instruction.text, self.values())))
        identity = self.identity()
        self._make_dirs(workdir, identity.uid, identity.gid)
        self.image.workdir = workdir

    def _make_dirs(self, image_path: str, uid: int, gid: int) -> None:
        missing = []
        path = PurePosixPath(image_path)
        while not self.rootfs.path(str(path)).exists():
            missing.append(path)
            path = path.parent
        for directory in reversed(missing):
            inside = self.rootfs.path(str(directory))
            inside.mkdir(mode=0o755)
            shutil.chown(inside, uid, gid)

    def _source(self, name: str) -> Path:
        if any(char in name for char in "*?["):
            raise DockerfileError(f"COPY {name}: wildcards are not emulated")
        for context in self.contexts:
            if (context / name).exists():
                return context / name
        raise StepFailed(f"COPY {name}: not found in the build context")

    def do_copy(self, instruction: Instruction) -> None:
        values = self.values()
        *sources, dest = words(instruction.text, values)
        passwd, group = self.rootfs.read("/etc/passwd"), self.rootfs.read("/etc/group")
        try:
            uid, gid = accounts.owner(expand(instruction.flags["chown"], values), passwd, group) \
                if "chown" in instruction.flags else (0, 0)
        except LookupError as error:
            raise StepFailed(str(error)) from None
        target = str(PurePosixPath(self.image.workdir, dest))
        into_dir = dest.endswith("/") or len(sources) > 1 or self._source(sources[0]).is_dir()
        self._make_dirs(target if into_dir else str(PurePosixPath(target).parent), uid, gid)
        for name in sources:
            source = self._source(name)
            copied = self.rootfs.path(target) / source.name if into_dir and source.is_file() else self.rootfs.path(target)
            self._copy(source, copied, uid, gid, instruction.flags.get("chmod"))

    def _copy(self, source: Path, dest: Path, uid: int, gid: int, chmod: str | None) -> None:
        if source.is_dir():
            if not dest.exists():
                dest.mkdir()
                shutil.chown(dest, uid, gid)
            for child in source.iterdir():
                self._copy(child, dest / child.name, uid, gid, chmod)
            return
        shutil.copy2(source, dest)
        shutil.chown(dest, uid, gid)
        if chmod:
            dest.chmod(int(chmod, 8))

    def do_run(self, instruction: Instruction) -> dict[str, Any]:
        values = self.values()
        if instruction.exec_form() is None:
            asked = [r for part in shell_commands(instruction.text) for r in pip_requirements(words(part, values))]
            if asked:
                self._provide([self._requirement(r) for r in asked])
        identity = self.identity()
        env = {"PATH": DEFAULT_PATH, **self.stage.args, **self.image.env, **python_env.INDEX_ENV}
        env.setdefault("HOME", identity.home)
        done = self.rootfs.run(instruction.argv(), identity, env, self.image.workdir)
        result = {"user": str(identity), "exit": done.returncode, "output": (done.stdout + done.stderr)[-OUTPUT_TAIL:]}
        if done.returncode:
            last = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
            raise StepFailed(f"`{instruction}` exited {done.returncode} as {identity}: {last[0]}", result)
        return result

    def _requirement(self, asked: str) -> str:
        """The wheel's path on a pip line is the project with its extras; anything else is a requirement."""
        path, _, extras = asked.partition("[")
        if PurePosixPath(path).name == self.wheel.name:
            return f"{self.project}[{extras}" if extras else self.project
        try:
            Requirement(asked)
        except InvalidRequirement:
            raise DockerfileError(f"pip install {asked}: only requirements and the project's wheel are emulated "
                                  "(a source directory would be built with setuptools from the index)") from None
        return asked

    # ----- the finished image ------------------------------------------------------------------------------------

    def run_in_image(self, argv: list[str]) -> dict[str, Any]:
        """A command run in the finished image as `docker run` would: its USER, WORKDIR and ENV, nothing else."""
        identity = self.identity()
        env = {"PATH": DEFAULT_PATH, **self.image.env}
        env.setdefault("HOME", identity.home)
        if COMMAND in argv:
            command = self.image.cmd or []
            leading = next((i for i, word in enumerate(command) if word.startswith("-")), len(command))
            at = argv.index(COMMAND)
            argv = [*argv[:at], *command[:leading], *argv[at + 1:]]
        done = self.rootfs.run(argv, identity, env, self.image.workdir)
        return {"argv": argv, "user": str(identity), "uid": identity.uid, "exit": done.returncode,
                "stdout": done.stdout[-OUTPUT_TAIL:], "stderr": done.stderr[-OUTPUT_TAIL:]}

    def configuration(self) -> dict[str, Any]:
        return {"base": self.base.reference, "user": self.image.user, "workdir": self.image.workdir,
                "env": self.image.env, "cmd": self.image.cmd, "entrypoint": self.image.entrypoint,
                "exposed": self.image.exposed}


def build(request: dict[str, Any]) -> dict[str, Any]:
    """Build, then run the checks; the report of both."""
    report: dict[str, Any] = {"steps": [], "checks": [], "error": None}
    step: dict[str, Any] = {}
    try:
        stage = stage_of(read(Path(request["dockerfile"])), request.get("build_args", {}))
        base = base_image(stage.base)
        rootfs = Rootfs(Path(request["scratch"])).create()
        builder = Builder(rootfs, stage, base, [Path(p) for p in request["context"]], Path(request["wheel"]),
                          request["project"])
        builder.lay_base()
        for instruction in stage.instructions:
            step = {"line": instruction.line, "instruction": str(instruction)}
            report["steps"].append(step)
            step.update(builder.apply(instruction))
        report["image"] = builder.configuration()
        report["checks"] = [builder.run_in_image(argv) for argv in request.get("checks", [])]
    except StepFailed as error:
        step.update(error.done)
        report["error"] = str(error)
    except (DockerfileError, LookupError) as error:
        report["error"] = str(error)
    return report


if __name__ == "__main__":
    print(json.dumps(build(json.loads(Path(sys.argv[1]).read_text()))))
