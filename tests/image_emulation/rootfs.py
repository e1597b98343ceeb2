"""The throwaway root an image is built in, and processes run in it as one of its users.

Must run as root inside a private mount namespace (`unshare --mount --propagation private`), which the
test starts: every mount below disappears with it. The tree is this machine's own root seen through an
overlay whose writable layer is a tmpfs, so the build may write anywhere (create accounts, install into
/usr/local) and nothing reaches the machine; `/tmp` of the tree is a fresh, empty, sticky (1777) directory as
in every base image; `/proc` and `/dev` are mounted for the programs that need them. A RUN is `chroot` into
the tree, the working directory, umask 022 (the builder's), the image user's groups, gid and uid, and no
environment but the one given: what a container process gets.

What is not the image's: the programs of the tree (`/bin/sh`, `rm`, `useradd`, the C library) are this
machine's, and so is the Python interpreter that plays the base image's (see `python_env.py`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.image_emulation.accounts import Identity


def mount(*argv: str) -> None:
    subprocess.run(["mount", *argv], check=True, capture_output=True, text=True)


class Rootfs:
    """An image's file system during one build, under `scratch` (an empty directory)."""

    def __init__(self, scratch: Path) -> None:
        self.layers = scratch / "layers"
        self.root = scratch / "root"

    def create(self) -> Rootfs:
        self.layers.mkdir()
        self.root.mkdir()
        mount("-t", "tmpfs", "-o", "mode=0755", "image-layers", str(self.layers))
        for name in ("upper", "work", "tmp"):
            (self.layers / name).mkdir()
        os.chmod(self.layers / "tmp", 0o1777)
        mount("-t", "overlay", "image", "-o",
              f"lowerdir=/,upperdir={self.layers / 'upper'},workdir={self.layers / 'work'}", str(self.root))
        mount("--bind", str(self.layers / "tmp"), str(self.root / "tmp"))
        mount("-t", "proc", "proc", str(self.root / "proc"))
        mount("--rbind", "/dev", str(self.root / "dev"))
        return self

    def path(self, image_path: str) -> Path:
        """Where a path of the image is, seen from outside the tree."""
        return self.root / image_path.lstrip("/")

    def read(self, image_path: str) -> str:
        return self.path(image_path).read_text()

    def run(self, argv: Sequence[str], identity: Identity, env: Mapping[str, str], cwd: str,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run a program of the tree as `identity`, in `cwd`, with exactly `env`."""
        root = str(self.root)

        def enter() -> None:
            os.chroot(root)
            os.chdir(cwd)
            os.umask(0o022)
            os.setgroups(list(identity.groups))
            os.setgid(identity.gid)
            os.setuid(identity.uid)

        return subprocess.run(list(argv), env=dict(env), preexec_fn=enter, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL, check=False)
