"""``ai-memory init``: the repository's marker, and agent configuration for this server."""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from aimemory_site.cli.scope import resolve_scope

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]

SERVER_URL = "http://memory.example:9000"
SECRET = "aim_not-to-be-printed"


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
    make_cli: Callable[[str], RunCli], tmp_path: Path
) -> None:
    result = make_cli(SERVER_URL)("init", cwd=tmp_path, env={"AI_MEMORY_AUTH_TOKEN": SECRET})

    out = result.stdout
    assert result.returncode == 0, result.stderr
    assert SECRET not in out
    assert (
        f"claude mcp add --transport http ai-memory {SERVER_URL}/mcp "
        '--header "Authorization: Bearer $AI_MEMORY_AUTH_TOKEN"'
    ) in out
    assert '"Authorization": "Bearer ${AI_MEMORY_AUTH_TOKEN}"' in out
    assert '"command": "ai-memory hook session-start"' in out
    assert "[mcp_servers.ai-memory]" in out
    assert f'url = "{SERVER_URL}/mcp"' in out
    assert 'bearer_token_env_var = "AI_MEMORY_AUTH_TOKEN"' in out
    assert 'command = "ai-memory hook session-start"' in out


def test_init_without_a_token_configures_no_bearer(
    make_cli: Callable[[str], RunCli], tmp_path: Path
) -> None:
    result = make_cli(SERVER_URL)("init", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "Authorization" not in result.stdout
    assert "bearer_token_env_var" not in result.stdout
    assert "AI_MEMORY_AUTH_TOKEN is not set" in result.stdout


@pytest.mark.parametrize("with_token", [True, False])
def test_printed_codex_configuration_is_valid_toml(
    make_cli: Callable[[str], RunCli], tmp_path: Path, with_token: bool
) -> None:
    env = {"AI_MEMORY_AUTH_TOKEN": SECRET} if with_token else {}
    out = make_cli(SERVER_URL)("init", cwd=tmp_path, env=env).stdout

    codex_block = out.split("~/.codex/config.toml:\n", 1)[1]
    config = tomllib.loads("\n".join(line.removeprefix("  ") for line in codex_block.splitlines()))

    assert config["mcp_servers"]["ai-memory"]["url"] == f"{SERVER_URL}/mcp"
    assert config["hooks"]["SessionStart"][0]["hooks"][0]["command"] == (
        "ai-memory hook session-start"
    )
