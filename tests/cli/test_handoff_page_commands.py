"""``ai-memory handoff create|list`` and ``ai-memory page write|read|list``: arguments,
exit codes, the human layout, and round trips through the real server."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.knowledge import (
    format_handoff_list,
    format_page_list,
    page_body_text,
)
from aimemory_site.cli.scope import Scope
from aimemory_site.onstart.services import scope_line
from projects.models import Handoff, Page

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE_A = Scope("default", "project-a")
HANDOFF_ID = "0190f3c2-7b1e-7000-8000-000000000001"


def hook_input(session_id: str, cwd: Path) -> str:
    return json.dumps({"session_id": session_id, "cwd": str(cwd)})


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


# ---- arguments and exit codes -----------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["handoff", "create"], ["page", "write", "notes/a"]],
    ids=["handoff", "page"],
)
@pytest.mark.parametrize(("body_args", "stdin"), [(["  "], ""), ([], ""), ([], "\n\n")])
def test_an_empty_body_is_an_argument_error(
    offline_cli: RunCli, command: list[str], body_args: list[str], stdin: str
) -> None:
    result = offline_cli(*command, *body_args, stdin=stdin)

    assert result.returncode == 2
    kind = command[0]
    assert result.stderr.splitlines()[-1].endswith(f"error: the {kind} body is empty")


@pytest.mark.parametrize(
    "command", [["handoff"], ["page"], ["page", "read"], ["page", "write"]], ids=" ".join
)
def test_a_missing_subcommand_or_path_is_an_argument_error(
    offline_cli: RunCli, command: list[str]
) -> None:
    assert offline_cli(*command).returncode == 2


@pytest.mark.parametrize(
    "command",
    [
        ["handoff"],
        ["handoff", "create"],
        ["handoff", "list"],
        ["page"],
        ["page", "write"],
        ["page", "read"],
        ["page", "list"],
        ["hook", "user-prompt"],
    ],
    ids=" ".join,
)
def test_help_explains_each_command_with_an_example(
    offline_cli: RunCli, command: list[str]
) -> None:
    result = offline_cli(*command, "--help")

    assert result.returncode == 0
    assert "example" in result.stdout
    assert f"ai-memory {' '.join(command)}" in result.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["handoff", "create", "a note"],
        ["handoff", "list"],
        ["page", "write", "notes/a", "text"],
        ["page", "read", "notes/a"],
        ["page", "list"],
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_unreachable_server_is_exit_1_with_one_line(
    offline_cli: RunCli, unreachable_url: str, command: list[str]
) -> None:
    result = offline_cli(*command)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"ai-memory: cannot reach ai-memory server at {unreachable_url}: Connection refused "
        "(the server may not be running: start it with `ai-memory serve`)\n"
    )


# ---- layout -----------------------------------------------------------------------------


def test_handoff_list_has_one_line_per_handoff() -> None:
    handoffs = [
        {
            "id": HANDOFF_ID,
            "state": "open",
            "created_at": (NOW - timedelta(minutes=5)).isoformat(),
            "from_agent": "claude",
            "chars": 1234,
        },
        {
            "id": "0190f3c2-7b1e-7000-8000-000000000002",
            "state": "claimed",
            "created_at": (NOW - timedelta(days=2)).isoformat(),
            "from_agent": "other",
            "chars": 12,
        },
    ]

    assert format_handoff_list(handoffs, scope=SCOPE_A, now=NOW).splitlines() == [
        "Handoffs for default/project-a (newest first):",
        f"  open     5 minutes ago   claude   1,234 chars  {HANDOFF_ID}",
        "  claimed  2 days ago      other       12 chars  0190f3c2-7b1e-7000-8000-000000000002",
    ]
    assert format_handoff_list([], scope=SCOPE_A, now=NOW) == "No handoffs for default/project-a."


def test_page_list_marks_pinned_pages() -> None:
    pages = [
        {"path": "_rules/testing", "pinned": False, "updated_at": NOW.isoformat(), "chars": 40},
        {"path": "overview", "pinned": True, "updated_at": NOW.isoformat(), "chars": 2000},
    ]

    assert format_page_list(pages, scope=SCOPE_A, prefix=None, now=NOW).splitlines() == [
        "Pages in default/project-a (path order; * pinned):",
        "    _rules/testing      40 chars  updated just now",
        "  * overview         2,000 chars  updated just now",
    ]
    assert (
        format_page_list([], scope=SCOPE_A, prefix="_slots/", now=NOW)
        == "No pages under '_slots/' in default/project-a."
    )


def test_a_page_body_prints_terminal_safe_with_one_final_newline() -> None:
    assert page_body_text("line\n\x1b]0;owned\x07") == "line\n\ufffd]0;owned\ufffd\n"
    assert page_body_text("done\n") == "done\n"


# ---- against the real server ------------------------------------------------------------


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


@pytest.fixture
def project_a(cli: RunCli, make_repo: MakeRepo) -> Path:
    """The repository ``project-a``, registered on the server by its session-start hook."""
    repo = make_repo("project-a")
    ok(cli("hook", "session-start", cwd=repo, stdin=hook_input("a-0", repo)))
    return repo


@pytest.mark.django_db(transaction=True)
def test_handoff_create_then_list(cli: RunCli, project_a: Path) -> None:
    created = ok(cli("handoff", "create", "Done: export. Next: tests.", cwd=project_a))
    handoff_id = str(Handoff.objects.get().id)
    piped = json.loads(ok(cli("handoff", "create", "--json", cwd=project_a, stdin="From stdin.\n")))

    listed = ok(cli("handoff", "list", cwd=project_a))
    as_json = json.loads(ok(cli("handoff", "list", "--json", cwd=project_a)))

    assert created == (
        f"Wrote handoff {handoff_id} for default/project-a: the next session started there "
        "receives it, once.\n"
    )
    assert set(piped) == {"handoff_id"}
    lines = listed.splitlines()
    assert lines[0] == "Handoffs for default/project-a (newest first):"
    assert lines[1].split() == ["open", "just", "now", "other", "12", "chars", piped["handoff_id"]]
    assert lines[2].split() == ["open", "just", "now", "other", "26", "chars", handoff_id]
    assert [row["id"] for row in as_json["handoffs"]] == [piped["handoff_id"], handoff_id]
    assert "Done: export" not in listed


@pytest.mark.django_db(transaction=True)
def test_a_session_start_gets_the_handoff_first_and_only_once(cli: RunCli, project_a: Path) -> None:
    ok(cli("handoff", "create", "Done: export. Next: tests.", cwd=project_a))
    last_line = scope_line(workspace="default", project="project-a")

    first = ok(cli("hook", "session-start", cwd=project_a, stdin=hook_input("a-1", project_a)))
    second = ok(cli("hook", "session-start", cwd=project_a, stdin=hook_input("a-2", project_a)))

    assert first.startswith("🤝 ai-memory handoff for default/project-a, written just now by ")
    assert first.splitlines()[1] == "Done: export. Next: tests."
    assert first.endswith(f"\n\n{last_line}\n")
    assert second == f"{last_line}\n"
    state = ok(cli("handoff", "list", cwd=project_a)).splitlines()[1].split()[0]
    assert state == "claimed"


@pytest.mark.django_db(transaction=True)
def test_handoff_for_an_unknown_project_is_exit_1(cli: RunCli, tmp_path: Path) -> None:
    result = cli("handoff", "create", "--workspace", "default", "--project", "nowhere", "x")

    assert result.returncode == 1
    assert result.stderr.startswith("ai-memory: POST /api/v1/handoffs: server returned 404")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.django_db(transaction=True)
def test_page_write_read_list_round_trip(cli: RunCli, project_a: Path) -> None:
    created = ok(cli("page", "write", "_rules/testing", "Run make check.", cwd=project_a))
    replaced = ok(
        cli("page", "write", "_rules/testing", cwd=project_a, stdin="Run make check first.\n")
    )
    pinned = json.loads(
        ok(cli("page", "write", "--pinned", "overview", "# Overview", "--json", cwd=project_a))
    )

    read = ok(cli("page", "read", "_rules/testing", cwd=project_a))
    read_json = json.loads(ok(cli("page", "read", "overview", "--json", cwd=project_a)))
    listed = ok(cli("page", "list", cwd=project_a))
    under_rules = json.loads(
        ok(cli("page", "list", "--prefix", "_rules/", "--json", cwd=project_a))
    )

    assert created == "Created page _rules/testing in default/project-a.\n"
    assert replaced == "Replaced page _rules/testing in default/project-a.\n"
    assert pinned == {"path": "overview", "created": True}
    assert read == "Run make check first.\n"
    assert read_json["page"]["body"] == "# Overview"
    assert read_json["page"]["pinned"] is True
    assert listed.splitlines() == [
        "Pages in default/project-a (path order; * pinned):",
        "    _rules/testing      22 chars  updated just now",
        "  * overview            10 chars  updated just now",
    ]
    assert [page["path"] for page in under_rules["pages"]] == ["_rules/testing"]
    assert Page.objects.get(path="overview").pinned


@pytest.mark.django_db(transaction=True)
def test_reading_a_page_that_does_not_exist_is_exit_1_with_one_line(
    cli: RunCli, project_a: Path
) -> None:
    result = cli("page", "read", "notes/missing", cwd=project_a)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "ai-memory: GET /api/v1/pages/read: server returned 404: no page at 'notes/missing'\n"
    )


@pytest.mark.django_db(transaction=True)
def test_an_invalid_page_path_is_exit_1(cli: RunCli, project_a: Path) -> None:
    result = cli("page", "write", "../escape", "text", cwd=project_a)

    assert result.returncode == 1
    assert "server returned 400: invalid page path" in result.stderr
    assert not Page.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_an_empty_page_list_says_so(cli: RunCli, project_a: Path) -> None:
    assert ok(cli("page", "list", cwd=project_a)) == "No pages in default/project-a.\n"
