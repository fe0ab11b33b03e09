"""``ai-memory hook session-start``: register an agent's session and print its on-start block.

Harnesses (Claude Code, Codex) run this at every session start and add its stdout to the
agent's context. It must never stand in the way of that start: whatever fails (no server,
an error answer, unreadable input), it prints nothing and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from aimemory_site.cli.client import ApiClient
from aimemory_site.cli.errors import CliError
from aimemory_site.cli.help_text import SubParsers, add_command
from aimemory_site.cli.scope import resolve_scope
from aimemory_site.lib.agents import AGENT_KINDS, AGENT_OTHER

SESSIONS_PATH = "/api/v1/sessions"
# A session start waits for this at most; an agent's start matters more than its notice.
HOOK_TIMEOUT_SECONDS = 5.0
# Where each harness keeps its transcripts, which is how the hook input tells them apart.
TRANSCRIPT_DIRECTORIES = {"/.claude/": "claude", "/.codex/": "codex"}


def read_hook_input(stream: TextIO | None) -> dict[str, Any]:
    """The harness's hook JSON; anything unreadable counts as no input at all."""
    if stream is None or stream.isatty():
        return {}
    try:
        parsed = json.loads(stream.read() or "{}")
    except (OSError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _text_field(hook_input: Mapping[str, Any], key: str) -> str:
    value = hook_input.get(key)
    return value.strip() if isinstance(value, str) else ""


def detect_agent(hook_input: Mapping[str, Any], environ: Mapping[str, str]) -> str:
    """``claude``, ``codex`` or ``other``, from the transcript path or Claude's hook env."""
    transcript = _text_field(hook_input, "transcript_path").replace("\\", "/")
    for directory, agent in TRANSCRIPT_DIRECTORIES.items():
        if directory in transcript:
            return agent
    # Claude Code sets this for every hook command it runs.
    if environ.get("CLAUDE_PROJECT_DIR"):
        return "claude"
    return AGENT_OTHER


def session_payload(
    hook_input: Mapping[str, Any], environ: Mapping[str, str], agent_override: str | None
) -> dict[str, Any]:
    """The ``POST /api/v1/sessions`` body for this hook input; raises ScopeError."""
    cwd_text = _text_field(hook_input, "cwd")
    cwd = Path(cwd_text) if cwd_text else Path.cwd()
    scope = resolve_scope(cwd, environ)
    payload: dict[str, Any] = {
        "workspace": scope.workspace,
        "project": scope.project,
        # A harness that sends no id still gets its project registered, as a new session.
        "session_id": _text_field(hook_input, "session_id") or f"cli-{uuid.uuid4()}",
        "agent": agent_override or detect_agent(hook_input, environ),
    }
    if scope.marker is not None and scope.marker.inject_brief:
        payload["inject_brief"] = True
    return payload


def run_session_start(args: argparse.Namespace) -> int:
    hook_input = read_hook_input(sys.stdin)
    try:
        payload = session_payload(hook_input, os.environ, args.agent)
        client = ApiClient.from_environment(timeout_seconds=HOOK_TIMEOUT_SECONDS)
        answer = client.post(SESSIONS_PATH, payload)
    except CliError:
        return 0
    context = answer.get("context")
    if isinstance(context, str) and context.strip():
        print(context.rstrip("\n"))
    return 0


def add_parser(subparsers: SubParsers) -> None:
    hook_parser = add_command(
        subparsers,
        "hook",
        summary="lifecycle hooks for agent harnesses",
        paragraphs=["Commands that agent harnesses run on lifecycle events."],
        examples=["ai-memory hook session-start < hook-input.json"],
    )
    hooks = hook_parser.add_subparsers(
        dest="hook_command", metavar="{session-start}", required=True
    )
    session_start = add_command(
        hooks,
        "session-start",
        summary="register the session and print the on-start block",
        paragraphs=[
            "Run by the harness when an agent session starts. Reads the hook JSON on stdin "
            "(session_id, cwd, transcript_path), resolves the project from cwd as the message "
            "commands do, registers the session (creating the project if new) and prints the "
            "on-start block: a pending handoff, the project brief when .ai-memory.toml sets "
            "[briefing] inject_on_session_start = true, and the inbox notice when mail waits.",
            "It never blocks a session: when the server cannot be reached or answers an "
            "error, it prints nothing and exits 0.",
        ],
        examples=[
            'echo \'{"session_id": "s1", "cwd": "/src/project-a"}\' | ai-memory hook session-start',
            "in .claude/settings.json: "
            '{"hooks": {"SessionStart": [{"hooks": [{"type": "command", '
            '"command": "ai-memory hook session-start"}]}]}}',
        ],
    )
    session_start.add_argument(
        "--agent",
        metavar="NAME",
        help=f"the harness ({', '.join(AGENT_KINDS)}); default: detected from the hook input",
    )
    session_start.set_defaults(handler=run_session_start, command_parser=session_start)
