"""``ai-memory hook wait``: Claude Code's asyncRewake Stop hook. Exit 2 with the inbox
notice on stderr wakes the idle session on new mail; every other end is exit 0 and
silence (timeout, a newer wait, no server), except a 401's one line."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.client import ApiClient
from aimemory_site.cli.hook import token_problem
from messaging.notices import inbox_notice
from tests.cli.conftest import RunCli, SpawnCli
from tests.conftest import SEND

pytestmark = pytest.mark.django_db(transaction=True)

MakeRepo = Callable[[str], Path]
NOTICE_1 = inbox_notice(count=1, workspace="default", project="project-b")
# A hung hook still fails the test, but long after any of them should have ended.
EXIT_WITHIN_SECONDS = 30


def stop_input(session_id: str, cwd: Path) -> str:
    """The JSON Claude Code writes to a Stop hook's stdin (the fields the hook reads)."""
    return json.dumps(
        {
            "session_id": session_id,
            "cwd": str(cwd),
            "hook_event_name": "Stop",
            "stop_hook_active": False,
        }
    )


@pytest.fixture
def served(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        yield client


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


@pytest.fixture
def spawn(spawn_cli: Callable[[str], SpawnCli], live_server: LiveServer) -> SpawnCli:
    return spawn_cli(live_server.url)


@pytest.fixture
def repo_b(cli: RunCli, make_repo: MakeRepo) -> Path:
    """Repository ``project-b``, whose session ``b-1`` has started; project-a exists too."""
    repo_a, repo = make_repo("project-a"), make_repo("project-b")
    for session_id, cwd in (("a-1", repo_a), ("b-1", repo)):
        started = cli("hook", "session-start", cwd=cwd, stdin=stop_input(session_id, cwd))
        assert started.returncode == 0, started.stderr
    return repo


def send(served: httpx.Client) -> None:
    response = served.post("/api/v1/messages", json=SEND)
    assert response.status_code == 201, response.text


def ended(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    stdout, stderr = process.communicate(timeout=EXIT_WITHIN_SECONDS)
    return process.returncode, stdout, stderr


def test_new_mail_wakes_the_session_with_the_notice_and_exit_2(
    spawn: SpawnCli, served: httpx.Client, repo_b: Path, parked: threading.Event
) -> None:
    waiting = spawn("hook", "wait", cwd=repo_b, stdin=stop_input("b-1", repo_b))
    assert parked.wait(EXIT_WITHIN_SECONDS)

    send(served)

    assert ended(waiting) == (2, "", NOTICE_1 + "\n")


def test_mail_the_session_was_told_of_does_not_wake_it(
    cli: RunCli, served: httpx.Client, repo_b: Path
) -> None:
    send(served)
    # The session's next start announces it (its notice counts as told).
    restarted = cli("hook", "session-start", cwd=repo_b, stdin=stop_input("b-1", repo_b))
    assert NOTICE_1 in restarted.stdout

    result = cli("hook", "wait", "--timeout", "1", cwd=repo_b, stdin=stop_input("b-1", repo_b))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_mail_that_came_before_the_wait_wakes_at_once(
    cli: RunCli, served: httpx.Client, repo_b: Path
) -> None:
    send(served)

    result = cli("hook", "wait", "--timeout", "60", cwd=repo_b, stdin=stop_input("b-1", repo_b))

    assert (result.returncode, result.stdout, result.stderr) == (2, "", NOTICE_1 + "\n")


def test_a_newer_wait_ends_the_older_one_silently(
    spawn: SpawnCli, cli: RunCli, repo_b: Path, parked: threading.Event
) -> None:
    older = spawn("hook", "wait", "--timeout", "600", cwd=repo_b, stdin=stop_input("b-1", repo_b))
    assert parked.wait(EXIT_WITHIN_SECONDS)

    newer = cli("hook", "wait", "--timeout", "1", cwd=repo_b, stdin=stop_input("b-1", repo_b))

    assert ended(older) == (0, "", "")
    assert (newer.returncode, newer.stdout, newer.stderr) == (0, "", "")


def test_a_session_the_server_does_not_know_waits_for_nothing(cli: RunCli, repo_b: Path) -> None:
    result = cli("hook", "wait", cwd=repo_b, stdin=stop_input("never-started", repo_b))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_input_without_a_session_id_waits_for_nothing(cli: RunCli, repo_b: Path) -> None:
    result = cli("hook", "wait", cwd=repo_b, stdin=json.dumps({"cwd": str(repo_b)}))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_a_missing_token_is_one_line_on_stderr_and_exit_0(
    cli: RunCli, repo_b: Path, live_server: LiveServer, auth_on: str
) -> None:
    result = cli("hook", "wait", cwd=repo_b, stdin=stop_input("b-1", repo_b))

    expected = token_problem(ApiClient(live_server.url)) + "\n"
    assert (result.returncode, result.stdout, result.stderr) == (0, "", expected)


def test_an_unreachable_server_is_retried_quietly_until_the_timeout(
    offline_cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("project-b")
    began = time.monotonic()

    result = offline_cli("hook", "wait", "--timeout", "2", cwd=repo, stdin=stop_input("b-1", repo))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    # It kept trying until its timeout rather than giving up at the first refusal.
    assert time.monotonic() - began >= 2
