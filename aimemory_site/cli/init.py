"""``ai-memory init``: name this repository's project, register it on the server, and
wire the agents to it.

Writes ``.ai-memory.toml`` at the git main worktree root (else the working directory),
registers the project it names with a session start of its own (so the message commands
work in a fresh repository at once), then writes, in that same root, each client's hook
entries and MCP server entry where the client reads them: Claude Code
(``.claude/settings.json``, ``.mcp.json``), Codex (``.codex/hooks.json``,
``.codex/config.toml``) and Gemini CLI (``.gemini/settings.json``), merged into what is
there (docs/agents.md). It prints all of it too, and Kimi's hook, which it does not
write. The hooks name ``ai-memory`` by its absolute path when it is not on PATH, as a
harness would not find it either. The bearer token appears only as the name of its
environment variable, never its value.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.exceptions
import tomlkit.items

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
USER_PROMPT_ARGS = "hook user-prompt"
WAIT_ARGS = "hook wait"
SESSION_END_ARGS = "hook session-end"
# A hook handler is ai-memory's when its command names ai-memory and one of these: a rerun
# of init replaces it rather than adding a second one.
OUR_HOOK_ARGS = (SESSION_START_ARGS, USER_PROMPT_ARGS, WAIT_ARGS, SESSION_END_ARGS)
# Seconds Claude Code gives the Stop hook: as long as ``hook wait`` waits by default.
WAIT_HOOK_TIMEOUT_SECONDS = 3600
# Claude Code shows the woken model this, then the hook's stderr (the inbox notice),
# instead of its default "Stop hook blocking error from command ...:" (docs/agents.md).
REWAKE_MESSAGE = "New mail came in while you were idle (a notice from ai-memory, not an error):"
# And shows the person this one line instead of "Stop hook feedback".
REWAKE_SUMMARY = "ai-memory: new mail"
# Codex clamps a SessionEnd hook's timeout to 3 s (and gives it 1 s when none is set).
CODEX_SESSION_END_TIMEOUT_SECONDS = 3
MCP_SERVER_NAME = "ai-memory"
SESSIONS_PATH = "/api/v1/sessions"
SESSION_START_MATCHER = "startup|resume|clear|compact"
# Seconds Kimi gives the hook; the hook itself waits at most 5 s for the server.
KIMI_HOOK_TIMEOUT_SECONDS = 10
# Where each client reads a repository's settings, from the repository root.
CLAUDE_SETTINGS_PATH = Path(".claude") / "settings.json"
CLAUDE_MCP_PATH = Path(".mcp.json")
CODEX_HOOKS_PATH = Path(".codex") / "hooks.json"
CODEX_CONFIG_PATH = Path(".codex") / "config.toml"
GEMINI_SETTINGS_PATH = Path(".gemini") / "settings.json"

JsonObject = dict[str, Any]


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


def _command(executable: str, args: str) -> JsonObject:
    return {"type": "command", "command": f"{executable} {args}"}


@dataclass(frozen=True)
class AgentConfig:
    """What ``init`` writes (and prints) for each client, for one server and executable."""

    mcp_url: str
    with_bearer: bool
    claude_hooks: JsonObject  # .claude/settings.json's "hooks"
    claude_mcp_server: JsonObject  # .mcp.json's mcpServers entry
    codex_hooks: JsonObject  # .codex/hooks.json's "hooks"
    codex_mcp_server: JsonObject  # .codex/config.toml's [mcp_servers.ai-memory]
    gemini_hooks: JsonObject  # .gemini/settings.json's "hooks"
    gemini_mcp_server: JsonObject  # .gemini/settings.json's mcpServers entry
    user_prompt_kimi: str  # the command of Kimi's UserPromptSubmit hook


def agent_config(
    server_url: str, with_bearer: bool, executable: str = EXECUTABLE_NAME
) -> AgentConfig:
    """Each client's hooks and MCP server entry for this server (docs/agents.md)."""
    mcp_url = f"{server_url}/mcp"
    bearer_value = f"Bearer ${{{AUTH_TOKEN_ENV}}}"
    session_start = _command(executable, SESSION_START_ARGS)
    session_end = _command(executable, SESSION_END_ARGS)
    # Run in the background once the agent stops; its exit 2 wakes the idle session.
    claude_wait = {
        **_command(executable, WAIT_ARGS),
        "asyncRewake": True,
        "timeout": WAIT_HOOK_TIMEOUT_SECONDS,
        "rewakeMessage": REWAKE_MESSAGE,
        "rewakeSummary": REWAKE_SUMMARY,
    }
    claude_mcp: JsonObject = {"type": "http", "url": mcp_url}
    codex_mcp: JsonObject = {"url": mcp_url}
    gemini_mcp: JsonObject = {"httpUrl": mcp_url}
    if with_bearer:
        claude_mcp["headers"] = {"Authorization": bearer_value}
        codex_mcp["bearer_token_env_var"] = AUTH_TOKEN_ENV
        gemini_mcp["headers"] = {"Authorization": bearer_value}
    return AgentConfig(
        mcp_url=mcp_url,
        with_bearer=with_bearer,
        claude_hooks={
            "SessionStart": [{"matcher": SESSION_START_MATCHER, "hooks": [session_start]}],
            "Stop": [{"hooks": [claude_wait]}],
            "SessionEnd": [{"hooks": [session_end]}],
        },
        claude_mcp_server=claude_mcp,
        codex_hooks={
            "SessionStart": [{"matcher": SESSION_START_MATCHER, "hooks": [session_start]}],
            "UserPromptSubmit": [
                {"hooks": [_command(executable, f"{USER_PROMPT_ARGS} --agent codex")]}
            ],
            # Returns at once: a detached waiter wakes the idle session through codex queue.
            "Stop": [{"hooks": [_command(executable, f"{WAIT_ARGS} --client codex")]}],
            "SessionEnd": [
                {"hooks": [{**session_end, "timeout": CODEX_SESSION_END_TIMEOUT_SECONDS}]}
            ],
        },
        codex_mcp_server=codex_mcp,
        gemini_hooks={
            "SessionStart": [
                {"hooks": [_command(executable, f"{SESSION_START_ARGS} --agent gemini")]}
            ],
            "BeforeAgent": [
                {"hooks": [_command(executable, f"{USER_PROMPT_ARGS} --agent gemini")]}
            ],
        },
        gemini_mcp_server=gemini_mcp,
        user_prompt_kimi=f"{executable} {USER_PROMPT_ARGS} --agent kimi",
    )


