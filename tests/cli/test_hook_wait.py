"""``ai-memory hook wait``: Claude Code's asyncRewake Stop hook. Exit 2 with the inbox
notice on stderr wakes the idle session on new mail; every other end is exit 0 and
silence (timeout, a newer wait, no server), except a 401's one line."""

from __future__ import annotations

import itertools
import json
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.client import ApiClient
from aimemory_site.cli.hook import token_problem
from aimemory_site.onstart.wake_services import session_wait
from messaging.notices import inbox_notice
from tests.cli.conftest import RunCli, SpawnCli
from tests.cli.conftest import _cli_environment as cli_environment
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
def wait_requests(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each session wait reached the server (monotonic seconds), in order."""
    seen: list[float] = []

    def counted(**kwargs: Any) -> dict[str, Any]:
        seen.append(time.monotonic())
        return session_wait(**kwargs)

    monkeypatch.setattr("aimemory_site.onstart.api.session_wait", counted)
    return seen


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


def test_session_end_ends_the_sessions_waiter_at_once(
    spawn: SpawnCli, cli: RunCli, repo_b: Path, parked: threading.Event
) -> None:
    waiting = spawn("hook", "wait", "--timeout", "600", cwd=repo_b, stdin=stop_input("b-1", repo_b))
    assert parked.wait(EXIT_WITHIN_SECONDS)
    other = cli("hook", "session-end", cwd=repo_b, stdin=stop_input("b-2", repo_b))
    assert waiting.poll() is None

    session_end = cli("hook", "session-end", cwd=repo_b, stdin=stop_input("b-1", repo_b))

    assert (other.returncode, other.stdout, other.stderr) == (0, "", "")
    assert (session_end.returncode, session_end.stdout, session_end.stderr) == (0, "", "")
    assert waiting.wait(timeout=5) == 0
    assert waiting.communicate() == ("", "")


def test_a_session_the_server_does_not_know_is_registered_and_woken_by_mail(
    spawn: SpawnCli, served: httpx.Client, repo_b: Path, parked: threading.Event
) -> None:
    # It started while the server was away, or the server's data was reset.
    waiting = spawn("hook", "wait", cwd=repo_b, stdin=stop_input("never-started", repo_b))
    assert parked.wait(EXIT_WITHIN_SECONDS)

    send(served)

    assert ended(waiting) == (2, "", NOTICE_1 + "\n")


def test_a_project_the_server_no_longer_has_is_registered_and_woken_by_mail(
    spawn: SpawnCli, cli: RunCli, served: httpx.Client, make_repo: MakeRepo, parked: threading.Event
) -> None:
    # The server's data was reset: the session's project is gone too.
    repo_a, repo_c = make_repo("project-a"), make_repo("project-c")
    assert cli("hook", "session-start", cwd=repo_a, stdin=stop_input("a-1", repo_a)).returncode == 0
    waiting = spawn("hook", "wait", cwd=repo_c, stdin=stop_input("c-1", repo_c))
    assert parked.wait(EXIT_WITHIN_SECONDS)

    response = served.post("/api/v1/messages", json={**SEND, "to_project": "project-c"})
    assert response.status_code == 201, response.text

    notice = inbox_notice(count=1, workspace="default", project="project-c")
    assert ended(waiting) == (2, "", notice + "\n")


def test_mail_pending_when_an_unknown_session_registers_wakes_it_at_once(
    cli: RunCli, served: httpx.Client, repo_b: Path
) -> None:
    send(served)

    result = cli("hook", "wait", cwd=repo_b, stdin=stop_input("never-started", repo_b))

    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith(NOTICE_1 + "\n")


def test_registering_an_unknown_session_claims_no_handoff(cli: RunCli, repo_b: Path) -> None:
    created = cli("handoff", "create", "next: finish the parser", cwd=repo_b)
    assert created.returncode == 0, created.stderr

    waited = cli("hook", "wait", "--timeout", "1", cwd=repo_b, stdin=stop_input("late", repo_b))
    started = cli("hook", "session-start", cwd=repo_b, stdin=stop_input("b-2", repo_b))

    assert (waited.returncode, waited.stderr) == (0, "")
    assert "next: finish the parser" in started.stdout


@pytest.mark.parametrize("entrypoint", ["sdk-cli", "sdk-py", "claude-vscode"])
def test_print_mode_and_sdk_runs_end_at_once_without_a_request(
    cli: RunCli, repo_b: Path, wait_requests: list[float], entrypoint: str
) -> None:
    began = time.monotonic()

    result = cli(
        "hook",
        "wait",
        cwd=repo_b,
        stdin=stop_input("b-1", repo_b),
        env={"CLAUDE_CODE_ENTRYPOINT": entrypoint},
    )

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert wait_requests == []
    assert time.monotonic() - began < EXIT_WITHIN_SECONDS / 3


def test_an_interactive_claude_code_waits(
    cli: RunCli, repo_b: Path, wait_requests: list[float]
) -> None:
    result = cli(
        "hook",
        "wait",
        "--timeout",
        "1",
        cwd=repo_b,
        stdin=stop_input("b-1", repo_b),
        env={"CLAUDE_CODE_ENTRYPOINT": "cli"},
    )

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert len(wait_requests) == 1


def test_a_wait_sends_at_most_one_request_a_second_to_its_very_end(
    cli: RunCli, repo_b: Path, wait_requests: list[float]
) -> None:
    # 2.5 s: a 2 s wait, then the last half second, which once sent a request a loop.
    result = cli("hook", "wait", "--timeout", "2.5", cwd=repo_b, stdin=stop_input("b-1", repo_b))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert 2 <= len(wait_requests) <= 3
    gaps = [later - earlier for earlier, later in itertools.pairwise(wait_requests)]
    # Measured where the server receives them; the client spaces their starts by 1 s.
    assert all(gap >= 0.9 for gap in gaps), gaps


# A stand-in for the agent client: it runs the hook (through a shell or not), says the
# hook's pid, and waits to be killed.
RUNNER_SCRIPT = """
import subprocess, sys
command, hook_input = sys.argv[1:3]
hook = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, text=True)
hook.stdin.write(hook_input)
hook.stdin.close()
print(hook.pid, flush=True)
hook.wait()
"""


def process_ended(pid: int) -> bool:
    """Gone, or a zombie (ended; its new parent may not reap it at once)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("through_shell", [False, True], ids=["direct", "through-a-shell"])
