"""What the base images the project builds FROM look like to the instructions that follow: their accounts, the
directories those own, their environment, user and working directory, and where their Python installs.

Read from the images' own Dockerfiles (facts, not code):

- `python:3.11-slim`: docker-library/python `3.11/slim-bookworm/Dockerfile`: FROM debian:bookworm-slim (whose
  PATH is `/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`), `ENV PATH /usr/local/bin:$PATH`,
  `ENV LANG C.UTF-8`, Python built with `make install` into `/usr/local` (pip, setuptools and wheel installed
  there by root), no USER (root) and no WORKDIR (`/`).
- `apache/airflow:<version>-python3.11`: apache/airflow `Dockerfile`, the `main` stage: the user is added with
  `adduser airflow --uid 50000 --gid 0 --home /home/airflow` (ARG AIRFLOW_UID="50000", AIRFLOW_USER_HOME_DIR),
  then `usermod -g 0 airflow -G 0`; `chown -R airflow:0` and `chmod -R g+rw` of `/home/airflow` and
  `AIRFLOW_HOME=/opt/airflow` (with `dags` and `logs`); Airflow and its dependencies live in the virtual
  environment `/home/airflow/.local` (scripts/docker/create_prod_venv.sh: `python -m venv ~/.local`), owned by
  `airflow:0`; `ENV PATH="/root/bin:${AIRFLOW_USER_HOME_DIR}/.local/bin:/usr/python/bin:${PATH}"`,
  `VIRTUAL_ENV="${AIRFLOW_USER_HOME_DIR}/.local"`, `PIP_CACHE_DIR=/tmp/.cache/pip`, `AIRFLOW__CORE__LOAD_EXAMPLES`
  "false"; `WORKDIR ${AIRFLOW_HOME}`; `USER ${AIRFLOW_UID}`; `ENTRYPOINT ["/usr/bin/dumb-init", "--",
  "/entrypoint"]`, `CMD []`. (`CMD ["python3"]` for python:3.11-slim.)

What is not played: the images' system packages (the emulated tree is this machine's, see `rootfs.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# debian:bookworm-slim's PATH, also the one Docker gives a Linux container that sets none
DEBIAN_PATH = DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# debian:bookworm-slim's accounts that matter here (root and nobody); an image's own are added to them.
DEBIAN_PASSWD = ["root:x:0:0:root:/root:/bin/bash", "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"]
DEBIAN_GROUP = ["root:x:0:", "users:x:100:", "nogroup:x:65534:"]


@dataclass(frozen=True)
class Directory:
    path: str
    uid: int
    gid: int
    mode: int


@dataclass(frozen=True)
class BaseImage:
    reference: str
    python: str  # major.minor of the image's Python
    python_env: str  # the prefix `pip` installs into (a virtual environment's, or the interpreter's)
    python_env_owner: tuple[int, int]
    user: str
    workdir: str
    env: dict[str, str]
    passwd: tuple[str, ...] = tuple(DEBIAN_PASSWD)
    group: tuple[str, ...] = tuple(DEBIAN_GROUP)
    directories: tuple[Directory, ...] = ()
    preinstalled: tuple[str, ...] = ()  # requirements the image already holds
    cmd: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] = ()


def python_slim(reference: str, python: str) -> BaseImage:
    return BaseImage(
        reference=reference, python=python, python_env="/usr/local", python_env_owner=(0, 0), user="root",
        workdir="/", env={"PATH": f"/usr/local/bin:{DEBIAN_PATH}", "LANG": "C.UTF-8"}, cmd=("python3",),
    )


AIRFLOW_UID = 50000
AIRFLOW_HOME = "/opt/airflow"
AIRFLOW_USER_HOME = "/home/airflow"


def apache_airflow(reference: str, version: str, python: str) -> BaseImage:
    group_rw = 0o775  # adduser's 0755 home, then `chmod -R g+rw`
    return BaseImage(
        reference=reference, python=python, python_env=f"{AIRFLOW_USER_HOME}/.local",
        python_env_owner=(AIRFLOW_UID, 0), user=str(AIRFLOW_UID), workdir=AIRFLOW_HOME,
        env={
            "PATH": f"/root/bin:{AIRFLOW_USER_HOME}/.local/bin:/usr/python/bin:{DEBIAN_PATH}",
            "VIRTUAL_ENV": f"{AIRFLOW_USER_HOME}/.local", "AIRFLOW_HOME": AIRFLOW_HOME, "AIRFLOW_UID": str(AIRFLOW_UID),
            "AIRFLOW_USER_HOME_DIR": AIRFLOW_USER_HOME, "AIRFLOW_VERSION": version, "PIP_CACHE_DIR": "/tmp/.cache/pip",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "false", "LANG": "C.UTF-8",
        },
        passwd=(*DEBIAN_PASSWD, f"airflow:x:{AIRFLOW_UID}:0:First Last,RoomNumber,WorkPhone,HomePhone:{AIRFLOW_USER_HOME}:/bin/bash"),
        group=("root:x:0:airflow", *DEBIAN_GROUP[1:]),
        directories=(
            Directory(AIRFLOW_USER_HOME, AIRFLOW_UID, 0, group_rw), Directory(AIRFLOW_HOME, AIRFLOW_UID, 0, group_rw),
            Directory(f"{AIRFLOW_HOME}/dags", AIRFLOW_UID, 0, group_rw), Directory(f"{AIRFLOW_HOME}/logs", AIRFLOW_UID, 0, group_rw),
        ),
        preinstalled=(f"apache-airflow=={version}",),
        entrypoint=("/usr/bin/dumb-init", "--", "/entrypoint"),
    )


def base_image(reference: str) -> BaseImage:
    """The facts of a base image the project builds FROM; another one is refused, naming what is known."""
    slim = re.fullmatch(r"python:(\d+\.\d+)-slim(?:-bookworm)?", reference)
    if slim:
        return python_slim(reference, slim[1])
    airflow = re.fullmatch(r"apache/airflow:(\d+\.\d+\.\d+)-python(\d+\.\d+)", reference)
    if airflow:
        return apache_airflow(reference, airflow[1], airflow[2])
    raise LookupError(f"FROM {reference}: the emulation knows python:<X.Y>-slim and apache/airflow:<version>-python<X.Y>")
