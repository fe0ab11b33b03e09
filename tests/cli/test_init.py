"""``ai-memory init``: the repository's marker, and agent configuration for this server."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aimemory_site.cli.init import ai_memory_command
from aimemory_site.cli.scope import resolve_scope

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]

SERVER_URL = "http://memory.example:9000"
SECRET = "aim_not-to-be-printed"
# Where git lives, and (on a usual system) no ai-memory.
SYSTEM_PATH = os.pathsep.join(["/usr/bin", "/bin"])


def fake_executable(directory: Path, name: str = "ai-memory") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    executable = directory / name
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    return executable


@pytest.fixture
def on_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH finds an ``ai-memory``."""
    fake_executable(tmp_path / "bin")
    return {"PATH": os.pathsep.join([str(tmp_path / "bin"), SYSTEM_PATH])}


def block_after(out: str, heading: str, end: str | None = None) -> str:
    """The indented configuration printed under ``heading`` (up to ``end``), unindented."""
    block = out.split(heading, 1)[1]
    if end is not None:
        block = block.split(end, 1)[0]
    return "\n".join(line.removeprefix("  ") for line in block.splitlines())


def codex_config(out: str) -> dict[str, object]:
    return tomllib.loads(block_after(out, "trust a new hook before it runs):\n", "== Kimi =="))


def kimi_config(out: str) -> dict[str, object]:
    return tomllib.loads(block_after(out, "~/.kimi-code/config.toml):\n", "and the MCP server"))