def test_the_waiter_ends_within_5_s_of_the_client_that_ran_it(
    repo_b: Path,
    live_server: LiveServer,
    tmp_path: Path,
    parked: threading.Event,
    through_shell: bool,
) -> None:
    hook = shlex.join([sys.executable, "-m", "aimemory_site.cli.main", "hook", "wait"])
    # "; exit" keeps the shell between the client and the hook (no exec of a last command).
    command = f"{hook}; exit $?" if through_shell else f"exec {hook}"
    env = cli_environment(live_server.url, {"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    client = subprocess.Popen(
        [sys.executable, "-c", RUNNER_SCRIPT, command, stop_input("b-1", repo_b)],
        cwd=repo_b,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert client.stdout is not None
        waiter = int(client.stdout.readline())
        assert parked.wait(EXIT_WITHIN_SECONDS)

        client.kill()
        client.wait(EXIT_WITHIN_SECONDS)
        killed_at = time.monotonic()
        while not process_ended(waiter) and time.monotonic() - killed_at < 10:
            time.sleep(0.1)

        assert process_ended(waiter)
        assert time.monotonic() - killed_at <= 5
    finally:
        client.kill()
        client.wait()


@pytest.mark.parametrize(
    ("stdin", "complaint"),
    [
        ("", "no hook JSON on stdin"),
        ("{not json", "stdin is not JSON"),
        ('{"cwd": "/src/b"}', "the hook JSON has no session_id"),
        ('{"session_id": "b-1"}', "the hook JSON has no cwd"),
    ],
)
def test_hook_json_it_cannot_use_is_one_stderr_line_and_no_request(
    cli: RunCli, repo_b: Path, wait_requests: list[float], stdin: str, complaint: str
) -> None:
    result = cli("hook", "wait", cwd=repo_b, stdin=stdin)

    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == f"ai-memory: hook wait: {complaint}; nothing done\n"
    assert wait_requests == []


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
