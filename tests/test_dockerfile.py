"""The image emulation's reading of Dockerfiles and of an image's accounts, without building anything (these run
in every `make test`; the builds themselves are `make test-images`, tests/test_images.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.image_emulation import accounts, bases
from tests.image_emulation.dockerfile import (
    DockerfileError,
    assignments,
    expand,
    parse,
    pip_requirements,
    read,
    shell_commands,
    stage_of,
    words,
)

ROOT = Path(__file__).resolve().parents[1]

PASSWD = "root:x:0:0:root:/root:/bin/bash\nairflow:x:50000:0::/home/airflow:/bin/bash\nconnector:x:1000:1000::/home/connector:/bin/sh\n"
GROUP = "root:x:0:airflow\nconnector:x:1000:\nusers:x:100:connector\n"


def test_continuations_join_and_comment_lines_inside_them_are_dropped() -> None:
    (run,) = parse("RUN pip install a \\\n# a note\n    && rm b\n")
    assert run.op == "RUN" and run.text == "pip install a && rm b" and run.line == 1
    assert run.argv() == ["/bin/sh", "-c", "pip install a && rm b"]


def test_the_exec_form_is_run_as_written() -> None:
    (cmd,) = parse('CMD ["c0", "--port", "8000"]')
    assert cmd.argv() == ["c0", "--port", "8000"]


def test_an_instruction_or_flag_the_emulation_does_not_do_is_refused_with_its_line() -> None:
    with pytest.raises(DockerfileError, match="line 2: HEALTHCHECK"):
        parse("FROM python:3.11-slim\nHEALTHCHECK CMD true\n")
    with pytest.raises(DockerfileError, match=r"line 2: `COPY --from`"):
        parse("FROM python:3.11-slim\nCOPY --from=build /a /b\n")


@pytest.mark.parametrize(("text", "expected"), [
    ("${A}", "1"), ("$A/x", "1/x"), ("${MISSING:-d}", "d"), ("${A:-d}", "1"), ("${A:+set}", "set"),
    ("${MISSING:+set}", ""), ("'$A'", "$A"), ('"$A b"', "1 b"), ("a\\$A", "a$A"),
])
def test_variables_expand_as_the_builder_expands_them(text: str, expected: str) -> None:
    assert expand(text, {"A": "1"}) == expected


def test_words_keep_quoted_blanks() -> None:
    assert words('pip install "a b" c', {}) == ["pip", "install", "a b", "c"]


def test_env_takes_both_forms() -> None:
    assert assignments('A=1 B="two words"', {}) == {"A": "1", "B": "two words"}
    assert assignments("A two words", {}) == {"A": "two words"}


def test_an_arg_before_from_is_seen_in_the_stage_only_once_declared_again() -> None:
    stage = stage_of(parse("ARG V=1\nARG W=2\nFROM python:3.${V}-slim\nARG V\n"), {"W": "9"})
    assert stage.base == "python:3.1-slim"
    assert stage.args == {}
    stage.declare("V")
    assert stage.args == {"V": "1"}
    stage.declare("X=${V}")
    assert stage.args["X"] == "1"


def test_a_build_arg_replaces_a_default() -> None:
    stage = stage_of(parse("ARG V=1\nFROM python:3.${V}-slim\nARG V\nARG W=a\n"), {"V": "11", "W": "b"})
    assert stage.base == "python:3.11-slim"
    stage.declare("V")
    stage.declare("W=a")
    assert stage.args == {"V": "11", "W": "b"}


def test_every_dockerfile_of_the_project_is_read_and_its_base_known() -> None:
    for path in sorted((ROOT / "plugins").rglob("Dockerfile")):
        stage = stage_of(read(path), {})
        assert bases.base_image(stage.base).python == "3.11", path


def test_an_unknown_base_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(LookupError, match="python:<X.Y>-slim and apache/airflow"):
        bases.base_image("ubuntu:24.04")


@pytest.mark.parametrize(("spec", "expected"), [
    ("airflow", accounts.Identity("airflow", 50000, 0, (0,), "/home/airflow")),
    ("50000", accounts.Identity("airflow", 50000, 0, (0,), "/home/airflow")),
    ("connector", accounts.Identity("connector", 1000, 1000, (1000, 100), "/home/connector")),
    ("connector:root", accounts.Identity("connector", 1000, 0, (0,), "/home/connector")),
    ("1234", accounts.Identity("1234", 1234, 0, (0,), "/")),
])
def test_user_means_what_the_images_accounts_say(spec: str, expected: accounts.Identity) -> None:
    assert accounts.identity(spec, PASSWD, GROUP) == expected


def test_a_user_name_the_image_lacks_fails_as_docker_says() -> None:
    with pytest.raises(LookupError, match="unable to find user nobody2: no matching entries in passwd file"):
        accounts.identity("nobody2", PASSWD, GROUP)


def test_chown_without_a_group_uses_the_uid_as_the_gid() -> None:
    assert accounts.owner("airflow:0", PASSWD, GROUP) == (50000, 0)
    assert accounts.owner("airflow", PASSWD, GROUP) == (50000, 50000)
    assert accounts.owner("7:root", PASSWD, GROUP) == (7, 0)


def test_the_pip_commands_of_a_run_line_are_found() -> None:
    line = 'pip install --no-cache-dir "apache-airflow==3.3.2" "/h/w.whl[airflow]" && rm "/h/w.whl"'
    assert [pip_requirements(words(part, {})) for part in shell_commands(line)] == [
        ["apache-airflow==3.3.2", "/h/w.whl[airflow]"], []]
    assert pip_requirements(["python", "-m", "pip", "install", "a"]) == ["a"]
    with pytest.raises(DockerfileError, match="--index-url"):
        pip_requirements(["pip", "install", "--index-url=https://x", "a"])
