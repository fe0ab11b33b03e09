"""``ai-memory brief``: print the current project's brief (its pinned, ``_rules/`` and
``_slots/`` pages, then pointers to the others), as ``memory_briefing`` gives it."""

from __future__ import annotations

import argparse
import sys

from aimemory_site.cli.common import (
    add_json_flag,
    add_scope_flags,
    api_client,
    current_scope,
    malformed,
    print_json,
    terminal_safe,
)
from aimemory_site.cli.help_text import SubParsers, add_command, scope_help
from aimemory_site.cli.scope import Scope
from aimemory_site.lib.limits import BRIEF_MAX_CHARS

BRIEFING_PATH = "/api/v1/briefing"


def format_no_brief(scope: Scope) -> str:
    return (
        f"No brief for {scope.label}: it has no pages yet. Pinned pages and those under "
        "_rules/ and _slots/ make it (ai-memory page write --pinned PATH BODY)."
    )


def run_brief(args: argparse.Namespace) -> int:
    scope = current_scope(args.workspace, args.project)
    query: dict[str, str | int] = {"workspace": scope.workspace, "project": scope.project}
    answer = api_client(scope).get(BRIEFING_PATH, query)
    brief = answer.get("brief")
    if brief is not None and not isinstance(brief, str):
        raise malformed(f"GET {BRIEFING_PATH}", "brief")
    if args.json:
        print_json(answer)
    elif brief is None:
        print(format_no_brief(scope))
    else:
        sys.stdout.write(terminal_safe(brief.rstrip("\n")) + "\n")
    return 0


def add_parser(subparsers: SubParsers) -> None:
    brief = add_command(
        subparsers,
        "brief",
        summary="print the current project's brief",
        paragraphs=[
            "Print the current project's brief: its pinned pages, then the pages under "
            "_rules/ and _slots/, each in full, then pointers to the most recently updated "
            f"other pages (at most {BRIEF_MAX_CHARS:,} characters in all). It is what a "
            "session start shows when .ai-memory.toml sets [briefing] "
            "inject_on_session_start = true, and what the memory_briefing tool gives an "
            "agent. With --json the server's whole answer (scope, pending message count, "
            "brief).",
            scope_help(),
        ],
        examples=["ai-memory brief", "ai-memory brief --workspace acme --project billing --json"],
    )
    add_scope_flags(brief)
    add_json_flag(brief)
    brief.set_defaults(handler=run_brief, command_parser=brief)