def _codex_mcp_toml(config: AgentConfig) -> str:
    document = tomlkit.document()
    servers = tomlkit.table(is_super_table=True)
    servers[MCP_SERVER_NAME] = config.codex_mcp_server
    document["mcp_servers"] = servers
    return tomlkit.dumps(document)


def agent_setup_text(server_url: str, with_bearer: bool, executable: str = EXECUTABLE_NAME) -> str:
    """The configuration ``init`` writes for Claude Code, Codex and Gemini CLI (and what
    to paste for Kimi), for this server, as ``init`` prints it.

    ``executable`` is how the hooks name ``ai-memory`` (see ``ai_memory_command``).
    """
    config = agent_config(server_url, with_bearer, executable)
    # User scope: claude's default scope is the directory it runs in, not the machine.
    claude_add = f"claude mcp add --scope user --transport http {MCP_SERVER_NAME} {config.mcp_url}"
    if with_bearer:
        claude_add += f' --header "Authorization: Bearer ${AUTH_TOKEN_ENV}"'
        token_line = f"Bearer token: read from ${AUTH_TOKEN_ENV} (the token itself is not printed)."
    else:
        token_line = f"No bearer: {AUTH_TOKEN_ENV} is not set (an anonymous server)."
    kimi_hooks = (
        "[[hooks]]\n"
        'event = "UserPromptSubmit"\n'
        f"command = {json.dumps(config.user_prompt_kimi)}\n"
        f"timeout = {KIMI_HOOK_TIMEOUT_SECONDS}\n"
    )

    def shown(value: object) -> str:
        return _indented(json.dumps(value, indent=2))

    sections = [
        f"Server: {server_url} (MCP endpoint {config.mcp_url}).",
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
        "The SessionStart hook, the Stop hook that wakes an idle session when mail comes, "
        f"and the SessionEnd hook, in {CLAUDE_SETTINGS_PATH.as_posix()}:",
        shown({"hooks": config.claude_hooks}),
        f"The MCP server for this repository, in {CLAUDE_MCP_PATH.as_posix()} (a project's "
        ".mcp.json needs a one-time approval in claude, which asks when it next starts here):",
        shown({"mcpServers": {MCP_SERVER_NAME: config.claude_mcp_server}}),
        "or for every project of this user:",
        _indented(claude_add),
        "",
        "== Codex ==",
        "Codex reads a repository's .codex/ only once you trust the project (it asks when "
        "it first starts here), and runs a new hook only once you have reviewed and "
        "trusted it in /hooks.",
        f"The SessionStart, UserPromptSubmit, Stop (wakes an idle session through codex "
        f"queue) and SessionEnd hooks, in {CODEX_HOOKS_PATH.as_posix()}:",
        shown({"hooks": config.codex_hooks}),
        f"The MCP server, in {CODEX_CONFIG_PATH.as_posix()}:",
        _indented(_codex_mcp_toml(config)),
        "",
        "== Gemini CLI ==",
        "Gemini CLI has no way to wake an idle session: the session is told of mail at its "
        "start and on its first prompt. It runs a repository's hooks only in a trusted "
        f"folder. The hooks and the MCP server, in {GEMINI_SETTINGS_PATH.as_posix()}:",
        shown(
            {
                "hooks": config.gemini_hooks,
                "mcpServers": {MCP_SERVER_NAME: config.gemini_mcp_server},
            }
        ),
        "",
        "== Kimi (not written: paste it) ==",
        "Kimi does not add a SessionStart hook's output to the agent's context, so the "
        "session is announced on its first prompt instead. UserPromptSubmit hook, in "
        "~/.kimi/config.toml (Kimi Code: ~/.kimi-code/config.toml):",
        _indented(kimi_hooks),
        f"and the MCP server {config.mcp_url} (HTTP) in Kimi's MCP configuration.",
    ]
    return "\n".join(sections)


