"""``ai-memory hook wait --client codex`` and ``hook session-end``: Codex's Stop hook starts
a detached waiter and returns at once; the waiter runs ``codex queue`` with the inbox
notice on new mail. A recording stand-in ``codex`` (AI_MEMORY_CODEX_BIN) takes the queue
calls; the real Codex is driven by the client end-to-end tests."""

from __future__ import annotations

import itertools
import json
import os
import signal
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

from aimemory_site.cli import codex_wake, waiters
from aimemory_site.cli.hook import session_key
from aimemory_site.cli.processes import is_alive
from messaging.notices import inbox_notice
from tests.cli.conftest import RunCli, _cli_environment
from tests.conftest import SEND, Parks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MakeRepo = Callable[[str], Path]
NOTICE_1 = inbox_notice(count=1, workspace="default", project="project-b")
# Generous bounds for a loaded machine; each is far beyond what the step should take.
DEADLINE_SECONDS = 20
HOOK_RETURNS_WITHIN_SECONDS = 5
# The contract: a waiter whose Codex is gone is gone within this long.
PARENT_GONE_WITHIN_SECONDS = 5
# Two ``codex queue`` runs start a second apart; the stand-in's own start may shift the
# time it records by a few hundredths.
QUEUE_SPACING_SECONDS = 0.9


def codex_input(session_id: str, cwd: Path, event: str = "Stop") -> str:
    """The JSON Codex 0.171.0 writes to a Stop (or SessionEnd) hook's stdin."""
    common = {
        "session_id": session_id,
        "transcript_path": None,
        "cwd": str(cwd),
        "hook_event_name": event,
    }
    if event == "SessionEnd":
        return json.dumps({**common, "reason": "other"})
    return json.dumps(
        {
            **common,
            "turn_id": "turn-1",
            "model": "gpt-test",
            "permission_mode": "default",
            "stop_hook_active": False,
            "last_assistant_message": "Done.",
        }
    )


class StandInCodex:
    """A ``codex`` executable that records each run's arguments and the time it began."""

    def __init__(self, directory: Path, exit_status: int = 0) -> None:
        self.path = directory / "codex"
        self.record = directory / "codex-runs.jsonl"
        self.path.write_text(
            f"#!{sys.executable}\n"
            "import json, sys, time\n"
            "began = time.time()\n"
            f"with open({str(self.record)!r}, 'a') as record:\n"
            "    record.write(json.dumps({'argv': sys.argv[1:], 'at': began}) + '\\n')\n"
            f"sys.exit({exit_status})\n",
            encoding="utf-8",
        )
        self.path.chmod(0o755)

    def runs(self) -> list[dict[str, Any]]:
        try:
            lines = self.record.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines]

    def await_runs(self, count: int) -> list[dict[str, Any]]:
        deadline = time.monotonic() + DEADLINE_SECONDS
        while len(runs := self.runs()) < count:
            assert time.monotonic() < deadline, runs
            time.sleep(0.05)
        return runs


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def codex(tmp_path: Path) -> StandInCodex:
    return StandInCodex(tmp_path)


@pytest.fixture
def hook_env(state: Path, codex: StandInCodex) -> dict[str, str]:
    return {"XDG_STATE_HOME": str(state), "AI_MEMORY_CODEX_BIN": str(codex.path)}


def _waiters_of(state: Path) -> list[int]:
    """The waiters started with this test's state directory, found through /proc."""
    found = []
    marker = f"XDG_STATE_HOME={state}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if codex_wake.WAITER_MODULE.encode() in arguments and marker in environment:
            found.append(int(entry.name))
    return found


def _waiters_kill(state: Path) -> None:
    for pid in _waiters_of(state):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


@pytest.fixture(autouse=True)
def _no_waiter_outlives_its_test(state: Path) -> Iterator[None]:
    yield
    _waiters_kill(state)


@pytest.fixture
def served(live_server: LiveServer, state: Path) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        yield client
    # Before the test's database is emptied: a waiter still calling the server would
    # write while the flush truncates (a deadlock on PostgreSQL).
    _waiters_kill(state)


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


@pytest.fixture
def repo_b(cli: RunCli, make_repo: MakeRepo) -> Path:
    """Repository ``project-b``, whose Codex session ``b-1`` has started; project-a too."""
    repo_a, repo = make_repo("project-a"), make_repo("project-b")
    for session_id, cwd in (("a-1", repo_a), ("b-1", repo)):
        started = cli(
            "hook", "session-start", cwd=cwd, stdin=codex_input(session_id, cwd, "SessionStart")
        )
        assert started.returncode == 0, started.stderr
    return repo


