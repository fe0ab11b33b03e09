"""``ai-memory manage`` where a new user first runs it: in a repository with no server
yet, on a database that is missing or not migrated, and for its help."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.cli.conftest import CLI_TIMEOUT_SECONDS, REPO_ROOT

pytestmark = pytest.mark.slow


def _manage(cwd: Path, *arguments: str, **environ: str) -> subprocess.CompletedProcess[str]:
    """``ai-memory manage ARGUMENTS`` in ``cwd``, with nothing of the caller's ai-memory
    environment (no data dir, no database URL) unless given."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("AI_MEMORY_") and key not in {"DATABASE_URL", "SECRET_KEY"}
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    env.update(environ)
    return subprocess.run(
        [sys.executable, "-m", "aimemory_site.cli.main", "manage", *arguments],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_SECONDS,
        check=False,
    )


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    return lines[0]


def test_a_command_in_a_directory_without_a_server_says_so_and_creates_nothing(
    tmp_path: Path,
) -> None:
    created = _manage(tmp_path, "create_user", "alice")

    assert created.returncode == 1
    line = _one_line(created.stderr)
    assert str(tmp_path / "var" / "ai-memory.sqlite3") in line
    assert "ai-memory serve" in line and "ai-memory manage migrate" in line
    assert created.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no var/, no SQLite file left behind


def test_a_command_on_an_unmigrated_database_says_so(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    sqlite3.connect(data_dir / "ai-memory.sqlite3").close()  # an empty file, no tables

    created = _manage(tmp_path, "create_user", "alice", AI_MEMORY_DATA_DIR=str(data_dir))

    assert created.returncode == 1
    line = _one_line(created.stderr)
    assert "not migrated" in line
    assert str(data_dir / "ai-memory.sqlite3") in line
    assert "ai-memory manage migrate" in line


def test_migrate_creates_the_database_the_other_commands_then_use(tmp_path: Path) -> None:
    migrated = _manage(tmp_path, "migrate", "--verbosity", "0")
    created = _manage(tmp_path, "create_user", "alice")

    assert migrated.returncode == 0, migrated.stderr
    assert (tmp_path / "var" / "ai-memory.sqlite3").is_file()
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "created user alice"


def test_a_data_dir_without_the_servers_key_is_refused(tmp_path: Path) -> None:
    """Token keys are hashed under the secret key kept in the data dir: a token issued
    with another data dir's (a new) key would never authenticate at the server."""
    database = tmp_path / "elsewhere.sqlite3"
    migrated = _manage(
        tmp_path,
        "migrate",
        "--verbosity",
        "0",
        AI_MEMORY_DATA_DIR=str(tmp_path / "server-data"),
        DATABASE_URL=f"sqlite:///{database}",
    )
    assert migrated.returncode == 0, migrated.stderr

    issued = _manage(
        tmp_path / "server-data",
        "issue_token",
        "alice",
        "--create-user",
        AI_MEMORY_DATA_DIR=str(tmp_path / "another-data"),
        DATABASE_URL=f"sqlite:///{database}",
    )

    assert issued.returncode == 1
    line = _one_line(issued.stderr)
    assert str(tmp_path / "another-data") in line and "AI_MEMORY_DATA_DIR" in line
    assert issued.stdout == ""
    assert not (tmp_path / "another-data").exists()


@pytest.mark.skipif(
    not os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="needs the PostgreSQL server of DATABASE_URL (the suite's PostgreSQL run)",
)
def test_a_missing_postgresql_database_is_one_line_naming_createdb(tmp_path: Path) -> None:
    server = urlsplit(os.environ["DATABASE_URL"])
    name = f"aimemory_missing_{uuid.uuid4().hex[:12]}"
    missing_url = urlunsplit(server._replace(path=f"/{name}"))

    created = _manage(tmp_path, "create_user", "alice", DATABASE_URL=missing_url)
    created_nothing = list(tmp_path.iterdir()) == []
    migrated = _manage(tmp_path, "migrate", DATABASE_URL=missing_url)  # it may make var/

    assert created_nothing
    for refused in (created, migrated):
        assert refused.returncode == 1
        line = _one_line(refused.stderr)
        assert f"createdb {name}" in line
        assert f"{server.hostname}:{server.port or 5432}" in line


def test_help_lists_the_commands_as_manage_alone_does(tmp_path: Path) -> None:
    alone = _manage(tmp_path)
    helped = _manage(tmp_path, "--help")

    assert alone.returncode == helped.returncode == 0
    for output in (alone.stdout, helped.stdout):
        assert "ai-memory manage help <subcommand>" in output
        for command in ("create_user", "issue_token", "grant", "project_mode", "migrate"):
            assert f"    {command}\n" in output
    assert helped.stdout == alone.stdout
    assert list(tmp_path.iterdir()) == []  # help reads no data and keeps none


def test_a_commands_help_names_ai_memory_manage_not_manage_py(tmp_path: Path) -> None:
    helped = _manage(tmp_path, "help", "create_user")

    assert helped.returncode == 0
    assert "usage: ai-memory manage create_user" in helped.stdout
    assert "ai-memory manage create_user alice" in " ".join(helped.stdout.split())
    assert "manage.py" not in helped.stdout


def test_no_banner_is_printed_with_every_command(tmp_path: Path) -> None:
    migrated = _manage(tmp_path, "migrate", "--verbosity", "0")
    created = _manage(tmp_path, "create_user", "alice")

    for ran in (migrated, created):
        assert ran.returncode == 0, ran.stderr
        assert "AXES" not in ran.stdout + ran.stderr
    assert migrated.stderr == created.stderr == ""
