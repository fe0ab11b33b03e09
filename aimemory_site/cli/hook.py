"""``ai-memory hook session-start|user-prompt|wait``: register an agent's session and print
its on-start block, or wait for mail while the session is idle.

Harnesses (Claude Code, Codex) run ``session-start`` at every session start and add its
stdout to the agent's context. A harness that drops what a SessionStart hook prints (Kimi)
runs ``user-prompt`` on every prompt instead: it registers the session and prints the block
on the first prompt of a session, remembering the sessions it announced (``session-start``
too) in a small state directory, and on later prompts tells of mail that came since (Codex
and Gemini CLI run both hooks). Neither may ever stand in the way of the agent: whatever fails (no
server, an error answer, unreadable input, no state directory), they print nothing on
stdout and exit 0. The one failure they name, in one line on stderr, is a 401: the
server wants a token, which the person who set the agent up can fix and would otherwise
never hear of (authentication turns on with the first user token).

``wait`` is Claude Code's ``Stop`` hook with ``asyncRewake``: it runs in the background
while the session is idle and wakes it, by exiting 2 with the inbox notice on stderr, when
mail the session has not been told about arrives; otherwise it exits 0 and says nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from aimemory_site.cli.client import (
    AUTH_TOKEN_ENV,
    ISSUE_TOKEN_COMMAND,
    ApiClient,
    ClientError,
    NoAnswerError,
    RetryableError,
)
from aimemory_site.cli.common import timeout_arg
from aimemory_site.cli.errors import CliError
from aimemory_site.cli.help_text import SubParsers, add_command
from aimemory_site.cli.processes import hook_runner, is_alive
from aimemory_site.cli.scope import resolve_scope
from aimemory_site.lib.agents import AGENT_KINDS, AGENT_OTHER
from aimemory_site.lib.limits import WAIT_SECONDS_MAX
from aimemory_site.lib.session_sources import SESSION_SOURCES, SOURCE_RESUME

SESSIONS_PATH = "/api/v1/sessions"
SESSION_WAIT_PATH = "/api/v1/sessions/wait"
# ``hook wait`` gives up after this long unless --timeout says otherwise; the hook entry
# ``ai-memory init`` prints gives the harness's timeout the same value.
HOOK_WAIT_TIMEOUT_DEFAULT_SECONDS = 3600
# The exit status that makes Claude Code wake the idle session with the hook's stderr.
REWAKE_EXIT_STATUS = 2
# Two requests of one wait start at least this far apart, its last second included.
REQUEST_SPACING_SECONDS = 1.0
# The server's codes for a session it does not know, or a project it does not have (its
# data was reset: ``Code.SESSION_NOT_FOUND``, ``Code.PROJECT_NOT_FOUND``, which the CLI does
# not import: it runs without Django). A session start registers both.
UNKNOWN_TO_THE_SERVER = frozenset({"session_not_found", "project_not_found"})
# Claude Code names how it was started here; only ``cli`` (or nothing) is a person at a
# terminal. Print mode and SDK runs (``sdk-cli``, ...) would wait on a Stop hook.
CLAUDE_ENTRYPOINT_ENV = "CLAUDE_CODE_ENTRYPOINT"
CLAUDE_INTERACTIVE_ENTRYPOINT = "cli"
# How often a waiter checks that the process that ran it still runs (docs/agents.md: no
# waiter outlives its client by more than 5 s).
RUNNER_CHECK_SECONDS = 1.0
# An unreachable server is asked again after 1 s, then twice as long each time, up to 60 s.
RETRY_FIRST_PAUSE_SECONDS = 1.0
RETRY_LONGEST_PAUSE_SECONDS = 60.0
# A session start waits for this at most; an agent's start matters more than its notice.
HOOK_TIMEOUT_SECONDS = 5.0
# Where each harness keeps its transcripts, which is how the hook input tells them apart.
TRANSCRIPT_DIRECTORIES = {"/.claude/": "claude", "/.codex/": "codex", "/.gemini/": "gemini"}
# Gemini CLI adds to the agent's context only what a hook prints as JSON (plain text is
# shown to the person alone), under this event name (docs/agents.md#gemini-cli).
GEMINI_AGENT = "gemini"

STATE_HOME_ENV = "XDG_STATE_HOME"
# Under the state home: one empty file per session ``user-prompt`` announced.
ANNOUNCED_DIRECTORY = Path("ai-memory") / "announced-sessions"
# A session's file is kept while the session is in use (each prompt touches it) and
# removed once it has been idle this long, so the directory stays small.
ANNOUNCED_KEEP_SECONDS = 3 * 24 * 60 * 60


def read_hook_input(stream: TextIO | None) -> dict[str, Any]:
    """The harness's hook JSON; anything unreadable counts as no input at all."""
    if stream is None or stream.isatty():
        return {}
    try:
        parsed = json.loads(stream.read() or "{}")
    except (OSError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def read_session(
    stream: TextIO | None, command: str, required: Sequence[str] = ("session_id", "cwd")
) -> dict[str, str] | str:
    """The ``required`` fields of the hook JSON, or the one stderr line saying what is
    wrong with it."""
    text = ""
    if stream is not None and not stream.isatty():
        with contextlib.suppress(OSError, UnicodeDecodeError):
            text = stream.read()
    prefix = f"ai-memory: {command}:"
    if not text.strip():
        return f"{prefix} no hook JSON on stdin; nothing done"
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        return f"{prefix} stdin is not JSON; nothing done"
    if not isinstance(parsed, dict):
        return f"{prefix} the hook JSON is not an object; nothing done"
    fields = {name: parsed.get(name) for name in required}
    found = {
        name: value.strip()
        for name, value in fields.items()
        if isinstance(value, str) and value.strip()
    }
    missing = [name for name in required if name not in found]
    if missing:
        return f"{prefix} the hook JSON has no {' or '.join(missing)}; nothing done"
    return found


def text_field(hook_input: Mapping[str, Any], key: str) -> str:
    value = hook_input.get(key)
    return value.strip() if isinstance(value, str) else ""


def detect_agent(hook_input: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """``claude``, ``codex`` or ``other``, from the transcript path or Claude's hook env."""
    transcript = text_field(hook_input, "transcript_path").replace("\\", "/")
    for directory, agent in TRANSCRIPT_DIRECTORIES.items():
        if directory in transcript:
            return agent
    # Gemini CLI sets CLAUDE_PROJECT_DIR too, for compatibility, so it is asked first.
    if environ.get("GEMINI_PROJECT_DIR"):
        return GEMINI_AGENT
    # Claude Code sets this for every hook command it runs.
    if environ.get("CLAUDE_PROJECT_DIR"):
        return "claude"
    return AGENT_OTHER


def session_payload(
    hook_input: Mapping[str, Any], environ: Mapping[str, str], agent_override: str | None
) -> dict[str, Any]:
    """The ``POST /api/v1/sessions`` body for this hook input; raises ScopeError.

    It asks for the project brief when the project's ``.ai-memory.toml`` sets
    ``[briefing] inject_on_session_start = true``, and passes the harness's ``source``
    (a ``resume`` or ``compact`` start claims no handoff). A source the server does not
    know is left out, so the start counts as a startup: the server would refuse the
    value, and the session would go unregistered.
    """
    cwd_text = text_field(hook_input, "cwd")
    cwd = Path(cwd_text) if cwd_text else Path.cwd()
    scope = resolve_scope(cwd, environ)
    payload: dict[str, Any] = {
        "workspace": scope.workspace,
        "project": scope.project,
        # A harness that sends no id still gets its project registered, as a new session.
        "session_id": text_field(hook_input, "session_id") or f"cli-{uuid.uuid4()}",
        "agent": agent_override or detect_agent(hook_input, environ),
    }
    if scope.marker is not None and scope.marker.inject_brief:
        payload["inject_brief"] = True
    source = text_field(hook_input, "source")
    if source in SESSION_SOURCES:
        payload["source"] = source
    return payload


def token_problem(client: ApiClient) -> str:
    """The one stderr line for a 401: whether a token is missing or was refused."""
    where = f"ai-memory: the server at {client.base_url}"
    fix = f"where the agent's hooks run (a token from {ISSUE_TOKEN_COMMAND})"
    if client.token:
        return (
            f"{where} refused the token in {AUTH_TOKEN_ENV} (401): it is unknown or revoked; "
            f"set a valid one {fix}"
        )
    return f"{where} requires a token (401): set {AUTH_TOKEN_ENV} {fix}"


def _start_session(
    client: ApiClient, hook_input: Mapping[str, Any], agent: str | None
) -> str | None:
    """Register the session; return the on-start block, or None when that failed.

    A failure is silent, except a 401, which is one line on stderr (``token_problem``).
    """
    try:
        payload = session_payload(hook_input, os.environ, agent)
        answer = client.post(SESSIONS_PATH, payload)
    except ClientError as failed:
        if failed.status == 401:
            print(token_problem(client), file=sys.stderr)
        return None
    except CliError:
        return None
    context = answer.get("context")
    if isinstance(context, str) and context.strip():
        return context.rstrip("\n")
    return None


def _hook_client() -> ApiClient:
    return ApiClient.from_environment(timeout_seconds=HOOK_TIMEOUT_SECONDS)


def print_block(context: str, agent: str, event: str) -> None:
    """Print the block as the harness adds it to the agent's context: plain text, or for
    Gemini CLI the JSON whose ``additionalContext`` it adds."""
    if agent != GEMINI_AGENT:
        print(context)
        return
    output = {"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}}
    print(json.dumps(output, ensure_ascii=False))


def _agent_of(args: argparse.Namespace, hook_input: Mapping[str, Any]) -> str:
    named = getattr(args, "agent", None)
    return named.strip().lower() if named else detect_agent(hook_input, os.environ)


def run_session_start(args: argparse.Namespace) -> int:
    hook_input = read_hook_input(sys.stdin)
    client = _hook_client()
    context = _start_session(client, hook_input, args.agent)
    if context is not None:
        print_block(context, _agent_of(args, hook_input), "SessionStart")
        # Announced: a user-prompt hook of the same session (Codex and Gemini CLI run
        # both) then tells only of mail that came after.
        with contextlib.suppress(RuntimeError):
            session_id = text_field(hook_input, "session_id")
            if session_id:
                marker = announced_directory(os.environ) / session_key(client.base_url, session_id)
                _claim_announcement(marker)
    return 0


# ---- wait: wake an idle session when mail comes -----------------------------------------


def session_wait_payload(
    hook_input: Mapping[str, Any], environ: Mapping[str, str]
) -> dict[str, Any]:
    """The ``POST /api/v1/sessions/wait`` body, without ``wait_seconds``, for this hook
    input: the project resolved from its ``cwd`` as ``session-start`` resolves it. Raises
    ScopeError."""
    cwd_text = text_field(hook_input, "cwd")
    scope = resolve_scope(Path(cwd_text) if cwd_text else Path.cwd(), environ)
    return {
        "workspace": scope.workspace,
        "project": scope.project,
        "session_id": text_field(hook_input, "session_id"),
    }


def _register_resume(
    client: ApiClient, payload: Mapping[str, Any], agent: str
) -> tuple[bool, str | None]:
    """Register a session the server does not know, as a ``resume`` start (which claims
    no handoff). Return whether that worked and, when mail already waits, the start's
    notice: the start told the session of that mail, so no later wait will."""
    try:
        answer = client.post(
            SESSIONS_PATH,
            {
                "workspace": payload.get("workspace"),
                "project": payload.get("project"),
                "session_id": payload.get("session_id"),
                "agent": agent,
                "source": SOURCE_RESUME,
            },
        )
    except ClientError as failed:
        if failed.status == 401:
            print(token_problem(client), file=sys.stderr)
        return False, None
    except CliError:
        return False, None
    pending = answer.get("pending_message_count")
    context = answer.get("context")
    if isinstance(pending, int) and pending > 0 and isinstance(context, str) and context.strip():
        return True, context.rstrip("\n")
    return True, None


def wait_for_mail(
    client: ApiClient,
    payload: Mapping[str, Any],
    timeout: float,
    *,
    agent: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Repeat session waits (each at most 60 s) until new mail, a newer wait of the
    session, or ``timeout`` seconds; return the inbox notice for new mail, else None.

    It never starts two requests less than a second apart, its last second included (a
    wait asks the server for one second at least). A server that cannot be reached, or
    that does not answer, is asked again after a pause (1 s, doubling up to 60 s) until
    the time is up; it is not an error. When ``agent`` is given, a session the server
    does not know (404 ``session_not_found``: it started while the server was away; or
    ``project_not_found``: the data was reset) is registered once, as that agent's ``resume`` start, and then
    waited on; mail already pending then is returned at once, as the start told the
    session of it. Any other failure ends the wait with None, except a 401, which also
    prints ``token_problem``.
    """
    deadline = clock() + timeout
    pause = RETRY_FIRST_PAUSE_SECONDS
    registered = agent is None
    last_request = -math.inf

    def spaced() -> bool:
        """Sleep until a request may start; False when the time is up first."""
        now = clock()
        ready = last_request + REQUEST_SPACING_SECONDS
        if ready >= deadline or now >= deadline:
            return False
        if ready > now:
            sleep(ready - now)
        return True

    while spaced():
        remaining = deadline - clock()
        wait_seconds = max(1, min(WAIT_SECONDS_MAX, int(remaining)))
        last_request = clock()
        try:
            answer = client.post(
                SESSION_WAIT_PATH,
                {**payload, "wait_seconds": wait_seconds},
                wait_seconds=wait_seconds,
            )
        except (RetryableError, NoAnswerError):
            sleep(min(pause, max(0.0, deadline - clock())))
            pause = min(pause * 2, RETRY_LONGEST_PAUSE_SECONDS)
            continue
        except ClientError as failed:
            if failed.status == 401:
                print(token_problem(client), file=sys.stderr)
            if failed.code not in UNKNOWN_TO_THE_SERVER or registered or agent is None:
                return None
            registered = True
            if not spaced():
                return None
            last_request = clock()
            started, told = _register_resume(client, payload, agent)
            if not started or told is not None:
                return told
            continue
        pause = RETRY_FIRST_PAUSE_SECONDS
        if answer.get("superseded") is True:
            return None
        context = answer.get("context")
        new = answer.get("new_message_count")
        if isinstance(new, int) and new > 0 and isinstance(context, str) and context.strip():
            return context.rstrip("\n")
    return None


# ---- the waiter ends with the client that ran it ----------------------------------------


def runner_alive_check() -> Callable[[], bool]:
    """A check that the process that ran this hook still runs, set up now, at the start:
    the parent, or the first ancestor that is not a shell (``processes.hook_runner``)."""
    runner, start = hook_runner(os.getppid())
    return lambda: is_alive(runner, start)


def exit_when_gone(alive: Callable[[], bool], every: float = RUNNER_CHECK_SECONDS) -> None:
    """Check ``alive`` every ``every`` seconds in a daemon thread, and end this process at
    once, with status 0 and nothing printed, when it says no. For a waiter, whose parked
    request would otherwise outlive its client by up to a minute."""

    def watch() -> None:
        while alive():
            time.sleep(every)
        sys.stdout.flush()
        os._exit(0)

    threading.Thread(target=watch, name="ai-memory-runner-watch", daemon=True).start()


def interactive_claude(environ: Mapping[str, str]) -> bool:
    """Whether this Claude Code runs for a person: print mode and SDK runs set
    ``CLAUDE_CODE_ENTRYPOINT`` to something other than ``cli`` (unset counts as a person)."""
    entrypoint = environ.get(CLAUDE_ENTRYPOINT_ENV, "").strip()
    return entrypoint in ("", CLAUDE_INTERACTIVE_ENTRYPOINT)


def run_wait(args: argparse.Namespace) -> int:
    if getattr(args, "client", "claude") == "codex":
        # Imported here: codex_wake imports this module.
        from aimemory_site.cli import codex_wake

        return codex_wake.run_hook(args.timeout)
    if getattr(args, "client", "claude") == "claude" and not interactive_claude(os.environ):
        # A waiting Stop hook would hold a script's ``claude -p`` open for its timeout.
        return 0
    session = read_session(sys.stdin, "hook wait")
    if isinstance(session, str):
        print(session, file=sys.stderr)
        return 0  # no session to wake
    hook_input: dict[str, Any] = dict(session)
    try:
        payload = session_wait_payload(hook_input, os.environ)
    except CliError:
        return 0
    # Imported here: waiters imports this module.
    from aimemory_site.cli import waiters

    exit_when_gone(runner_alive_check())
    waiters.become_waiter(os.environ, text_field(hook_input, "session_id"))
    # Each request waits for its answer 5 s longer than it asks the server to wait.
    client = ApiClient.from_environment(timeout_seconds=HOOK_TIMEOUT_SECONDS)
    agent = getattr(args, "agent", None) or detect_agent(hook_input, os.environ)
    notice = wait_for_mail(client, payload, args.timeout, agent=agent)
    if notice is None:
        return 0
    print(notice, file=sys.stderr)
    return REWAKE_EXIT_STATUS


# ---- user-prompt: the block once per session, then new mail -----------------------------


def state_home(environ: Mapping[str, str]) -> Path:
    """``$XDG_STATE_HOME`` when it is an absolute path (as the XDG spec asks), else
    ``~/.local/state``; raises RuntimeError when there is no home directory either."""
    configured = environ.get(STATE_HOME_ENV, "").strip()
    if configured and Path(configured).is_absolute():
        return Path(configured)
    return Path.home() / ".local" / "state"


def announced_directory(environ: Mapping[str, str]) -> Path:
    return state_home(environ) / ANNOUNCED_DIRECTORY


def session_key(server_url: str, session_id: str) -> str:
    """A file name for a session of a server: any id, whatever its characters, fits."""
    return hashlib.sha256(f"{server_url}\n{session_id}".encode()).hexdigest()[:32]


def prune_announced(directory: Path, now: float, keep_seconds: float) -> None:
    """Remove the files of sessions idle for longer than ``keep_seconds``; best effort."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return
    for entry in entries:
        try:
            if now - entry.stat().st_mtime > keep_seconds:
                entry.unlink()
        except OSError:
            continue


def _claim_announcement(marker: Path) -> bool:
    """Create the session's file; False when it exists (announced before) or cannot be made.

    An exclusive create, so two prompts of one session that race announce it once. A
    session whose file already exists has its file touched: it stays while in use.
    """
    try:
        marker.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        with contextlib.suppress(OSError):
            os.utime(marker)
        return False
    except OSError:
        # Nowhere to remember the session: saying nothing beats repeating the block on
        # every prompt.
        return False
    return True


def _new_mail_notice(client: ApiClient, hook_input: Mapping[str, Any]) -> str | None:
    """The inbox notice when mail came that the session was not told about (a session
    wait that does not wait: it tells each message once, and ends the session's parked
    wait, whose client is busy with this prompt); else None, silently."""
    try:
        payload = session_wait_payload(hook_input, os.environ)
        answer = client.post(SESSION_WAIT_PATH, {**payload, "wait_seconds": 0})
    except ClientError as failed:
        if failed.status == 401:
            print(token_problem(client), file=sys.stderr)
        return None
    except CliError:
        return None
    new = answer.get("new_message_count")
    context = answer.get("context")
    if isinstance(new, int) and new > 0 and isinstance(context, str) and context.strip():
        return context.rstrip("\n")
    return None


def run_user_prompt(args: argparse.Namespace) -> int:
    hook_input = read_hook_input(sys.stdin)
    session_id = text_field(hook_input, "session_id")
    if not session_id:
        return 0  # without an id, no prompt can be told to be the session's first
    client = _hook_client()
    try:
        directory = announced_directory(os.environ)
    except RuntimeError:
        return 0
    marker = directory / session_key(client.base_url, session_id)
    if not _claim_announcement(marker):
        notice = _new_mail_notice(client, hook_input)
        if notice is not None:
            print_block(notice, _agent_of(args, hook_input), "BeforeAgent")
        return 0
    prune_announced(directory, time.time(), ANNOUNCED_KEEP_SECONDS)
    context = _start_session(client, hook_input, args.agent)
    if context is None:
        # Not announced after all: the next prompt of the session tries again.
        with contextlib.suppress(OSError):
            marker.unlink(missing_ok=True)
        return 0
    print_block(context, _agent_of(args, hook_input), "BeforeAgent")
    return 0


# ---- arguments --------------------------------------------------------------------------

_BLOCK_HELP = (
    "The on-start block is, in this order: the project's next handoff (claimed by this "
    "session, so the next session does not get it again), the project brief when "
    ".ai-memory.toml sets [briefing] inject_on_session_start = true, the inbox notice when "
    "mail waits, and always, last, a line naming the session's project."
)
_SILENCE_HELP = (
    "It never blocks the agent: when the server cannot be reached or answers an error, "
    "it prints nothing and exits 0. Only a 401 (the server wants a token) is said, in one "
    f"line on stderr naming {AUTH_TOKEN_ENV}."
)


def _add_agent_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent",
        metavar="NAME",
        help=f"the harness ({', '.join(AGENT_KINDS)}); default: detected from the hook input",
    )


def add_parser(subparsers: SubParsers) -> None:
    # Imported here: codex_wake and waiters import this module.
    from aimemory_site.cli import codex_wake, waiters

    hook_parser = add_command(
        subparsers,
        "hook",
        summary="lifecycle hooks for agent harnesses",
        paragraphs=[
            "Commands that agent harnesses run on lifecycle events. Configure one of them "
            "per harness: session-start where the harness adds a SessionStart hook's output "
            "to the agent's context (Claude Code, Codex), user-prompt where it does not "
            "(Kimi). wait wakes an idle Claude Code session when mail comes (a Stop hook "
            "with asyncRewake), or with --client codex an idle Codex session; session-end "
            "ends a session's waiter. 'ai-memory init' prints the configuration."
        ],
        examples=[
            "ai-memory hook session-start < hook-input.json",
            "ai-memory hook user-prompt --agent kimi < hook-input.json",
            "ai-memory hook wait < hook-input.json",
        ],
    )
    hooks = hook_parser.add_subparsers(
        dest="hook_command", metavar="{session-start,user-prompt,wait,session-end}", required=True
    )
    session_start = add_command(
        hooks,
        "session-start",
        summary="register the session and print the on-start block",
        paragraphs=[
            "Run by the harness when an agent session starts. Reads the hook JSON on stdin "
            "(session_id, cwd, transcript_path, source), resolves the project from cwd as the "
            "message commands do, registers the session (creating the project if new) and "
            "prints the on-start block. Only a new session claims the handoff: a start whose "
            "source is resume or compact, or whose session id started before, shows none.",
            _BLOCK_HELP,
            _SILENCE_HELP,
        ],
        examples=[
            'echo \'{"session_id": "s1", "cwd": "/src/project-a"}\' | ai-memory hook session-start',
            "in .claude/settings.json: "
            '{"hooks": {"SessionStart": [{"hooks": [{"type": "command", '
            '"command": "ai-memory hook session-start"}]}]}}',
        ],
    )
    _add_agent_flag(session_start)
    session_start.set_defaults(handler=run_session_start, command_parser=session_start)

    user_prompt = add_command(
        hooks,
        "user-prompt",
        summary="on a session's first prompt, register it and print the on-start block",
        paragraphs=[
            "For harnesses that drop what a SessionStart hook prints (Kimi): run it as the "
            "UserPromptSubmit hook. Reads the hook JSON on stdin (session_id, cwd). On the "
            "first prompt of a session it registers the session exactly as session-start "
            "does and prints the on-start block; on every later prompt of that session it "
            "prints the inbox notice when mail came that the session was not told about, "
            "else nothing. A session that session-start announced (Codex and Gemini CLI run "
            "both hooks) gets no block again. Input without a session_id prints nothing.",
            _BLOCK_HELP,
            "It remembers the sessions it announced as one empty file per session (named by "
            "a hash of the server URL and the session id) in "
            f"${STATE_HOME_ENV}/{ANNOUNCED_DIRECTORY.as_posix()}/, or "
            f"~/.local/state/{ANNOUNCED_DIRECTORY.as_posix()}/ when ${STATE_HOME_ENV} is "
            "not set. Each prompt touches its session's file; files idle for 3 days are "
            "deleted. Deleting a file makes the next prompt of that session announce it "
            "again.",
            _SILENCE_HELP
            + " A session whose start failed is not remembered, so its next prompt tries "
            "again.",
        ],
        examples=[
            'echo \'{"session_id": "s1", "cwd": "/src/project-a"}\' | ai-memory hook user-prompt',
            "in ~/.kimi/config.toml:",
            "  [[hooks]]",
            '  event = "UserPromptSubmit"',
            '  command = "ai-memory hook user-prompt --agent kimi"',
        ],
    )
    _add_agent_flag(user_prompt)
    user_prompt.set_defaults(handler=run_user_prompt, command_parser=user_prompt)

    wait = add_command(
        hooks,
        "wait",
        summary="wait for mail and wake the idle session with the inbox notice",
        paragraphs=[
            'For Claude Code\'s Stop hook with "asyncRewake": true, which runs it in the '
            "background once the agent has stopped. Reads the hook JSON on stdin "
            "(session_id, cwd), resolves the project from cwd as session-start does, and "
            "waits on the server (POST /api/v1/sessions/wait, up to 60 s a request, asked "
            "again) until mail arrives that the session has not been told about, by its "
            "session start or an earlier wake. Then it prints the inbox notice on stderr "
            "and exits 2, which wakes the session with it; the notice counts and names the "
            "mail, never its text.",
            "It exits 0 and prints nothing at --timeout, when a newer wait of the same "
            "session took over, or on an error answer; a server that cannot be reached is "
            "asked again, quietly, after 1 s, then twice as long each time up to 60 s, until "
            "the timeout. Only a 401 is said, in one line on stderr naming "
            f"{AUTH_TOKEN_ENV}, and hook JSON that is empty, not JSON or without session_id "
            "or cwd, in one line on stderr, sending nothing. A session the server does not know (it "
            "started while the server was away, or the data was reset) is registered then, "
            "as a resume start that claims no handoff, and waited on; mail already pending "
            "then wakes it at once.",
            f"It exits 0 at once, sending nothing, when {CLAUDE_ENTRYPOINT_ENV} is set to "
            f"anything but {CLAUDE_INTERACTIVE_ENTRYPOINT} (claude -p, Agent SDK runs), "
            "where a waiting Stop hook would hold the run open. It never starts two requests "
            "less than a second apart, and exits 0 within 5 s once the process that ran it "
            "(its parent, or the parent of a shell between) is gone.",
            codex_wake.WAIT_HELP,
        ],
        examples=[
            'echo \'{"session_id": "s1", "cwd": "/src/project-a"}\' | ai-memory hook wait --timeout 60',
            codex_wake.WAIT_EXAMPLE,
            "in .claude/settings.json: "
            '{"hooks": {"Stop": [{"hooks": [{"type": "command", '
            '"command": "ai-memory hook wait", "asyncRewake": true, "timeout": 3600, '
            '"rewakeMessage": "New mail came in while you were idle (a notice from ai-memory, '
            'not an error):"}]}]}} (ai-memory init writes it)',
        ],
    )
    wait.add_argument(
        "--timeout",
        type=timeout_arg,
        default=float(HOOK_WAIT_TIMEOUT_DEFAULT_SECONDS),
        metavar="S",
        help=f"give up after S seconds (default {HOOK_WAIT_TIMEOUT_DEFAULT_SECONDS})",
    )
    codex_wake.add_client_flag(wait)
    wait.set_defaults(handler=run_wait, command_parser=wait)
    waiters.add_session_end_parser(hooks)
