"""``ai-memory message search QUERY`` and ``ai-memory message thread ID``: arguments, exit
codes, the real server's answers, and the human layout (docs/reference.md#search-and-threads).

Behaviour against a server runs the real one (``live_server``); the layout is checked on
the pure ``format_*`` functions with rows shaped like the API's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.main import build_parser
from aimemory_site.cli.messages import SEARCH_ONE_BOX, format_search_hits, format_thread
from aimemory_site.cli.scope import Scope
from tests.cli.conftest import MakeRepo, RunCli

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SCOPE_B = Scope("default", "project-b")
FIRST = "0190f3c2-7b1e-7000-8000-000000000001"
SECOND = "0190f3c2-7b1e-7000-8000-000000000002"


def api_row(**fields: Any) -> dict[str, Any]:
    """A message without its body, as a search or a thread answers it."""
    row = {
        "id": FIRST,
        "state": "claimed",
        "to_workspace": "default",
        "to_project": "project-b",
        "from_workspace": "default",
        "from_project": "project-a",
        "from_agent": "claude",
        "subject": "export endpoint",
        "in_reply_to": None,
        "created_at": (NOW - timedelta(minutes=5)).isoformat(),
    }
    row.update(fields)
    return row


# ---- arguments and exit codes -----------------------------------------------------------


@pytest.mark.parametrize(("given", "sent"), [("500", 100), ("101", 100), ("0", 1), ("-3", 1)])
def test_the_limit_is_clamped_like_the_server_clamps_it(given: str, sent: int) -> None:
    args = build_parser().parse_args(["message", "search", "x", "--limit", given])

    assert args.limit == sent


def test_the_limit_defaults_to_20() -> None:
    assert build_parser().parse_args(["message", "search", "x"]).limit == 20


def test_outbox_and_all_together_is_an_argument_error(offline_cli: RunCli) -> None:
    result = offline_cli("message", "search", "export", "--outbox", "--all")

    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].endswith(f"error: {SEARCH_ONE_BOX}")


@pytest.mark.parametrize("command", [["search"], ["thread"]])
def test_the_query_or_id_is_required(offline_cli: RunCli, command: list[str]) -> None:
    assert offline_cli("message", *command).returncode == 2


@pytest.mark.parametrize("command", [["search"], ["thread"]])
def test_help_explains_each_command_with_an_example(
    offline_cli: RunCli, command: list[str]
) -> None:
    result = offline_cli("message", *command, "--help")

    assert result.returncode == 0
    assert "examples:" in result.stdout
    assert f"ai-memory message {command[0]} " in result.stdout


@pytest.mark.parametrize("command", [["search", "export"], ["thread", FIRST]])
def test_an_unreachable_server_is_exit_1_with_one_line(
    offline_cli: RunCli, unreachable_url: str, command: list[str]
) -> None:
    result = offline_cli("message", *command)

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        f"ai-memory: cannot reach ai-memory server at {unreachable_url}"
    )
    assert len(result.stderr.splitlines()) == 1


# ---- against the real server ------------------------------------------------------------


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


def _registered(cli: RunCli, make_repo: MakeRepo, name: str) -> Path:
    """The repository ``name``, registered on the server by its session-start hook."""
    repo = make_repo(name)
    started = cli("hook", "session-start", cwd=repo, stdin=f'{{"session_id": "{name}-1"}}')
    assert started.returncode == 0, started.stderr
    return repo


@pytest.fixture
def repos(cli: RunCli, make_repo: MakeRepo) -> tuple[Path, Path]:
    """The repositories ``project-a`` and ``project-b``, both registered."""
    return _registered(cli, make_repo, "project-a"), _registered(cli, make_repo, "project-b")


def _send(cli: RunCli, cwd: Path, to: str, *args: str) -> str:
    sent = cli("message", "send", "--to-workspace", "default", "--to-project", to, *args, cwd=cwd)
    assert sent.returncode == 0, sent.stderr
    return sent.stdout.split()[2]


@pytest.mark.django_db(transaction=True)
def test_search_shows_each_hit_in_two_lines(cli: RunCli, repos: tuple[Path, Path]) -> None:
    repo_a, repo_b = repos
    message_id = _send(
        cli, repo_a, "project-b", "--subject", "rollout", "Please deploy the export endpoint."
    )
    cli("message", "pop", cwd=repo_b)

    found = cli("message", "search", "deploying", cwd=repo_b)
    nothing = cli("message", "search", "invoices", cwd=repo_b)

    assert found.returncode == 0, found.stderr
    assert found.stdout == (
        "Messages in default/project-b's inbox matching 'deploying' (best match first):\n"
        f"  {message_id}  claimed  default/project-a -> default/project-b  rollout\n"
        "    Please [deploy] the export endpoint.\n"
    )
    assert nothing.stdout == "No messages in default/project-b's inbox match 'invoices'.\n"


@pytest.mark.django_db(transaction=True)
def test_outbox_and_all_choose_the_box(cli: RunCli, repos: tuple[Path, Path]) -> None:
    repo_a, repo_b = repos
    received = _send(cli, repo_a, "project-b", "export request")
    sent = _send(cli, repo_b, "project-a", "export answer")

    def found(*flags: str) -> list[str]:
        result = cli("message", "search", "export", "--json", *flags, cwd=repo_b)
        assert result.returncode == 0, result.stderr
        return [hit["id"] for hit in json.loads(result.stdout)["messages"]]

    assert found() == [received]
    assert found("--outbox") == [sent]
    assert sorted(found("--all")) == sorted([received, sent])
    assert len(found("--all", "--limit", "1")) == 1


@pytest.mark.django_db(transaction=True)
def test_json_prints_the_servers_answer(cli: RunCli, repos: tuple[Path, Path]) -> None:
    repo_a, repo_b = repos
    message_id = _send(cli, repo_a, "project-b", "Add an export endpoint")

    answer = json.loads(cli("message", "search", "export", "--json", cwd=repo_b).stdout)

    [hit] = answer["messages"]
    assert hit["id"] == message_id
    assert "body" not in hit
    assert "[export]" in hit["snippet"]


@pytest.mark.django_db(transaction=True)
def test_a_query_over_500_characters_is_exit_1_with_the_servers_detail(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    result = cli("message", "search", "x" * 501, cwd=repos[1])

    assert result.returncode == 1
    assert result.stderr.startswith("ai-memory: GET /api/v1/messages/search: server returned 400: ")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.django_db(transaction=True)
def test_thread_shows_the_chain_oldest_first(cli: RunCli, repos: tuple[Path, Path]) -> None:
    repo_a, repo_b = repos
    question = _send(cli, repo_a, "project-b", "--subject", "port?", "Which port?")
    answer = _send(cli, repo_b, "project-a", "--in-reply-to", question, "Port 8080.")

    shown = cli("message", "thread", answer, cwd=repo_b)
    as_json = json.loads(cli("message", "thread", question, "--json", cwd=repo_a).stdout)
    unknown = cli("message", "thread", "0190b1d8-0000-7000-8000-000000000000", cwd=repo_b)

    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (
        f"Thread of {answer} in default/project-b (oldest first):\n"
        f"  {question}  pending  default/project-a -> default/project-b  port?\n"
        "    just now\n"
        f"* {answer}  pending  default/project-b -> default/project-a  (no subject)\n"
        f"    just now, in reply to {question}\n"
    )
    assert [m["id"] for m in as_json["messages"]] == [question, answer]
    assert all("body" not in m for m in as_json["messages"])
    assert unknown.returncode == 1
    assert "server returned 404" in unknown.stderr


# ---- layout -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("box", "words"), [("inbox", "inbox"), ("outbox", "outbox"), ("all", "inbox and outbox")]
)
def test_no_hits_says_where_it_looked(box: str, words: str) -> None:
    assert format_search_hits([], query="deploy", box=box, scope=SCOPE_B) == (
        f"No messages in default/project-b's {words} match 'deploy'."
    )


def test_a_hit_is_its_row_then_its_snippet_on_one_line() -> None:
    hits = [
        api_row(snippet="…first line\nthe [deploy]\tplan…"),
        api_row(id=SECOND, state="pending", subject=None, snippet="[deploy] it"),
    ]

    assert format_search_hits(hits, query="deploy", box="all", scope=SCOPE_B) == (
        "Messages in default/project-b's inbox and outbox matching 'deploy' (best match first):\n"
        f"  {FIRST}  claimed  default/project-a -> default/project-b  export endpoint\n"
        "    …first line the [deploy] plan…\n"
        f"  {SECOND}  pending  default/project-a -> default/project-b  (no subject)\n"
        "    [deploy] it"
    )


def test_a_thread_marks_the_message_asked_about_and_what_each_answers() -> None:
    messages = [
        api_row(created_at=(NOW - timedelta(days=2)).isoformat()),
        api_row(id=SECOND, in_reply_to=FIRST, subject="re: export\nendpoint"),
    ]

    assert format_thread(messages, message_id=SECOND, scope=SCOPE_B, now=NOW) == (
        f"Thread of {SECOND} in default/project-b (oldest first):\n"
        f"  {FIRST}  claimed  default/project-a -> default/project-b  export endpoint\n"
        "    2 days ago\n"
        f"* {SECOND}  claimed  default/project-a -> default/project-b  re: export endpoint\n"
        f"    5 minutes ago, in reply to {FIRST}"
    )


def test_an_empty_thread_says_so() -> None:
    assert format_thread([], message_id=FIRST, scope=SCOPE_B, now=NOW) == (
        f"No messages of default/project-b in the thread of {FIRST}."
    )
