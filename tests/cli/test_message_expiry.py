"""``ai-memory message send --expires-in D`` and expiries in the human output
(docs/reference.md#cli): the duration forms, the range the server checks, and the lines
that say when a message expires."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.main import build_parser
from aimemory_site.cli.messages import (
    format_message_list,
    format_popped,
    format_sent,
    format_status,
)
from aimemory_site.lib.durations import duration_seconds, duration_text
from messaging.models import Message
from tests.cli.test_message_commands import NOW, SCOPE_B, MakeRepo, RunCli, api_message

SEND_TO_B = ("message", "send", "--to-workspace", "default", "--to-project", "project-b")
EXPIRES = "2026-03-01T14:00:00Z"


@pytest.mark.parametrize(
    ("given", "seconds"),
    [("90s", 90), ("45m", 2700), ("2h", 7200), ("7d", 604_800), ("3600", 3600), (" 60 ", 60)],
)
def test_every_duration_form_is_read_as_seconds(given: str, seconds: int) -> None:
    assert duration_seconds(given) == seconds
    args = build_parser().parse_args([*SEND_TO_B, "--expires-in", given, "hello"])
    assert args.expires_in == seconds


@pytest.mark.parametrize("given", ["", "2 hours", "1h30m", "-5m", "1.5h", "2H", "h", "9999999999"])
def test_a_duration_in_no_known_form_is_refused(given: str) -> None:
    with pytest.raises(ValueError, match="90s, 45m, 2h, 7d"):
        duration_seconds(given)


@pytest.mark.parametrize(("seconds", "text"), [(7200, "2h"), (90, "90s"), (604_800, "7d")])
def test_a_duration_is_said_in_its_largest_exact_unit(seconds: int, text: str) -> None:
    assert duration_text(seconds) == text


def test_the_human_output_shows_an_expiry_only_when_there_is_one() -> None:
    expiring = api_message(expires_at=EXPIRES)
    plain = api_message(expires_at=None)
    listing = format_message_list([expiring, plain], box="inbox", scope=SCOPE_B, now=NOW)

    assert listing.count("expires:") == 1
    assert f"    expires: {EXPIRES}" in listing
    assert f"  expires: {EXPIRES}" in format_popped(expiring, "NOTICE")
    assert "expires" not in format_popped(plain, "NOTICE")
    assert f"  expires: {EXPIRES}" in format_status(expiring)
    assert f"  expired: {EXPIRES}" in format_status({**expiring, "state": "expired"})
    assert "expir" not in format_status(plain)
    sent = format_sent("ID", SCOPE_B, "default", "project-a", expires_in_seconds=7200)
    assert (
        sent
        == "Sent message ID from default/project-b to default/project-a (expires unclaimed in 2h)."
    )


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


@pytest.fixture
def project_b(cli: RunCli, make_repo: MakeRepo) -> Path:
    repo = make_repo("project-b")
    assert cli("hook", "session-start", cwd=repo, stdin='{"session_id": "b-1"}').returncode == 0
    return repo


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.django_db(transaction=True)
def test_expires_in_reaches_the_server_and_an_expired_message_reads_expired(
    cli: RunCli, project_b: Path
) -> None:
    sent = cli(*SEND_TO_B, "--expires-in", "2h", "--json", "export please", cwd=project_b)
    message_id = json.loads(sent.stdout)["message_id"]
    listed = json.loads(cli("message", "list", "--json", cwd=project_b).stdout)
    human = cli("message", "list", cwd=project_b).stdout
    Message.objects.filter(pk=message_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    status = json.loads(cli("message", "status", message_id, "--json", cwd=project_b).stdout)
    status_text = cli("message", "status", message_id, cwd=project_b).stdout
    after = cli("message", "list", cwd=project_b).stdout

    [message] = listed["messages"]
    assert _moment(message["expires_at"]) - _moment(message["created_at"]) == timedelta(hours=2)
    assert f"expires: {message['expires_at']}" in human
    assert status["state"] == "expired"
    assert f"Message {message_id}: expired" in status_text
    assert "  expired: " in status_text
    assert after == "No pending inbox messages for default/project-b.\n"


@pytest.mark.django_db(transaction=True)
def test_an_expiry_out_of_range_is_the_servers_invalid_expiry_and_exit_1(
    cli: RunCli, project_b: Path
) -> None:
    result = cli(*SEND_TO_B, "--expires-in", "59s", "hello", cwd=project_b)

    assert result.returncode == 1
    assert "server returned 400" in result.stderr
    assert "expires_in_seconds must be a whole number of seconds, 60..2592000" in result.stderr
    assert not Message.objects.exists()


def test_an_unreadable_duration_is_an_argument_error(offline_cli: RunCli) -> None:
    result = offline_cli(*SEND_TO_B, "--expires-in", "soon", "hello")

    assert result.returncode == 2
    assert "argument --expires-in: invalid duration 'soon'" in result.stderr