def stop_hook(cli: RunCli, repo: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run Codex's Stop hook for session ``b-1`` of ``repo``."""
    return cli(
        "hook", "wait", "--client", "codex", cwd=repo, stdin=codex_input("b-1", repo), env=env
    )


def send(served: httpx.Client) -> None:
    response = served.post("/api/v1/messages", json=SEND)
    assert response.status_code == 201, response.text


def waiter_pid(state: Path, server_url: str, session_id: str = "b-1") -> int:
    """The pid the session's pid file names, once it exists."""
    path = waiters.pid_path({"XDG_STATE_HOME": str(state)}, session_key(server_url, session_id))
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (pid := waiters.read_pid(path)) is None:
        assert time.monotonic() < deadline, f"no pid file {path}"
        time.sleep(0.05)
    return pid


def running(pid: int) -> bool:
    return is_alive(pid, "")


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def log_text(state: Path) -> str:
    try:
        return (state / codex_wake.WAITER_LOG).read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


def await_log(state: Path, fragment: str, count: int = 1) -> str:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (text := log_text(state)).count(fragment) < count:
        assert time.monotonic() < deadline, text
        time.sleep(0.05)
    return text


def test_the_stop_hook_returns_at_once_with_exit_0_and_no_output(
    cli: RunCli, repo_b: Path, hook_env: dict[str, str], parked: threading.Event
) -> None:
    began = time.monotonic()

    result = stop_hook(cli, repo_b, hook_env)

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert time.monotonic() - began < HOOK_RETURNS_WITHIN_SECONDS
    # The waiter it left behind is the one waiting on the server.
    assert parked.wait(DEADLINE_SECONDS)


def test_mail_from_another_project_queues_the_notice_once_and_no_body(
    cli: RunCli,
    served: httpx.Client,
    repo_b: Path,
    hook_env: dict[str, str],
    codex: StandInCodex,
    parks: Parks,
    state: Path,
) -> None:
    stop_hook(cli, repo_b, hook_env)
    parks.until(1)

    send(served)

    [run] = codex.await_runs(1)
    assert run["argv"] == ["queue", "--thread", "b-1", "--message", NOTICE_1]
    assert SEND["body"] not in " ".join(run["argv"])
    assert SEND["subject"] not in " ".join(run["argv"])
    # Having queued, it waits again, and queues nothing more for the same mail.
    parks.until(2)
    assert len(codex.runs()) == 1
    assert "queued the inbox notice" in log_text(state)


def test_a_newer_waiter_of_the_session_ends_the_older_one(
    cli: RunCli,
    served: httpx.Client,
    repo_b: Path,
    hook_env: dict[str, str],
    codex: StandInCodex,
    parks: Parks,
    state: Path,
    live_server: LiveServer,
) -> None:
    stop_hook(cli, repo_b, hook_env)
    older = waiter_pid(state, live_server.url)
    parks.until(1)

    stop_hook(cli, repo_b, hook_env)
    newer = waiter_pid(state, live_server.url)

    assert newer != older
    assert gone_within(older, DEADLINE_SECONDS)
    assert running(newer)
    parks.until(2)
    send(served)
    codex.await_runs(1)
    parks.until(3)
    assert len(codex.runs()) == 1


def test_session_end_ends_the_waiter_at_once(
    cli: RunCli,
    repo_b: Path,
    hook_env: dict[str, str],
    parks: Parks,
    state: Path,
    live_server: LiveServer,
) -> None:
    stop_hook(cli, repo_b, hook_env)
    waiter = waiter_pid(state, live_server.url)
    parks.until(1)

    ended = cli(
        "hook",
        "session-end",
        cwd=repo_b,
        stdin=codex_input("b-1", repo_b, "SessionEnd"),
        env=hook_env,
    )

    assert (ended.returncode, ended.stdout, ended.stderr) == (0, "", "")
    assert gone_within(waiter, 2)
    assert (
        not (state / waiters.WAITER_PIDS)
        .joinpath(f"{session_key(live_server.url, 'b-1')}.pid")
        .exists()
    )


def test_session_end_of_another_session_leaves_the_waiter(
    cli: RunCli,
    repo_b: Path,
    hook_env: dict[str, str],
    parks: Parks,
    state: Path,
    live_server: LiveServer,
) -> None:
    stop_hook(cli, repo_b, hook_env)
    waiter = waiter_pid(state, live_server.url)
    parks.until(1)

    cli(
        "hook",
        "session-end",
        cwd=repo_b,
        stdin=codex_input("b-2", repo_b, "SessionEnd"),
        env=hook_env,
    )

    assert running(waiter)


# The Codex stand-in that runs the hook: it runs the Stop hook as Codex does (through
# ``$SHELL -c``), says so, then stays until killed.
_RUNNER = """
import subprocess, sys
subprocess.run(["/bin/sh", "-c", sys.argv[1] + "; true"], input=sys.argv[2], text=True)
print("ran", flush=True)
sys.stdin.read()
"""


def test_the_waiter_ends_within_5_s_of_the_codex_that_ran_the_hook(
    repo_b: Path,
    hook_env: dict[str, str],
    parks: Parks,
    state: Path,
    live_server: LiveServer,
    tmp_path: Path,
) -> None:
    hook_command = f"{sys.executable} -m aimemory_site.cli.main hook wait --client codex"
    runner = subprocess.Popen(
        [sys.executable, "-c", _RUNNER, hook_command, codex_input("b-1", repo_b)],
        cwd=repo_b,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_cli_environment(
            live_server.url, {"GIT_CEILING_DIRECTORIES": str(tmp_path), **hook_env}
        ),
    )
    try:
        assert runner.stdout is not None
        assert runner.stdout.readline() == "ran\n"
        waiter = waiter_pid(state, live_server.url)
        parks.until(1)
        assert running(waiter)

        runner.kill()
        runner.wait()

        assert gone_within(waiter, PARENT_GONE_WITHIN_SECONDS)
    finally:
        runner.kill()
        runner.communicate()


def test_a_failing_codex_is_tried_once_more_and_logged(
    cli: RunCli,
    served: httpx.Client,
    repo_b: Path,
    state: Path,
    tmp_path: Path,
    parks: Parks,
) -> None:
    failing = StandInCodex(tmp_path, exit_status=1)
    env = {"XDG_STATE_HOME": str(state), "AI_MEMORY_CODEX_BIN": str(failing.path)}
    stop_hook(cli, repo_b, env)
    parks.until(1)

    send(served)

    first, second = failing.await_runs(2)
    assert second["at"] - first["at"] >= QUEUE_SPACING_SECONDS
    log = await_log(state, "codex queue failed", 2)
    assert f"{failing.path} exited 1" in log
    assert "giving up on this notice" in log
    parks.until(2)
    assert len(failing.runs()) == 2


def test_a_missing_codex_is_logged(
    cli: RunCli,
    served: httpx.Client,
    repo_b: Path,
    state: Path,
    tmp_path: Path,
    parks: Parks,
) -> None:
    env = {"XDG_STATE_HOME": str(state), "AI_MEMORY_CODEX_BIN": str(tmp_path / "no-codex")}
    stop_hook(cli, repo_b, env)
    parks.until(1)

    send(served)

    log = await_log(state, "codex queue failed", 2)
    assert f"could not run {tmp_path / 'no-codex'}" in log
    assert SEND["body"] not in log


def test_a_codex_not_on_path_is_logged_naming_the_variable(
    cli: RunCli,
    served: httpx.Client,
    repo_b: Path,
    state: Path,
    tmp_path: Path,
    parks: Parks,
) -> None:
    env = {"XDG_STATE_HOME": str(state), "PATH": str(tmp_path / "empty-bin")}
    stop_hook(cli, repo_b, env)
    parks.until(1)

    send(served)

    log = await_log(state, "codex queue failed", 2)
    assert "'codex' not found on PATH (set AI_MEMORY_CODEX_BIN" in log


@pytest.mark.parametrize(
    ("hook_input", "complaint"),
    [
        ("", "no hook JSON on stdin"),
        ("{not json", "stdin is not JSON"),
        ('["b-1"]', "the hook JSON is not an object"),
        (json.dumps({"cwd": "/src/project-b"}), "the hook JSON has no session_id"),
        (json.dumps({"session_id": "b-1"}), "the hook JSON has no cwd"),
    ],
    ids=["empty", "not-json", "not-an-object", "no-session-id", "no-cwd"],
)
def test_bad_hook_input_is_one_stderr_line_exit_0_and_no_waiter(
    offline_cli: RunCli, state: Path, codex: StandInCodex, hook_input: str, complaint: str
) -> None:
    env = {"XDG_STATE_HOME": str(state), "AI_MEMORY_CODEX_BIN": str(codex.path)}

    result = offline_cli("hook", "wait", "--client", "codex", stdin=hook_input, env=env)

    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr == (f"ai-memory: hook wait --client codex: {complaint}; nothing done\n")
    assert _waiters_of(state) == []
    assert not (state / waiters.WAITER_PIDS).exists()


def test_a_flood_of_mail_queues_at_most_once_a_second(
    cli: RunCli,
    served: httpx.Client,
    repo_b: Path,
    hook_env: dict[str, str],
    codex: StandInCodex,
    parks: Parks,
) -> None:
    stop_hook(cli, repo_b, hook_env)
    parks.until(1)

    deadline = time.monotonic() + DEADLINE_SECONDS
    while len(codex.runs()) < 3:
        assert time.monotonic() < deadline, codex.runs()
        send(served)

    times = [run["at"] for run in codex.runs()]
    assert all(
        later - earlier >= QUEUE_SPACING_SECONDS for earlier, later in itertools.pairwise(times)
    )
    assert all(run["argv"][:4] == ["queue", "--thread", "b-1", "--message"] for run in codex.runs())


def test_the_help_names_the_log_and_the_codex_variable(cli: RunCli) -> None:
    result = cli("hook", "wait", "--help")

    assert "ai-memory/codex-waiter.log" in result.stdout
    assert "AI_MEMORY_CODEX_BIN" in result.stdout
