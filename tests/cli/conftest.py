"""Fixtures for the CLI tests: the real ``ai-memory`` process, git repositories, dead ports.

The CLI runs as a subprocess (``python -m aimemory_site.cli.main``), so exit codes, stdout
and stderr are what a shell or an agent harness sees.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.servers import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
# Generous: a subprocess on a loaded CI machine; a hung CLI still fails the test.
CLI_TIMEOUT_SECONDS = 60

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]


def _cli_environment(server_url: str, extra: dict[str, str]) -> dict[str, str]:
    """The caller's environment minus anything that steers ai-memory or names a harness."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AI_MEMORY_", "CLAUDE", "CODEX", "GIT_"))
    }
    env.update(
        {
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
            "AI_MEMORY_SERVER_URL": server_url,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
    )
    env.update(extra)
    return env


@pytest.fixture
def unreachable_url() -> str:
    """A loopback URL on a port that was free a moment ago, so nothing listens on it."""
    port = free_port()
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def make_cli(tmp_path: Path) -> Callable[[str], RunCli]:
    """``make_cli(server_url)`` returns ``run(*args, cwd=, stdin=, env=)`` for that server."""

    def for_server(server_url: str) -> RunCli:
        def run(
            *args: str,
            cwd: Path = tmp_path,
            stdin: str = "",
            env: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "aimemory_site.cli.main", *args],
                cwd=cwd,
                input=stdin,
                capture_output=True,
                text=True,
                env=_cli_environment(
                    server_url,
                    {
                        "GIT_CEILING_DIRECTORIES": str(tmp_path),
                        # The hooks' state (announced sessions, waiters) is the test's own.
                        "XDG_STATE_HOME": str(tmp_path / "state"),
                        **(env or {}),
                    },
                ),
                timeout=CLI_TIMEOUT_SECONDS,
                check=False,
            )

        return run

    return for_server


SpawnCli = Callable[..., "subprocess.Popen[str]"]


@pytest.fixture
def spawn_cli(tmp_path: Path) -> Callable[[str], SpawnCli]:
    """As ``make_cli``, but ``start(*args, cwd=, stdin=, env=)`` returns the running
    process (stdin written and closed), for a command that waits."""

    def for_server(server_url: str) -> SpawnCli:
        def start(
            *args: str,
            cwd: Path = tmp_path,
            stdin: str = "",
            env: dict[str, str] | None = None,
        ) -> subprocess.Popen[str]:
            process = subprocess.Popen(
                [sys.executable, "-m", "aimemory_site.cli.main", *args],
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_cli_environment(
                    server_url,
                    {
                        "GIT_CEILING_DIRECTORIES": str(tmp_path),
                        # The hooks' state (announced sessions, waiters) is the test's own.
                        "XDG_STATE_HOME": str(tmp_path / "state"),
                        **(env or {}),
                    },
                ),
            )
            assert process.stdin is not None
            process.stdin.write(stdin)
            process.stdin.close()
            # communicate() would flush the closed pipe: the input has been given.
            process.stdin = None
            return process

        return start

    return for_server


@pytest.fixture
def offline_cli(make_cli: Callable[[str], RunCli], unreachable_url: str) -> RunCli:
    """The CLI pointed at a server that is not there."""
    return make_cli(unreachable_url)


def _git(cwd: Path, *args: str) -> str:
    result = subprocess.run(
        [
            "git",
            "-c",
            "user.name=ai-memory tests",
            "-c",
            "user.email=tests@example.invalid",
            "-c",
            "init.defaultBranch=main",
            *args,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    return result.stdout


@pytest.fixture
def git() -> Callable[..., str]:
    """``git(cwd, *args)``: run git with a throwaway identity; return its stdout."""
    return _git


@pytest.fixture
def make_repo(tmp_path: Path) -> MakeRepo:
    """``make_repo("project-a")`` makes a git repository ``tmp_path/project-a``."""

    def make(name: str) -> Path:
        path = tmp_path / name
        path.mkdir()
        _git(path, "init", "-q")
        return path

    return make


@pytest.fixture(autouse=True)
def _git_stays_inside_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """git never finds a repository above the test's directory (say, a checkout in /tmp)."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