def test_init_writes_the_marker_at_the_repository_root(
    offline_cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("project-a")
    subdirectory = repo / "src"
    subdirectory.mkdir()

    result = offline_cli("init", cwd=subdirectory)

    marker = repo / ".ai-memory.toml"
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"Wrote {marker}: this repository is default/project-a."
    assert tomllib.loads(marker.read_text()) == {"workspace": "default", "project": "project-a"}
    assert resolve_scope(subdirectory, {}).decided_by_marker == ("workspace", "project")


def test_init_in_a_linked_worktree_writes_in_the_main_repository(
    offline_cli: RunCli, make_repo: MakeRepo, git: Callable[..., str], tmp_path: Path
) -> None:
    repo = make_repo("project-a")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    worktree = tmp_path / "feature-checkout"
    git(repo, "worktree", "add", "-q", str(worktree))

    result = offline_cli("init", "--workspace", "acme", cwd=worktree)

    assert result.returncode == 0, result.stderr
    assert (repo / ".ai-memory.toml").is_file()
    assert not (worktree / ".ai-memory.toml").exists()
    scope = resolve_scope(worktree, {})
    assert (scope.workspace, scope.project) == ("acme", "project-a")


def test_init_outside_git_writes_in_the_working_directory(
    offline_cli: RunCli, tmp_path: Path
) -> None:
    directory = tmp_path / "notes"
    directory.mkdir()

    result = offline_cli("init", "--project", "my-notes", cwd=directory)

    assert result.returncode == 0, result.stderr
    assert tomllib.loads((directory / ".ai-memory.toml").read_text())["project"] == "my-notes"


def test_init_keeps_an_existing_marker_unless_forced(
    offline_cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("project-a")
    marker = repo / ".ai-memory.toml"
    marker.write_text('workspace = "acme"\nproject = "billing"\n')

    kept = offline_cli("init", cwd=repo)
    kept_text = marker.read_text()
    forced = offline_cli("init", "--force", cwd=repo)

    assert kept.returncode == 0
    assert (
        kept.stdout.splitlines()[0] == f"Kept the existing {marker} (pass --force to overwrite it)."
    )
    assert kept_text == 'workspace = "acme"\nproject = "billing"\n'
    assert forced.returncode == 0
    assert tomllib.loads(marker.read_text())["project"] == "project-a"


def test_init_rejects_an_invalid_name_as_an_argument_error(
    offline_cli: RunCli, tmp_path: Path
) -> None:
    result = offline_cli("init", "--project", ".hidden", cwd=tmp_path)

    assert result.returncode == 2
    assert not (tmp_path / ".ai-memory.toml").exists()


def test_init_prints_claude_and_codex_configuration_with_the_bearer_by_name(
    make_cli: Callable[[str], RunCli], tmp_path: Path, on_path: dict[str, str]
) -> None:
    env = {"AI_MEMORY_AUTH_TOKEN": SECRET, **on_path}
    result = make_cli(SERVER_URL)("init", cwd=tmp_path, env=env)

    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert SECRET not in out
    assert (
        f"claude mcp add --scope user --transport http ai-memory {SERVER_URL}/mcp "
        '--header "Authorization: Bearer $AI_MEMORY_AUTH_TOKEN"'
    ) in out
    assert '"Authorization": "Bearer ${AI_MEMORY_AUTH_TOKEN}"' in out
    assert '"command": "ai-memory hook session-start"' in out
    assert "[mcp_servers.ai-memory]" in out
    assert f'url = "{SERVER_URL}/mcp"' in out
    assert 'bearer_token_env_var = "AI_MEMORY_AUTH_TOKEN"' in out
    assert 'command = "ai-memory hook session-start"' in out


def test_init_prints_the_user_scope_mcp_command_and_the_project_approval(
    make_cli: Callable[[str], RunCli], tmp_path: Path
) -> None:
    out = make_cli(SERVER_URL)("init", cwd=tmp_path).stdout

    assert f"  claude mcp add --scope user --transport http ai-memory {SERVER_URL}/mcp\n" in out
    assert "once per machine" not in out
    assert (
        "or for this repository only, in .mcp.json (a project's .mcp.json needs a one-time "
        "approval in claude, which asks when it next starts here):"
    ) in out


def test_init_without_a_token_configures_no_bearer(
    make_cli: Callable[[str], RunCli], tmp_path: Path
) -> None:
    result = make_cli(SERVER_URL)("init", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "Authorization" not in result.stdout
    assert "bearer_token_env_var" not in result.stdout
    assert "AI_MEMORY_AUTH_TOKEN is not set" in result.stdout


@pytest.mark.parametrize("with_token", [True, False])
def test_printed_codex_configuration_is_valid_toml_with_the_current_hooks_key(
    make_cli: Callable[[str], RunCli], tmp_path: Path, on_path: dict[str, str], with_token: bool
) -> None:
    env = {"AI_MEMORY_AUTH_TOKEN": SECRET, **on_path} if with_token else on_path
    out = make_cli(SERVER_URL)("init", cwd=tmp_path, env=env).stdout

    config: dict[str, Any] = codex_config(out)

    assert config["mcp_servers"]["ai-memory"]["url"] == f"{SERVER_URL}/mcp"
    assert config["features"] == {"hooks": True}
    assert "codex_hooks" not in out
    assert config["hooks"]["SessionStart"][0]["hooks"][0]["command"] == (
        "ai-memory hook session-start"
    )


def claude_settings(out: str) -> dict[str, Any]:
    block = block_after(out, "in .claude/settings.json:\n", "\n\n== Codex ==")
    settings: dict[str, Any] = json.loads(block)
    return settings


def test_init_prints_the_claude_stop_hook_that_wakes_an_idle_session(
    make_cli: Callable[[str], RunCli], tmp_path: Path, on_path: dict[str, str]
) -> None:
    out = make_cli(SERVER_URL)("init", cwd=tmp_path, env=on_path).stdout

    hooks = claude_settings(out)["hooks"]
    executable = "ai-memory"
    assert hooks["Stop"] == [
        {
            "hooks": [
                {
                    "type": "command",
                    "command": f"{executable} hook wait",
                    "asyncRewake": True,
                    "timeout": 3600,
                }
            ]
        }
    ]
    assert hooks["SessionStart"][0]["hooks"] == [
        {"type": "command", "command": f"{executable} hook session-start"}
    ]


def test_init_prints_the_kimi_user_prompt_hook(
    make_cli: Callable[[str], RunCli], tmp_path: Path, on_path: dict[str, str]
) -> None:
    out = make_cli(SERVER_URL)("init", cwd=tmp_path, env=on_path).stdout

    assert kimi_config(out) == {
        "hooks": [
            {
                "event": "UserPromptSubmit",
                "command": "ai-memory hook user-prompt --agent kimi",
                "timeout": 10,
            }
        ]
    }
    assert "~/.kimi/config.toml" in out


def test_init_names_ai_memory_by_its_absolute_path_when_it_is_not_on_path(
    make_cli: Callable[[str], RunCli], tmp_path: Path
) -> None:
    installed = Path(sys.executable).parent / "ai-memory"
    if not installed.is_file():
        pytest.skip("no ai-memory script beside this interpreter (package not installed)")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    path = os.pathsep.join([str(empty), SYSTEM_PATH])
    if shutil.which("ai-memory", path=path) is not None:
        pytest.skip("this system has an ai-memory in /usr/bin or /bin")

    result = make_cli(SERVER_URL)("init", cwd=tmp_path, env={"PATH": path})

    out = result.stdout
    absolute = shlex.quote(str(installed))
    assert result.returncode == 0, result.stderr
    assert f"ai-memory is not on PATH, so the hooks name it by its path: {absolute}" in out
    assert f'"command": "{absolute} hook session-start"' in out
    assert f'"command": "{absolute} hook wait"' in out
    codex: dict[str, Any] = codex_config(out)
    assert codex["hooks"]["SessionStart"][0]["hooks"][0]["command"] == (
        f"{absolute} hook session-start"
    )
    kimi: dict[str, Any] = kimi_config(out)
    assert kimi["hooks"][0]["command"] == f"{absolute} hook user-prompt --agent kimi"


def test_init_names_ai_memory_bare_when_path_finds_it(
    make_cli: Callable[[str], RunCli], tmp_path: Path, on_path: dict[str, str]
) -> None:
    out = make_cli(SERVER_URL)("init", cwd=tmp_path, env=on_path).stdout

    assert "not on PATH" not in out
    assert '"command": "ai-memory hook session-start"' in out


def test_the_running_script_is_preferred_to_the_interpreters_neighbour(tmp_path: Path) -> None:
    script = fake_executable(tmp_path / "pipx bin")
    beside_python = fake_executable(tmp_path / "venv" / "bin")
    python = str(beside_python.parent / "python")
    empty = str(tmp_path / "nowhere")

    from_argv = ai_memory_command(empty, [str(script), "init"], python)
    from_python = ai_memory_command(empty, ["/src/aimemory_site/cli/main.py"], python)
    nothing = ai_memory_command(empty, ["main.py"], str(tmp_path / "python"))

    assert from_argv == shlex.quote(str(script))
    assert from_argv.startswith("'")  # a path with a space stays one shell word
    assert from_python == str(beside_python)
    assert nothing == "ai-memory"
