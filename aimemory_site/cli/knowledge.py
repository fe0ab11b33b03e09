"""``ai-memory handoff create|list`` and ``ai-memory page write|read|list``: thin adapters
over the JSON API for a project's handoffs and pages (docs/reference.md#the-on-start-block).

Human output is for a person reading at a glance; ``--json`` prints the server's answer.
The ``format_*`` functions are pure, so their layout is tested without a server.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from aimemory_site.cli.client import ClientError
from aimemory_site.cli.common import (
    add_json_flag,
    add_scope_flags,
    answer_str,
    api_client,
    current_scope,
    malformed,
    print_json,
    terminal_safe,
)
from aimemory_site.cli.errors import CliError, UsageError
from aimemory_site.cli.help_text import SubParsers, add_command, scope_help
from aimemory_site.cli.messages import message_age
from aimemory_site.cli.scope import Scope
from aimemory_site.lib.limits import (
    HANDOFF_BODY_MAX_CHARS,
    HANDOFF_LIST_LIMIT,
    HANDOFF_TTL_DAYS_DEFAULT,
    PAGE_BODY_MAX_CHARS,
    PAGE_LIST_LIMIT,
)

HANDOFFS_PATH = "/api/v1/handoffs"
PAGES_PATH = "/api/v1/pages"
PAGE_READ_PATH = "/api/v1/pages/read"
# The widest state (``claimed``, ``expired``) and a typical age (``11 minutes ago``).
_STATE_WIDTH = 7
_AGE_WIDTH = 14
# A listing lines paths up to this width; a longer path only pushes its own line out.
_PATH_WIDTH_MAX = 48

Row = Mapping[str, Any]


# ---- formatting -------------------------------------------------------------------------


def format_handoff_created(handoff_id: str, scope: Scope) -> str:
    return (
        f"Wrote handoff {handoff_id} for {scope.label}: the next session started there "
        "receives it, once."
    )


def format_handoff_list(handoffs: Sequence[Row], *, scope: Scope, now: datetime) -> str:
    """One line per handoff, newest first: state, age, agent, size, id."""
    if not handoffs:
        return f"No handoffs for {scope.label}."
    agent_width = max(len(str(handoff["from_agent"])) for handoff in handoffs)
    lines = [f"Handoffs for {scope.label} (newest first):"]
    for handoff in handoffs:
        age = message_age(handoff["created_at"], now)
        lines.append(
            f"  {handoff['state']:<{_STATE_WIDTH}}  {age:<{_AGE_WIDTH}}  "
            f"{handoff['from_agent']:<{agent_width}}  {handoff['chars']:>6,} chars  "
            f"{handoff['id']}"
        )
    return "\n".join(lines)


def format_page_written(path: str, *, created: bool, pinned: bool, scope: Scope) -> str:
    verb = "Created" if created else "Replaced"
    return f"{verb} page {path} in {scope.label}{' (pinned)' if pinned else ''}."


def format_page_list(
    pages: Sequence[Row], *, scope: Scope, prefix: str | None, now: datetime
) -> str:
    """One line per page, in path order: a pin mark, path, size, when it was updated."""
    under = f" under {prefix!r}" if prefix else ""
    if not pages:
        return f"No pages{under} in {scope.label}."
    width = min(_PATH_WIDTH_MAX, max(len(str(page["path"])) for page in pages))
    lines = [f"Pages{under} in {scope.label} (path order; * pinned):"]
    for page in pages:
        mark = "*" if page["pinned"] else " "
        age = message_age(page["updated_at"], now)
        lines.append(f"  {mark} {page['path']:<{width}}  {page['chars']:>6,} chars  updated {age}")
    return "\n".join(lines)


def page_body_text(body: str) -> str:
    """A page body as ``page read`` prints it: terminal-safe, ending in one newline."""
    safe = terminal_safe(body)
    return safe if safe.endswith("\n") else safe + "\n"


# ---- server answers ---------------------------------------------------------------------


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _checked_rows(
    answer: Mapping[str, Any],
    key: str,
    request: str,
    *,
    text_fields: Sequence[str],
    flag_fields: Sequence[str] = (),
) -> list[Row]:
    listed = answer.get(key)
    if not isinstance(listed, list):
        raise malformed(request, key)
    rows: list[Row] = []
    for row in listed:
        valid = (
            isinstance(row, dict)
            and all(isinstance(row.get(field), str) for field in text_fields)
            and all(isinstance(row.get(field), bool) for field in flag_fields)
            and _is_count(row.get("chars"))
        )
        if not valid:
            raise ClientError(f"{request}: server answered with a malformed entry in {key!r}")
        rows.append(row)
    return rows


# ---- commands ---------------------------------------------------------------------------


def _body(given: str | None, kind: str) -> str:
    """BODY, else stdin; a usage error when there is none or it is blank."""
    if given is not None:
        body = given
    elif sys.stdin is None or sys.stdin.isatty():
        # Waiting on a terminal for EOF looks like a hang to a person who forgot the body.
        raise UsageError(f"no {kind} body: pass BODY or pipe it on stdin")
    else:
        try:
            body = sys.stdin.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"reading the {kind} body from stdin: {exc}") from exc
    if not body.strip():
        raise UsageError(f"the {kind} body is empty")
    return body


def _scope_query(scope: Scope) -> dict[str, str | int]:
    return {"workspace": scope.workspace, "project": scope.project}


def run_handoff_create(args: argparse.Namespace) -> int:
    body = _body(args.body, "handoff")
    scope = current_scope(args.workspace, args.project)
    payload = {"workspace": scope.workspace, "project": scope.project, "body": body}
    # Not retried: a create has no key the server could recognise, so a repeat after a
    # lost answer could leave two handoffs.
    answer = api_client(scope).post(HANDOFFS_PATH, payload)
    handoff_id = answer_str(answer, "handoff_id", f"POST {HANDOFFS_PATH}")
    if args.json:
        print_json(answer)
    else:
        print(format_handoff_created(handoff_id, scope))
    return 0


def run_handoff_list(args: argparse.Namespace) -> int:
    scope = current_scope(args.workspace, args.project)
    answer = api_client(scope).get(HANDOFFS_PATH, _scope_query(scope))
    handoffs = _checked_rows(
        answer,
        "handoffs",
        f"GET {HANDOFFS_PATH}",
        text_fields=("id", "state", "created_at", "from_agent"),
    )
    if args.json:
        print_json(answer)
    else:
        listing = format_handoff_list(handoffs, scope=scope, now=datetime.now(UTC))
        print(terminal_safe(listing))
    return 0


def run_page_write(args: argparse.Namespace) -> int:
    body = _body(args.body, "page")
    scope = current_scope(args.workspace, args.project)
    payload = {
        "workspace": scope.workspace,
        "project": scope.project,
        "path": args.path,
        "body": body,
        "pinned": args.pinned,
    }
    # A write sets the page at its path to this body, so a repeat changes nothing more.
    answer = api_client(scope).post_retrying_once(PAGES_PATH, payload)
    request = f"POST {PAGES_PATH}"
    path = answer_str(answer, "path", request)
    created = answer.get("created")
    if not isinstance(created, bool):
        raise malformed(request, "created")
    if args.json:
        print_json(answer)
    else:
        text = format_page_written(path, created=created, pinned=args.pinned, scope=scope)
        print(terminal_safe(text))
    return 0


def run_page_read(args: argparse.Namespace) -> int:
    scope = current_scope(args.workspace, args.project)
    query = {**_scope_query(scope), "path": args.path}
    # A 404 (no page at the path, or no such project) is a ClientError: one line, exit 1.
    answer = api_client(scope).get(PAGE_READ_PATH, query)
    request = f"GET {PAGE_READ_PATH}"
    page = answer.get("page")
    if not isinstance(page, dict) or not isinstance(page.get("body"), str):
        raise malformed(request, "page")
    if args.json:
        print_json(answer)
    else:
        sys.stdout.write(page_body_text(page["body"]))
    return 0


def run_page_list(args: argparse.Namespace) -> int:
    scope = current_scope(args.workspace, args.project)
    query = _scope_query(scope)
    if args.prefix:
        query["prefix"] = args.prefix
    answer = api_client(scope).get(PAGES_PATH, query)
    pages = _checked_rows(
        answer,
        "pages",
        f"GET {PAGES_PATH}",
        text_fields=("path", "updated_at"),
        flag_fields=("pinned",),
    )
    if args.json:
        print_json(answer)
    else:
        listing = format_page_list(pages, scope=scope, prefix=args.prefix, now=datetime.now(UTC))
        print(terminal_safe(listing))
    return 0


# ---- arguments --------------------------------------------------------------------------


def _add_handoff_parser(subparsers: SubParsers) -> None:
    handoff_parser = add_command(
        subparsers,
        "handoff",
        summary="leave a note for the project's next session, or list the notes",
        paragraphs=[
            "A handoff is a single-use note from one agent session to the next one in the "
            "same project: what was done, open questions, next steps, files touched. The "
            "next session start there (ai-memory hook session-start or user-prompt) claims "
            "the oldest open one and shows it first in its on-start block; no other session "
            "gets it again. Unclaimed handoffs expire (after "
            f"{HANDOFF_TTL_DAYS_DEFAULT} days unless the server sets "
            "AI_MEMORY_HANDOFF_TTL_DAYS).",
            scope_help(),
        ],
        examples=[
            'ai-memory handoff create "Done: export endpoint. Next: pagination tests."',
            "ai-memory handoff list",
        ],
    )
    commands = handoff_parser.add_subparsers(
        dest="handoff_command", metavar="{create,list}", required=True
    )

    create = add_command(
        commands,
        "create",
        summary="leave a handoff for the current project's next session",
        paragraphs=[
            "Write a handoff for the current project. The body is BODY, or stdin when BODY "
            f"is omitted; the server scrubs secrets from it and keeps {HANDOFF_BODY_MAX_CHARS:,} "
            "characters. Needs write access to the project.",
            "Sent once: a create is not repeated when no answer came back, as the repeat "
            "could leave the handoff twice. 'ai-memory handoff list' shows whether it "
            "arrived.",
            scope_help(),
        ],
        examples=[
            'ai-memory handoff create "Done: export endpoint. Next: pagination tests."',
            "git diff --stat | ai-memory handoff create",
        ],
    )
    add_scope_flags(create)
    add_json_flag(create)
    create.add_argument("body", nargs="?", metavar="BODY", help="the note (default: stdin)")
    create.set_defaults(handler=run_handoff_create, command_parser=create)

    listing = add_command(
        commands,
        "list",
        summary="list the current project's handoffs, newest first",
        paragraphs=[
            "List the current project's handoffs, newest first (at most "
            f"{HANDOFF_LIST_LIMIT}), one line each: state (open, claimed or expired), age, "
            "the agent that wrote it, its size and its id. Never shows a body and never "
            "claims anything.",
            scope_help(),
        ],
        examples=["ai-memory handoff list", "ai-memory handoff list --json"],
    )
    add_scope_flags(listing)
    add_json_flag(listing)
    listing.set_defaults(handler=run_handoff_list, command_parser=listing)


def _add_page_parser(subparsers: SubParsers) -> None:
    page_parser = add_command(
        subparsers,
        "page",
        summary="write, read or list the current project's knowledge pages",
        paragraphs=[
            "Pages are a project's knowledge, one Markdown body per path (segments of "
            "letters, digits, '.', '_' or '-' joined by '/'). Pinned pages, and pages under "
            "_rules/ and _slots/, make up the project brief, which a session start includes "
            "when .ai-memory.toml sets [briefing] inject_on_session_start = true. A page is "
            "never a message.",
            scope_help(),
        ],
        examples=[
            'ai-memory page write _rules/testing "Run make check before every commit."',
            "ai-memory page read _rules/testing",
            "ai-memory page list --prefix _rules/",
        ],
    )
    commands = page_parser.add_subparsers(
        dest="page_command", metavar="{write,read,list}", required=True
    )

    write = add_command(
        commands,
        "write",
        summary="write a page (replacing the body at its path)",
        paragraphs=[
            "Write the page at PATH in the current project, replacing its body if it "
            "exists. The body is BODY, or stdin when BODY is omitted; the server scrubs "
            f"secrets from it and keeps {PAGE_BODY_MAX_CHARS:,} characters. --pinned pins "
            "the page; a write without it leaves the page unpinned. Needs write access.",
            "A write is sent once more if no answer came back: writing the same body to the "
            "same path again changes nothing.",
            scope_help(),
        ],
        examples=[
            'ai-memory page write _rules/testing "Run make check before every commit."',
            "ai-memory page write --pinned overview < docs/overview.md",
        ],
    )
    write.add_argument("path", metavar="PATH", help="the page's path, such as notes/api")
    write.add_argument("--pinned", action="store_true", help="pin the page (into the brief)")
    add_scope_flags(write)
    add_json_flag(write)
    write.add_argument("body", nargs="?", metavar="BODY", help="the page (default: stdin)")
    write.set_defaults(handler=run_page_write, command_parser=write)

    read = add_command(
        commands,
        "read",
        summary="print a page's body",
        paragraphs=[
            "Print the body of the page at PATH in the current project; with --json the "
            "page with its metadata. Exits 1 with a message when there is no page there.",
            scope_help(),
        ],
        examples=["ai-memory page read _rules/testing", "ai-memory page read notes/api --json"],
    )
    read.add_argument("path", metavar="PATH", help="the page's path")
    add_scope_flags(read)
    add_json_flag(read)
    read.set_defaults(handler=run_page_read, command_parser=read)

    listing = add_command(
        commands,
        "list",
        summary="list the current project's pages, in path order",
        paragraphs=[
            f"List the current project's pages in path order (at most {PAGE_LIST_LIMIT}), one "
            "line each: a * when pinned, the path, its size and when it was last updated. "
            "With --prefix only the paths that start with P. Never shows a body.",
            scope_help(),
        ],
        examples=["ai-memory page list", "ai-memory page list --prefix _rules/"],
    )
    listing.add_argument("--prefix", metavar="P", help="only paths that start with P")
    add_scope_flags(listing)
    add_json_flag(listing)
    listing.set_defaults(handler=run_page_list, command_parser=listing)


def add_parsers(subparsers: SubParsers) -> None:
    _add_handoff_parser(subparsers)
    _add_page_parser(subparsers)