# ---- writing each client's settings ------------------------------------------------------


class SettingsUnusable(Exception):
    """A settings file that exists but cannot be read as the client's settings."""


def _is_ours(handler: object) -> bool:
    if not isinstance(handler, dict):
        return False
    command = handler.get("command")
    return (
        isinstance(command, str)
        and EXECUTABLE_NAME in command
        and any(args in command for args in OUR_HOOK_ARGS)
    )


def merge_hooks(settings: JsonObject, ours: JsonObject) -> None:
    """Put ``ours`` (event -> hook groups) into ``settings["hooks"]``: ai-memory's earlier
    handlers are removed from every event (a group left empty goes too), every other
    hook stays where it was, and ours are added after them. Raises SettingsUnusable."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsUnusable('its "hooks" is not an object')
    for event, groups in list(hooks.items()):
        if not isinstance(groups, list):
            continue  # not an event's hook list (e.g. a client's own switch)
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = [handler for handler in group["hooks"] if not _is_ours(handler)]
                if not handlers:
                    continue
                group = {**group, "hooks": handlers}
            kept.append(group)
        if kept or not groups:
            hooks[event] = kept
        else:
            del hooks[event]  # it held ai-memory's hooks alone
    for event, groups in ours.items():
        existing = hooks.get(event)
        if existing is not None and not isinstance(existing, list):
            raise SettingsUnusable(f'its "hooks"."{event}" is not a list')
        hooks[event] = [*(existing or []), *groups]


def merge_mcp_server(settings: JsonObject, key: str, entry: JsonObject) -> None:
    """Set ``settings[key]["ai-memory"]`` to ``entry``; raises SettingsUnusable."""
    servers = settings.setdefault(key, {})
    if not isinstance(servers, dict):
        raise SettingsUnusable(f'its "{key}" is not an object')
    servers[MCP_SERVER_NAME] = entry


def _update_json(path: Path, change: Callable[[JsonObject], None]) -> bool:
    """Apply ``change`` to the JSON object in ``path`` (an empty one when it does not
    exist) and write it back; False when nothing changed. Raises SettingsUnusable, or
    OSError when it cannot be read or written."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    try:
        settings = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise SettingsUnusable(f"it is not valid JSON ({exc})") from exc
    if not isinstance(settings, dict):
        raise SettingsUnusable("it is not a JSON object")
    before = json.dumps(settings, sort_keys=True)
    change(settings)
    if path.exists() and json.dumps(settings, sort_keys=True) == before:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    return True


