"""Who a USER or a `COPY --chown` means, read from the image's own /etc/passwd and /etc/group.

The rules are the builder's and the runtime's: `USER name` must name an account of the image (else the build
fails "unable to find user"), a numeric `USER` may have none (then its group is 0 and its home `/`), the
supplementary groups are those of /etc/group that list the user, and an explicit `USER u:g` has only that
group (moby/sys/user `GetExecUser`). `COPY --chown=user` without a group uses the user's numeric id as the group
id too (docs.docker.com/reference/dockerfile, "COPY --chown").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int
    home: str


@dataclass(frozen=True)
class Group:
    name: str
    gid: int
    members: tuple[str, ...]


@dataclass(frozen=True)
class Identity:
    """What a process of the image runs as."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str

    def __str__(self) -> str:
        return f"{self.name} ({self.uid}:{self.gid})"


def accounts(passwd: str) -> list[Account]:
    found = []
    for line in passwd.splitlines():
        fields = line.split(":")
        if len(fields) >= 7:
            found.append(Account(fields[0], int(fields[2]), int(fields[3]), fields[5]))
    return found


def groups(group: str) -> list[Group]:
    found = []
    for line in group.splitlines():
        fields = line.split(":")
        if len(fields) >= 4:
            found.append(Group(fields[0], int(fields[2]), tuple(m for m in fields[3].split(",") if m)))
    return found


def _account(spec: str, passwd: list[Account]) -> Account | None:
    for account in passwd:
        if spec in (account.name, str(account.uid)):
            return account
    if spec.isdigit():
        return None
    raise LookupError(f"unable to find user {spec}: no matching entries in passwd file")


def _group_id(spec: str, group: list[Group]) -> int:
    if spec.isdigit():
        return int(spec)
    for entry in group:
        if entry.name == spec:
            return entry.gid
    raise LookupError(f"unable to find group {spec}: no matching entries in group file")


def identity(spec: str, passwd: str, group: str) -> Identity:
    """The process identity of `USER spec` (`name`, `uid`, `name:group`, `uid:gid`)."""
    user, _, group_spec = spec.partition(":")
    entries = groups(group)
    account = _account(user, accounts(passwd))
    name = account.name if account else user
    uid = account.uid if account else int(user)
    home = account.home if account else "/"
    if group_spec:
        gid = _group_id(group_spec, entries)
        return Identity(name, uid, gid, (gid,), home)
    gid = account.gid if account else 0
    extra = sorted({g.gid for g in entries if account and account.name in g.members} - {gid})
    return Identity(name, uid, gid, (gid, *extra), home)


def owner(spec: str, passwd: str, group: str) -> tuple[int, int]:
    """The (uid, gid) of `COPY --chown=spec`."""
    user, _, group_spec = spec.partition(":")
    account = _account(user, accounts(passwd))
    uid = account.uid if account else int(user)
    return uid, _group_id(group_spec, groups(group)) if group_spec else uid
