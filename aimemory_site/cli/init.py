"""``ai-memory init``: name this repository's project and show how to wire agents to it.

Writes ``.ai-memory.toml`` at the git main worktree root (else the working directory),
then prints the MCP and SessionStart-hook configuration for Claude Code and Codex. The
bearer token appears only as the name of its environment variable, never its value.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from pathlib import Path

from aimemory_site.cli.client import (
    AUTH_TOKEN_ENV,
    SERVER_URL_ENV,
    auth_token_from,
    server_url_from,
)
from aimemory_site.cli.errors import CliError, UsageError
from aimemory_site.cli.help_text import SubParsers, add_command
from aimemory_site.cli.scope import (
    DEFAULT_WORKSPACE,
    MARKER_FILE_NAME,
    default_project_name,
    git_main_worktree_root,
)
from aimemory_site.lib.names import name_invalid_message, name_is_valid

HOOK_COMMAND = "ai-memory hook session-start"
MCP_SERVER_NAME = "ai-memory"
SESSION_START_MATCHER = "startup|resume|clear|compact"


def marker_text(workspace: str, project: str) -> str:
    # Names are validated, so a JSON string literal is also a valid TOML basic string.
    return (
        "# ai-memory: this repository's project on the ai-memory server.\n"
        "# The session-start hook and the ai-memory CLI act as this project.\n"
        f"workspace = {json.dumps(workspace)}\n"
        f"project = {json.dumps(project)}\n"
        "\n"
        "# Add the project brief (pinned, _rules/ and _slots/ pages) to each session start:\n"
        "# [briefing]\n"
        "# inject_on_session_start = true\n"
    )


def _indented(text: str, prefix: str = "  ") -> str:
    return "\n".join(prefix + line if line else line for line in text.splitlines())


def agent_setup_text(server_url: str, with_bearer: bool) -> str:
    """The Claude Code and Codex configuration for this server, ready to paste."""
    mcp_url = f"{server_url}/mcp"
    bearer_value = f"Bearer ${{{AUTH_TOKEN_ENV}}}"
    claude_add = f"claude mcp add --transport http {MCP_SERVER_NAME} {mcp_url}"
    mcp_server: dict[str, object] = {"type": "http", "url": mcp_url}
    codex_mcp = f"[mcp_servers.{MCP_SERVER_NAME}]\nurl = {json.dumps(mcp_url)}\n"
    if with_bearer:
        claude_add += f' --header "Authorization: Bearer ${AUTH_TOKEN_ENV}"'
        mcp_server["headers"] = {"Authorization": bearer_value}
        codex_mcp += f"bearer_token_env_var = {json.dumps(AUTH_TOKEN_ENV)}\n"
        token_line = f"Bearer token: read from ${AUTH_TOKEN_ENV} (the token itself is not printed)."
    else:
        token_line = f"No bearer: {AUTH_TOKEN_ENV} is not set (an anonymous server)."
    mcp_json = {"mcpServers": {MCP_SERVER_NAME: mcp_server}}
    hook_handler = {"type": "command", "command": HOOK_COMMAND}
    claude_settings = {
        "hooks": {"SessionStart": [{"matcher": SESSION_START_MATCHER, "hooks": [hook_handler]}]}
    }
    codex_hooks = (
        "[features]\n"
        "codex_hooks = true\n"
        "\n"
        "[[hooks.SessionStart]]\n"
        f"matcher = {json.dumps(SESSION_START_MATCHER)}\n"
        "[[hooks.SessionStart.hooks]]\n"
        'type = "command"\n'
        f"command = {json.dumps(HOOK_COMMAND)}\n"
    )
    sections = [
        f"Server: {server_url} (MCP endpoint {mcp_url}).",
        token_line,
        f"The hook and the CLI read {SERVER_URL_ENV} and {AUTH_TOKEN_ENV} from the agent's "
        "environment.",
        "",
        "== Claude Code ==",
        "MCP server, once per machine:",
        _indented(claude_add),
        "or for this repository, in .mcp.json:",
        _indented(json.dumps(mcp_json, indent=2)),
        "SessionStart hook, in .claude/settings.json:",
        _indented(json.dumps(claude_settings, indent=2)),
        "",
        "== Codex ==",
        "MCP server and SessionStart hook, in ~/.codex/config.toml:",
        _indented(codex_mcp + "\n" + codex_hooks),
    ]
    return "\n".join(sections)


def _checked_name(kind: str, value: str) -> str:
    if not name_is_valid(value):
        raise UsageError(name_invalid_message(kind, value))
    return value


def write_marker(
    cwd: Path, environ: Mapping[str, str], workspace: str | None, project: str | None, force: bool
) -> str:
    """Write the marker unless one exists (or ``force``); return what happened, in a line."""
    workspace = _checked_name("workspace", workspace or DEFAULT_WORKSPACE)
    project = _checked_name("project", project or default_project_name(cwd, environ))
    path = (git_main_worktree_root(cwd) or cwd) / MARKER_FILE_NAME
    if path.exists() and not force:
        return f"Kept the existing {path} (pass --force to overwrite it)."
    try:
        path.write_text(marker_text(workspace, project), encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return f"Wrote {path}: this repository is {workspace}/{project}."


def run_init(args: argparse.Namespace) -> int:
    outcome = write_marker(Path.cwd(), os.environ, args.workspace, args.project, args.force)
    print(outcome)
    print()
    print(agent_setup_text(server_url_from(os.environ), bool(auth_token_from(os.environ))))
    return 0


def add_parser(subparsers: SubParsers) -> None:
    init = add_command(
        subparsers,
        "init",
        summary="write .ai-memory.toml and print the agent configuration",
        paragraphs=[
            f"Write {MARKER_FILE_NAME} (workspace and project) at the root of the current git "
            "repository's main worktree, or in the working directory outside git; an "
            "existing one is kept unless --force. Then print the MCP server and SessionStart "
            f"hook configuration for Claude Code and Codex, for the server at ${SERVER_URL_ENV} "
            f"(bearer from ${AUTH_TOKEN_ENV} when it is set).",
        ],
        examples=["ai-memory init", "ai-memory init --workspace acme --project billing --force"],
    )
    init.add_argument("--workspace", metavar="W", help=f"workspace (default: {DEFAULT_WORKSPACE})")
    init.add_argument(
        "--project", metavar="P", help="project (default: the repository's or directory's name)"
    )
    init.add_argument(
        "--force", action="store_true", help=f"overwrite an existing {MARKER_FILE_NAME}"
    )
    init.set_defaults(handler=run_init, command_parser=init)