def _update_codex_config(path: Path, entry: JsonObject) -> bool:
    """Set ``[mcp_servers.ai-memory]`` in Codex's TOML config, keeping the rest of the file
    (comments included); False when nothing changed. Raises SettingsUnusable or OSError."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    try:
        document = tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
        raise SettingsUnusable(f"it is not valid TOML ({exc})") from exc
    servers = document.get("mcp_servers")
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        document["mcp_servers"] = servers
    elif not isinstance(servers, dict):
        raise SettingsUnusable("its mcp_servers is not a table")
    current = servers.get(MCP_SERVER_NAME)
    if text and isinstance(current, tomlkit.items.Table) and current.unwrap() == entry:
        return False
    table = tomlkit.table()
    table.update(entry)
    servers[MCP_SERVER_NAME] = table
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomlkit.dumps(document), encoding="utf-8")
    return True


@dataclass(frozen=True)
class _SettingsFile:
    client: str
    path: Path
    what: str
    update: Callable[[Path], bool]


def _settings_files(config: AgentConfig) -> list[_SettingsFile]:
    def claude_settings(settings: JsonObject) -> None:
        merge_hooks(settings, config.claude_hooks)

    def claude_mcp(settings: JsonObject) -> None:
        merge_mcp_server(settings, "mcpServers", config.claude_mcp_server)

    def codex_hooks(settings: JsonObject) -> None:
        merge_hooks(settings, config.codex_hooks)

    def gemini(settings: JsonObject) -> None:
        merge_hooks(settings, config.gemini_hooks)
        merge_mcp_server(settings, "mcpServers", config.gemini_mcp_server)

    def json_file(change: Callable[[JsonObject], None]) -> Callable[[Path], bool]:
        return lambda path: _update_json(path, change)

    return [
        _SettingsFile("Claude Code", CLAUDE_SETTINGS_PATH, "hooks", json_file(claude_settings)),
        _SettingsFile("Claude Code", CLAUDE_MCP_PATH, "MCP server", json_file(claude_mcp)),
        _SettingsFile("Codex", CODEX_HOOKS_PATH, "hooks", json_file(codex_hooks)),
        _SettingsFile(
            "Codex",
            CODEX_CONFIG_PATH,
            "MCP server",
            lambda path: _update_codex_config(path, config.codex_mcp_server),
        ),
        _SettingsFile(
            "Gemini CLI", GEMINI_SETTINGS_PATH, "hooks and MCP server", json_file(gemini)
        ),
    ]


def write_agent_settings(root: Path, config: AgentConfig) -> list[str]:
    """Write each client's settings file under ``root``, merged into what is there; return
    one line per file. A file that exists and cannot be read as settings is left as it is
    (its line says so), and the others are still written."""
    lines = []
    for settings in _settings_files(config):
        path = root / settings.path
        what = f"{settings.client} {settings.what}"
        try:
            changed = settings.update(path)
        except SettingsUnusable as exc:
            lines.append(f"Left {path} untouched: {exc}. Add the {what} below by hand.")
            continue
        except OSError as exc:
            lines.append(
                f"Could not write {path}: {exc.strerror or exc}. Add the {what} below by hand."
            )
            continue
        verb = "Wrote" if changed else "Kept"
        lines.append(f"{verb} the {what} in {path}.")
    return lines


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
    server_url = server_url_from(os.environ)
    with_bearer = bool(auth_token_from(os.environ))
    executable = ai_memory_command(os.environ.get("PATH"))
    root = git_main_worktree_root(cwd) or cwd
    for line in write_agent_settings(root, agent_config(server_url, with_bearer, executable)):
        print(line)
    print()
    print(agent_setup_text(server_url, with_bearer, executable))
    return 0


def add_parser(subparsers: SubParsers) -> None:
    init = add_command(
        subparsers,
        "init",
        summary="write .ai-memory.toml, register the project, write the agents' settings",
        paragraphs=[
            f"Write {MARKER_FILE_NAME} (workspace and project) at the root of the current git "
            "repository's main worktree, or in the working directory outside git; an "
            "existing one is kept unless --force. Register the project it names on the "
            "server (a session start of its own, which takes no handoff), so the message "
            "commands work here at once.",
            "Then write, at that same root, the hooks and the MCP server (at "
            f"${SERVER_URL_ENV}, bearer from ${AUTH_TOKEN_ENV} by name when it is set) for "
            f"Claude Code in {CLAUDE_SETTINGS_PATH.as_posix()} (SessionStart; Stop, "
            "ai-memory hook wait with asyncRewake, which wakes an idle session when mail "
            f"comes; SessionEnd) and {CLAUDE_MCP_PATH.as_posix()}, for Codex in "
            f"{CODEX_HOOKS_PATH.as_posix()} (SessionStart, UserPromptSubmit, Stop, which "
            f"wakes an idle session through codex queue, SessionEnd) and "
            f"{CODEX_CONFIG_PATH.as_posix()}, and for Gemini CLI in "
            f"{GEMINI_SETTINGS_PATH.as_posix()} (SessionStart, BeforeAgent). Each file is "
            "merged into: other keys and hooks stay, ai-memory's earlier entries are "
            "replaced, so a rerun adds nothing twice. A file that exists and does not "
            "parse is left untouched, with one line saying so. Everything written is "
            "printed too, with Kimi's UserPromptSubmit hook, which is not written.",
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
