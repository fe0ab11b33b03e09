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
from tests.mcp import node_clients
from tests.mcp.node_clients import claude_code_cli, codex_cli

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


def codex_mcp_config(out: str) -> dict[str, object]:
    return tomllib.loads(block_after(out, "in .codex/config.toml:\n", "== Gemini CLI =="))


def codex_hooks(out: str) -> dict[str, Any]:
    hooks: dict[str, Any] = json.loads(
        block_after(out, "in .codex/hooks.json:\n", "The MCP server, in .codex/config.toml")
    )["hooks"]
    return hooks


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


def test_init_prints_the_user_scope_mcp_command_and_the_project_approval(
    make_cli: Callable[[str], RunCli], tmp_path: Path
) -> None:
    out = make_cli(SERVER_URL)("init", cwd=tmp_path).stdout

    assert f"  claude mcp add --scope user --transport http ai-memory {SERVER_URL}/mcp\n" in out
    assert "once per machine" not in out
    assert (
        "The MCP server for this repository, in .mcp.json (a project's .mcp.json needs a "
        "one-time approval in claude, which asks when it next starts here):"
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
def test_printed_codex_configuration_is_what_codex_reads(
    make_cli: Callable[[str], RunCli], tmp_path: Path, on_path: dict[str, str], with_token: bool
) -> None:
    env = {"AI_MEMORY_AUTH_TOKEN": SECRET, **on_path} if with_token else on_path
    out = make_cli(SERVER_URL)("init", cwd=tmp_path, env=env).stdout

    config: dict[str, Any] = codex_mcp_config(out)
    hooks = codex_hooks(out)

    server = config["mcp_servers"]["ai-memory"]
    assert server["url"] == f"{SERVER_URL}/mcp"
    assert ("bearer_token_env_var" in server) is with_token
    assert "codex_hooks" not in out
    assert {
        event: [g["hooks"][0]["command"] for g in groups] for event, groups in hooks.items()
    } == {
        "SessionStart": ["ai-memory hook session-start"],
        "UserPromptSubmit": ["ai-memory hook user-prompt --agent codex"],
        "Stop": ["ai-memory hook wait --client codex"],
        "SessionEnd": ["ai-memory hook session-end"],
    }
    assert hooks["SessionEnd"][0]["hooks"][0]["timeout"] == 3  # Codex's most for SessionEnd


def claude_settings(out: str) -> dict[str, Any]:
    block = block_after(out, "in .claude/settings.json:\n", "The MCP server for this repository")
    settings: dict[str, Any] = json.loads(block)
    return settings


WAIT_HANDLER = {
    "type": "command",
    "command": "ai-memory hook wait",
    "asyncRewake": True,
    "timeout": 3600,
    "rewakeMessage": (
        "New mail came in while you were idle (a notice from ai-memory, not an error):"
    ),
    "rewakeSummary": "ai-memory: new mail",
}


def test_init_prints_the_claude_stop_hook_that_wakes_an_idle_session(
    make_cli: Callable[[str], RunCli], tmp_path: Path, on_path: dict[str, str]
) -> None:
    out = make_cli(SERVER_URL)("init", cwd=tmp_path, env=on_path).stdout

    hooks = claude_settings(out)["hooks"]
    assert hooks["Stop"] == [{"hooks": [WAIT_HANDLER]}]
    assert hooks["SessionStart"][0]["hooks"] == [
        {"type": "command", "command": "ai-memory hook session-start"}
    ]
    assert hooks["SessionEnd"] == [
        {"hooks": [{"type": "command", "command": "ai-memory hook session-end"}]}
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
    assert codex_hooks(out)["SessionStart"][0]["hooks"][0]["command"] == (
        f"{absolute} hook session-start"
    )
    written = json.loads((tmp_path / ".claude" / "settings.json").read_text())
    assert written["hooks"]["Stop"][0]["hooks"][0]["command"] == f"{absolute} hook wait"
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


# ---- the settings init writes ------------------------------------------------------------


def read_json(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_init_writes_each_clients_settings_at_the_repository_root(
    make_cli: Callable[[str], RunCli], make_repo: MakeRepo, on_path: dict[str, str]
) -> None:
    repo = make_repo("project-a")
    subdirectory = repo / "src"
    subdirectory.mkdir()
    env = {"AI_MEMORY_AUTH_TOKEN": SECRET, **on_path}

    result = make_cli(SERVER_URL)("init", cwd=subdirectory, env=env)

    assert result.returncode == 0, result.stderr
    claude = read_json(repo / ".claude" / "settings.json")
    assert claude["hooks"]["Stop"] == [{"hooks": [WAIT_HANDLER]}]
    assert claude["hooks"]["SessionStart"][0]["matcher"] == "startup|resume|clear|compact"
    assert read_json(repo / ".mcp.json") == {
        "mcpServers": {
            "ai-memory": {
                "type": "http",
                "url": f"{SERVER_URL}/mcp",
                "headers": {"Authorization": "Bearer ${AI_MEMORY_AUTH_TOKEN}"},
            }
        }
    }
    assert read_json(repo / ".codex" / "hooks.json")["hooks"] == codex_hooks(result.stdout)
    assert tomllib.loads((repo / ".codex" / "config.toml").read_text()) == {
        "mcp_servers": {
            "ai-memory": {
                "url": f"{SERVER_URL}/mcp",
                "bearer_token_env_var": "AI_MEMORY_AUTH_TOKEN",
            }
        }
    }
    gemini = read_json(repo / ".gemini" / "settings.json")
    assert gemini["mcpServers"] == {
        "ai-memory": {
            "httpUrl": f"{SERVER_URL}/mcp",
            "headers": {"Authorization": "Bearer ${AI_MEMORY_AUTH_TOKEN}"},
        }
    }
    assert {
        event: groups[0]["hooks"][0]["command"] for event, groups in gemini["hooks"].items()
    } == {
        "SessionStart": "ai-memory hook session-start --agent gemini",
        "BeforeAgent": "ai-memory hook user-prompt --agent gemini",
    }
    assert SECRET not in "".join(
        path.read_text() for path in repo.rglob("*") if path.is_file() and ".git" not in path.parts
    )
    for written in (".claude/settings.json", ".mcp.json", ".codex/hooks.json"):
        assert str(repo / written) in result.stdout


def test_rerunning_init_keeps_other_settings_and_adds_no_second_entry(
    offline_cli: RunCli, tmp_path: Path
) -> None:
    settings_path = tmp_path / ".claude" / "settings.json"
    settings_path.parent.mkdir()
    theirs = {"type": "command", "command": "notify-send 'turn done'"}
    old_ours = {"type": "command", "command": "/old/venv/bin/ai-memory hook wait"}
    settings_path.write_text(
        json.dumps(
            {
                "permissions": {"allow": ["Bash(make test)"]},
                "hooks": {"Stop": [{"hooks": [theirs, old_ours]}]},
            }
        )
    )
    codex_path = tmp_path / ".codex" / "config.toml"
    codex_path.parent.mkdir()
    codex_path.write_text(
        '# my models\nmodel = "o3"\n\n[mcp_servers.docs]\nurl = "https://d/mcp"\n'
    )

    first = offline_cli("init", cwd=tmp_path)
    after_first = {p: p.read_text() for p in (settings_path, codex_path)}
    second = offline_cli("init", cwd=tmp_path)

    assert first.returncode == second.returncode == 0
    assert {p: p.read_text() for p in (settings_path, codex_path)} == after_first
    assert f"Kept the Claude Code hooks in {settings_path}." in second.stdout
    settings = read_json(settings_path)
    assert settings["permissions"] == {"allow": ["Bash(make test)"]}
    stop_commands = [h["command"] for group in settings["hooks"]["Stop"] for h in group["hooks"]]
    assert stop_commands[0] == "notify-send 'turn done'"
    assert len(stop_commands) == 2 and stop_commands[1].endswith("ai-memory hook wait")
    assert len(settings["hooks"]["SessionStart"]) == 1
    codex_text = codex_path.read_text()
    assert codex_text.startswith('# my models\nmodel = "o3"\n')
    assert tomllib.loads(codex_text)["mcp_servers"]["docs"] == {"url": "https://d/mcp"}


@pytest.mark.parametrize(
    "relative",
    [".claude/settings.json", ".mcp.json", ".codex/config.toml", ".gemini/settings.json"],
)
def test_a_settings_file_that_does_not_parse_is_left_untouched_with_one_line(
    offline_cli: RunCli, tmp_path: Path, relative: str
) -> None:
    broken = tmp_path / relative
    broken.parent.mkdir(exist_ok=True)
    broken.write_text("{ not [settings\n")

    result = offline_cli("init", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert broken.read_text() == "{ not [settings\n"
    said = [line for line in result.stdout.splitlines() if str(broken) in line]
    assert len(said) == 1
    assert said[0].startswith(f"Left {broken} untouched: it is not valid ")
    # The other clients' files are still written.
    written = {".claude/settings.json", ".codex/hooks.json", ".gemini/settings.json"} - {relative}
    for other in written:
        assert (tmp_path / other).is_file()


# ---- the real clients read what init writes ----------------------------------------------


def run_init_for_clients(
    make_cli: Callable[[str], RunCli], repo: Path, on_path: dict[str, str]
) -> str:
    env = {"AI_MEMORY_AUTH_TOKEN": SECRET, **on_path}
    result = make_cli(SERVER_URL)("init", cwd=repo, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
@pytest.mark.agents
def test_claude_code_accepts_the_settings_init_writes(
    make_cli: Callable[[str], RunCli],
    make_repo: MakeRepo,
    tmp_path: Path,
    on_path: dict[str, str],
) -> None:
    claude = str(claude_code_cli())
    repo = make_repo("project-a")
    run_init_for_clients(make_cli, repo, on_path)
    home = tmp_path / "home"
    home.mkdir()

    # The agent's environment has the token the MCP entry names.
    env = {"AI_MEMORY_AUTH_TOKEN": SECRET}
    doctor = node_clients.run([claude, "doctor"], cwd=repo, home=home, env=env)
    listed = node_clients.run([claude, "mcp", "list"], cwd=repo, home=home, env=env)

    # doctor lists every settings entry claude refuses under "Invalid settings".
    assert doctor.returncode == 0, doctor.stderr
    assert "Invalid settings" not in doctor.stdout + doctor.stderr
    assert f"ai-memory: {SERVER_URL}/mcp (HTTP)" in listed.stdout
    # The same check sees a broken hook entry, so its silence above means something.
    settings_path = repo / ".claude" / "settings.json"
    settings = read_json(settings_path)
    settings["hooks"]["Stop"][0]["hooks"][0]["asyncRewake"] = "yes"
    settings_path.write_text(json.dumps(settings))
    refused = node_clients.run([claude, "doctor"], cwd=repo, home=home, env=env)
    assert "Invalid settings" in refused.stdout + refused.stderr


def codex_hooks_list(codex: str, repo: Path, env: dict[str, str]) -> dict[str, Any]:
    """Codex's own account of the hooks it found for ``repo`` (app-server ``hooks/list``)."""
    server = subprocess.Popen(
        [codex, "app-server"],
        cwd=repo,
        env={**node_clients.node_environment(), **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        requests = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"clientInfo": {"name": "tests", "version": "1"}},
            },
            {"jsonrpc": "2.0", "method": "initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "hooks/list", "params": {"cwds": [str(repo)]}},
        ]
        for request in requests:
            server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        for line in server.stdout:
            message = json.loads(line)
            if message.get("id") == 2:
                listed: dict[str, Any] = message["result"]["data"][0]
                return listed
        raise AssertionError("codex app-server ended without answering hooks/list")
    finally:
        server.kill()
        server.wait()


@pytest.mark.slow
@pytest.mark.agents
def test_codex_lists_the_mcp_server_and_hooks_init_writes(
    make_cli: Callable[[str], RunCli],
    make_repo: MakeRepo,
    tmp_path: Path,
    on_path: dict[str, str],
) -> None:
    codex = str(codex_cli())
    repo = make_repo("project-a")
    run_init_for_clients(make_cli, repo, on_path)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    # Codex reads a repository's .codex/ once the person trusts the project.
    (codex_home / "config.toml").write_text(
        f'[projects.{json.dumps(str(repo.resolve()))}]\ntrust_level = "trusted"\n'
    )
    env = {"CODEX_HOME": str(codex_home)}

    listed = node_clients.run([codex, "mcp", "list", "--json"], cwd=repo, env=env)
    hooks = codex_hooks_list(codex, repo, env)

    assert listed.returncode == 0, listed.stderr
    servers = {server["name"]: server for server in json.loads(listed.stdout)}
    assert servers["ai-memory"]["transport"]["url"] == f"{SERVER_URL}/mcp"
    assert servers["ai-memory"]["transport"]["bearer_token_env_var"] == "AI_MEMORY_AUTH_TOKEN"
    assert (hooks["warnings"], hooks["errors"]) == ([], [])
    assert sorted((hook["eventName"], hook["command"]) for hook in hooks["hooks"]) == [
        ("sessionEnd", "ai-memory hook session-end"),
        ("sessionStart", "ai-memory hook session-start"),
        ("stop", "ai-memory hook wait --client codex"),
        ("userPromptSubmit", "ai-memory hook user-prompt --agent codex"),
    ]
