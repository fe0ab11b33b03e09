"""Node clients for the tests: Claude Code, Codex and the official MCP conformance suite.

All come from the npm registry into ``~/.cache/ai-memory-tests`` (npm's own cache too),
so reruns are fast. A test that needs one skips, naming the reason, only when it cannot
be fetched; once installed, any failure is a real failure.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CACHE_DIR = Path.home() / ".cache" / "ai-memory-tests"
# Pinned, like the Python tools: a new release must not change what the tests prove.
CLAUDE_CODE_VERSION = "2.1.332"
CLAUDE_CODE_PACKAGE = f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"
CLAUDE_CODE_PREFIX = CACHE_DIR / f"claude-code-{CLAUDE_CODE_VERSION}"
CODEX_VERSION = "0.171.0"
CODEX_PACKAGE = f"@openai/codex@{CODEX_VERSION}"
CODEX_PREFIX = CACHE_DIR / f"codex-{CODEX_VERSION}"
CONFORMANCE_PACKAGE = "@modelcontextprotocol/conformance@0.1.12"
# Generous: a cold npm fetch on a slow link. A warm cache answers in seconds.
FETCH_TIMEOUT_SECONDS = 600
RUN_TIMEOUT_SECONDS = 120


def node_environment(home: Path | None = None) -> dict[str, str]:
    """The environment for npm, npx, claude and codex: shared npm cache, no host agent settings.

    ``home`` replaces HOME so Claude Code reads and writes only a throwaway config.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CLAUDE", "ANTHROPIC", "CODEX", "OPENAI", "AI_MEMORY_", "MCP_"))
    }
    env["npm_config_cache"] = str(CACHE_DIR / "npm")
    env["npm_config_update_notifier"] = "false"
    # Claude Code: no auto-update, telemetry or other calls home during a test.
    env["DISABLE_AUTOUPDATER"] = "1"
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    if home is not None:
        env["HOME"] = str(home)
    return env


@contextmanager
def _install_lock() -> Iterator[None]:
    """Serialise installs: several test runs may share the cache at once."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    with (CACHE_DIR / "install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _require(program: str) -> str:
    found = shutil.which(program)
    if found is None:
        pytest.skip(f"{program} is not installed, so this Node MCP client cannot be fetched")
    return found


def _fetched_or_skip(command: list[str], what: str) -> None:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=node_environment(),
            timeout=FETCH_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm could not fetch {what} within {FETCH_TIMEOUT_SECONDS}s")
    if done.returncode != 0:
        pytest.skip(f"npm could not fetch {what}: {done.stderr.strip()[-400:]}")


def claude_code_cli() -> Path:
    """The ``claude`` executable, installed on first use."""
    npm = _require("npm")
    claude = CLAUDE_CODE_PREFIX / "node_modules" / ".bin" / "claude"
    with _install_lock():
        if not claude.exists():
            _fetched_or_skip(
                [npm, "install", "--prefix", str(CLAUDE_CODE_PREFIX), CLAUDE_CODE_PACKAGE],
                CLAUDE_CODE_PACKAGE,
            )
    return claude


def codex_cli() -> Path:
    """The ``codex`` executable, installed on first use.

    Give it ``CODEX_HOME`` (a throwaway directory) so it reads and writes no host config.
    """
    npm = _require("npm")
    codex = CODEX_PREFIX / "node_modules" / ".bin" / "codex"
    with _install_lock():
        if not codex.exists():
            _fetched_or_skip(
                [npm, "install", "--prefix", str(CODEX_PREFIX), CODEX_PACKAGE],
                CODEX_PACKAGE,
            )
    return codex


def conformance_command() -> list[str]:
    """``npx -y <conformance>``, its package fetched into the npm cache on first use."""
    npx = _require("npx")
    command = [npx, "-y", CONFORMANCE_PACKAGE]
    with _install_lock():
        _fetched_or_skip([*command, "--version"], CONFORMANCE_PACKAGE)
    return command


def run(
    command: list[str], *, cwd: Path, home: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a Node client to completion; a hang fails the test instead of stalling it."""
    return subprocess.run(
        command,
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**node_environment(home), **(env or {})},
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )
