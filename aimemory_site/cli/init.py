"""``ai-memory init``: name this repository's project, register it on the server, and
show how to wire agents to it.

Writes ``.ai-memory.toml`` at the git main worktree root (else the working directory),
registers the project it names with a session start of its own (so the message commands
work in a fresh repository at once), then prints the MCP and hook configuration for Claude
Code and Codex (SessionStart; Claude Code's Stop hook too, which wakes an idle session when
mail comes) and Kimi (UserPromptSubmit). The hooks name ``ai-memory`` by
its absolute path when it is not on PATH, as a harness would not find it either. The
bearer token appears only as the name of its environment variable, never its value.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from aimemory_site.cli.client import (
    AUTH_TOKEN_ENV,
    SERVER_URL_ENV,
    ApiClient,
    ClientError,
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
    resolve_scope,
)
from aimemory_site.lib.agents import AGENT_OTHER
from aimemory_site.lib.names import name_invalid_message, name_is_valid
from aimemory_site.lib.session_sources import SOURCE_INIT

EXECUTABLE_NAME = "ai-memory"
SESSION_START_ARGS = "hook session-start"
USER_PROMPT_ARGS = "hook user-prompt --agent kimi"
WAIT_ARGS = "hook wait"
# Seconds Claude Code gives the Stop hook: as long as ``hook wait`` waits by default.
WAIT_HOOK_TIMEOUT_SECONDS = 3600
MCP_SERVER_NAME = "ai-memory"
SESSIONS_PATH = "/api/v1/sessions"
SESSION_START_MATCHER = "startup|resume|clear|compact"
# Seconds Kimi gives the hook; the hook itself waits at most 5 s for the server.
KIMI_HOOK_TIMEOUT_SECONDS = 10


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


def _executable_candidates(argv0: str, python: str) -> list[Path]:
    """Where this ``ai-memory`` may be: the script that runs (``argv[0]``, when it is
    one), then the one installed beside the interpreter (a virtualenv's ``bin``)."""
    candidates = []
    if argv0 and Path(argv0).name.removesuffix(".exe") == EXECUTABLE_NAME:
        candidates.append(Path(argv0).resolve())
    if python:
        scripts = Path(python).parent
        candidates += [scripts / EXECUTABLE_NAME, scripts / f"{EXECUTABLE_NAME}.exe"]
    return candidates


def ai_memory_command(
    path: str | None = None, argv: Sequence[str] | None = None, python: str | None = None
) -> str:
    """How a hook should name ``ai-memory``: the bare name when PATH finds it, else the
    absolute path of this installation's (shell-quoted), else the bare name after all."""
    if shutil.which(EXECUTABLE_NAME, path=path) is not None:
        return EXECUTABLE_NAME
    argv = sys.argv if argv is None else argv
    python = sys.executable if python is None else python
    for candidate in _executable_candidates(argv[0] if argv else "", python):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return shlex.quote(str(candidate))
    return EXECUTABLE_NAME


def agent_setup_text(server_url: str, with_bearer: bool, executable: str = EXECUTABLE_NAME) -> str:
    """The Claude Code, Codex and Kimi configuration for this server, ready to paste.

    ``executable`` is how the hooks name ``ai-memory`` (see ``ai_memory_command``).
    """
    mcp_url = f"{server_url}/mcp"
    bearer_value = f"Bearer ${{{AUTH_TOKEN_ENV}}}"
    # User scope: claude's default scope is the directory it runs in, not the machine.
    claude_add = f"claude mcp add --scope user --transport http {MCP_SERVER_NAME} {mcp_url}"
    mcp_server: dict[str, object] = {"type": "http", "url": mcp_url}
    codex_mcp = f"[mcp_servers.{MCP_SERVER_NAME}]\nurl = {json.dumps(mcp_url)}\n"
    if with_bearer:
        claude_add += f' --header "Authorization: Bearer ${AUTH_TOKEN_ENV}"'
        mcp_server["headers"] = {"Authorization": bearer_value}
        codex_mcp += f"bearer_token_env_var = {json.dumps(AUTH_TOKEN_ENV)}\n"
        token_line = f"Bearer token: read from ${AUTH_TOKEN_ENV} (the token itself is not printed)."
    else:
        token_line = f"No bearer: {AUTH_TOKEN_ENV} is not set (an anonymous server)."
    session_start = f"{executable} {SESSION_START_ARGS}"
    user_prompt = f"{executable} {USER_PROMPT_ARGS}"
    mcp_json = {"mcpServers": {MCP_SERVER_NAME: mcp_server}}
    hook_handler = {"type": "command", "command": session_start}
    # Run in the background once the agent stops; its exit 2 wakes the idle session.
    wait_handler = {
        "type": "command",
        "command": f"{executable} {WAIT_ARGS}",
        "asyncRewake": True,
        "timeout": WAIT_HOOK_TIMEOUT_SECONDS,
    }
    claude_settings = {
        "hooks": {
            "SessionStart": [{"matcher": SESSION_START_MATCHER, "hooks": [hook_handler]}],
            "Stop": [{"hooks": [wait_handler]}],
        }
    }
    codex_hooks = (
        "[features]\n"
        "hooks = true\n"
        "\n"
        "[[hooks.SessionStart]]\n"
        f"matcher = {json.dumps(SESSION_START_MATCHER)}\n"
        "[[hooks.SessionStart.hooks]]\n"
        'type = "command"\n'
        f"command = {json.dumps(session_start)}\n"
    )
    kimi_hooks = (
        "[[hooks]]\n"
        'event = "UserPromptSubmit"\n'
        f"command = {json.dumps(user_prompt)}\n"
        f"timeout = {KIMI_HOOK_TIMEOUT_SECONDS}\n"
    )
    sections = [
        f"Server: {server_url} (MCP endpoint {mcp_url}).",
        token_line,
        f"The hooks and the CLI read {SERVER_URL_ENV} and {AUTH_TOKEN_ENV} from the agent's "
        "environment.",
    ]
    if executable != EXECUTABLE_NAME:
        sections.append(
            f"{EXECUTABLE_NAME} is not on PATH, so the hooks name it by its path: {executable}"
        )
    sections += [
        "",
        "== Claude Code ==",
        "MCP server, for every project of this user:",
        _indented(claude_add),
        "or for this repository only, in .mcp.json (a project's .mcp.json needs a one-time "
        "approval in claude, which asks when it next starts here):",
        _indented(json.dumps(mcp_json, indent=2)),
        "SessionStart hook, and the Stop hook that wakes an idle session when mail comes, "
        "in .claude/settings.json:",
        _indented(json.dumps(claude_settings, indent=2)),
        "",
        "== Codex ==",
        "MCP server and SessionStart hook, in ~/.codex/config.toml "
        "(Codex has you review and trust a new hook before it runs):",
        _indented(codex_mcp + "\n" + codex_hooks),
        "",
        "== Kimi ==",
        "Kimi does not add a SessionStart hook's output to the agent's context, so the "
        "session is announced on its first prompt instead. UserPromptSubmit hook, in "
        "~/.kimi/config.toml (Kimi Code: ~/.kimi-code/config.toml):",
        _indented(kimi_hooks),
        f"and the MCP server {mcp_url} (HTTP) in Kimi's MCP configuration.",
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


def register_project(cwd: Path, environ: Mapping[str, str]) -> str:
    """Register the project the CLI resolves in ``cwd`` (the marker's, once written) with
    a session start of its own; return the line that says so. Raises CliError (also for
    a marker that cannot be read).

    Its source ``init`` makes the server claim no handoff for it: no agent reads this
    answer, and the handoff is meant for the next agent session.
    """
    scope = resolve_scope(cwd, environ)
    payload = {
        "workspace": scope.workspace,
        "project": scope.project,
        "session_id": f"cli-init-{uuid.uuid4()}",
        "agent": AGENT_OTHER,
        "source": SOURCE_INIT,
    }
    client = ApiClient.from_environment(environ)
    try:
        client.post(SESSIONS_PATH, payload)
    except ClientError as exc:
        # No answer at all: the server is away. An answer: it said what is wrong.
        then = "once the server runs" if exc.status is None else "once that is fixed"
        raise CliError(
            f"could not register {scope.label} on the server: {str(exc).rstrip('.')}. "
            f"Run `ai-memory init` again {then}."
        ) from exc
    return (
        f"Registered {scope.label} on the server at {client.base_url}: the CLI and the "
        "agents' hooks can use it now."
    )


def run_init(args: argparse.Namespace) -> int:
    cwd = Path.cwd()
    print(write_marker(cwd, os.environ, args.workspace, args.project, args.force))
    try:
        print(register_project(cwd, os.environ))
    except CliError as exc:
        # The marker and the configuration below are of use without a server; the
        # registration is the one step to repeat.
        print(f"ai-memory: {exc}", file=sys.stderr)
    print()
    executable = ai_memory_command(os.environ.get("PATH"))
    print(
        agent_setup_text(server_url_from(os.environ), bool(auth_token_from(os.environ)), executable)
    )
    return 0


def add_parser(subparsers: SubParsers) -> None:
    init = add_command(
        subparsers,
        "init",
        summary="write .ai-memory.toml, register the project, print the agent configuration",
        paragraphs=[
            f"Write {MARKER_FILE_NAME} (workspace and project) at the root of the current git "
            "repository's main worktree, or in the working directory outside git; an "
            "existing one is kept unless --force. Register the project it names on the "
            "server (a session start of its own, which takes no handoff), so the message "
            "commands work here at once. Then print the configuration for the "
            f"server at ${SERVER_URL_ENV} (bearer from ${AUTH_TOKEN_ENV} when it is set): "
            "the MCP server and the SessionStart hook (ai-memory hook session-start) for "
            "Claude Code and Codex, the Stop hook (ai-memory hook wait, asyncRewake) that "
            "wakes an idle Claude Code session when mail comes, and the UserPromptSubmit "
            "hook (ai-memory hook user-prompt) for Kimi.",
            "The hooks name ai-memory by its absolute path when it is not on PATH.",
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
