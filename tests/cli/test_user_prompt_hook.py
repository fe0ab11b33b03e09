"""``ai-memory hook user-prompt``: the on-start block on a session's first prompt only, for
harnesses that drop SessionStart output (Kimi); never in the agent's way."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.hook import (
    ANNOUNCED_DIRECTORY,
    ANNOUNCED_KEEP_SECONDS,
    announced_directory,
    prune_announced,
    session_key,
)
from aimemory_site.onstart.services import scope_line
from messaging.notices import inbox_notice
from projects.models import AgentSession

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]


def prompt_input(session_id: str | None, cwd: Path) -> str:
    """The JSON Kimi writes to a UserPromptSubmit hook's stdin."""
    payload: dict[str, str] = {
        "hook_event_name": "UserPromptSubmit",
        "cwd": str(cwd),
        "prompt": "fix the failing test",
    }
    if session_id is not None:
        payload["session_id"] = session_id
    return json.dumps(payload)


@pytest.fixture
def state_home(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def prompt(
    make_cli: Callable[[str], RunCli], live_server: LiveServer, state_home: Path
) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``prompt(session_id, repo)``: one user prompt's hook run against the live server."""
    cli = make_cli(live_server.url)

    def run(session_id: str | None, repo: Path, *flags: str) -> subprocess.CompletedProcess[str]:
        return cli(
            "hook",
            "user-prompt",
            *flags,
            cwd=repo,
            stdin=prompt_input(session_id, repo),
            env={"XDG_STATE_HOME": str(state_home)},
        )

    return run


@pytest.mark.django_db(transaction=True)
def test_the_first_prompt_of_a_session_gets_the_block_and_later_ones_nothing(
    prompt: Callable[..., subprocess.CompletedProcess[str]],
    make_repo: MakeRepo,
    state_home: Path,
) -> None:
    repo = make_repo("project-a")
    block = scope_line(workspace="default", project="project-a") + "\n"

    first = prompt("k-1", repo, "--agent", "kimi")
    second = prompt("k-1", repo, "--agent", "kimi")
    other_session = prompt("k-2", repo, "--agent", "kimi")

    assert (first.returncode, first.stdout, first.stderr) == (0, block, "")
    assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
    assert other_session.stdout == block
    session = AgentSession.objects.select_related("project").get(session_id="k-1")
    assert (session.project.name, session.agent) == ("project-a", "kimi")
    assert len(list((state_home / ANNOUNCED_DIRECTORY).iterdir())) == 2


@pytest.mark.django_db(transaction=True)
def test_a_later_prompt_tells_of_mail_that_came_since_and_only_once(
    prompt: Callable[..., subprocess.CompletedProcess[str]],
    make_cli: Callable[[str], RunCli],
    live_server: LiveServer,
    make_repo: MakeRepo,
) -> None:
    repo_a, repo_b = make_repo("project-a"), make_repo("project-b")
    cli = make_cli(live_server.url)
    assert prompt("k-0", repo_a, "--agent", "kimi").returncode == 0
    assert prompt("k-1", repo_b, "--agent", "kimi").returncode == 0
    to_b = ["message", "send", "--to-workspace", "default", "--to-project", "project-b"]
    assert cli(*to_b, "--subject", "s", "body", cwd=repo_a).returncode == 0

    told = prompt("k-1", repo_b, "--agent", "kimi")
    again = prompt("k-1", repo_b, "--agent", "kimi")

    notice = inbox_notice(count=1, workspace="default", project="project-b")
    assert (told.returncode, told.stdout, told.stderr) == (0, notice + "\n", "")
    assert "body" not in told.stdout
    assert (again.returncode, again.stdout) == (0, "")


@pytest.mark.django_db(transaction=True)
def test_after_a_session_start_the_first_prompt_repeats_no_block(
    prompt: Callable[..., subprocess.CompletedProcess[str]],
    make_cli: Callable[[str], RunCli],
    live_server: LiveServer,
    make_repo: MakeRepo,
    state_home: Path,
) -> None:
    # Codex and Gemini CLI run both hooks: the start announced the session already.
    repo = make_repo("project-a")
    cli = make_cli(live_server.url)
    started = cli(
        "hook",
        "session-start",
        cwd=repo,
        stdin=prompt_input("c-1", repo),
        env={"XDG_STATE_HOME": str(state_home)},
    )

    first = prompt("c-1", repo, "--agent", "codex")

    assert started.stdout == scope_line(workspace="default", project="project-a") + "\n"
    assert (first.returncode, first.stdout, first.stderr) == (0, "", "")


@pytest.mark.django_db(transaction=True)
def test_the_first_prompt_claims_the_handoff_as_a_session_start_does(
    prompt: Callable[..., subprocess.CompletedProcess[str]],
    make_cli: Callable[[str], RunCli],
    live_server: LiveServer,
    make_repo: MakeRepo,
) -> None:
    repo = make_repo("project-a")
    cli = make_cli(live_server.url)
    assert cli("hook", "session-start", cwd=repo, stdin='{"session_id": "c-1"}').returncode == 0
    assert cli("handoff", "create", "Next: the pagination tests.", cwd=repo).returncode == 0

    first = prompt("k-1", repo)
    second = prompt("k-1", repo)

    assert first.stdout.startswith("🤝 ai-memory handoff for default/project-a, written ")
    assert "Next: the pagination tests." in first.stdout
    assert first.stdout.endswith(scope_line(workspace="default", project="project-a") + "\n")
    assert second.stdout == ""


@pytest.mark.django_db(transaction=True)
def test_a_prompt_without_a_session_id_prints_nothing_and_registers_nothing(
    prompt: Callable[..., subprocess.CompletedProcess[str]], make_repo: MakeRepo
) -> None:
    repo = make_repo("project-a")

    result = prompt(None, repo)

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert not AgentSession.objects.exists()


def test_unreachable_server_is_silent_and_the_next_prompt_tries_again(
    offline_cli: RunCli, make_repo: MakeRepo, state_home: Path
) -> None:
    repo = make_repo("project-a")
    env = {"XDG_STATE_HOME": str(state_home)}

    result = offline_cli("hook", "user-prompt", cwd=repo, stdin=prompt_input("k-1", repo), env=env)

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    # Not remembered as announced: the session's next prompt registers it when it can.
    assert list((state_home / ANNOUNCED_DIRECTORY).iterdir()) == []


@pytest.mark.django_db(transaction=True)
def test_a_401_is_one_stderr_line_and_the_next_prompt_tries_again(
    prompt: Callable[..., subprocess.CompletedProcess[str]],
    live_server: LiveServer,
    make_repo: MakeRepo,
    state_home: Path,
    auth_on: str,
) -> None:
    repo = make_repo("project-a")

    result = prompt("k-1", repo)

    expected = (
        f"ai-memory: the server at {live_server.url} requires a token (401): set "
        "AI_MEMORY_AUTH_TOKEN where the agent's hooks run (a token from "
        "`ai-memory manage issue_token USER`)\n"
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", expected)
    assert list((state_home / ANNOUNCED_DIRECTORY).iterdir()) == []
    assert not AgentSession.objects.exists()


def test_an_unusable_state_directory_is_silent(
    offline_cli: RunCli, make_repo: MakeRepo, tmp_path: Path
) -> None:
    repo = make_repo("project-a")
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    env = {"XDG_STATE_HOME": str(not_a_directory)}

    result = offline_cli("hook", "user-prompt", cwd=repo, stdin=prompt_input("k-1", repo), env=env)

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"XDG_STATE_HOME": "/srv/state"}, Path("/srv/state") / ANNOUNCED_DIRECTORY),
        ({"XDG_STATE_HOME": "relative/state"}, None),
        ({}, None),
    ],
    ids=["xdg", "relative-xdg-ignored", "default"],
)
def test_state_lives_under_xdg_state_home_else_local_state(
    environ: dict[str, str], expected: Path | None
) -> None:
    default = Path.home() / ".local" / "state" / ANNOUNCED_DIRECTORY

    assert announced_directory(environ) == (expected or default)


def test_session_keys_are_file_names_per_server_and_session() -> None:
    key = session_key("http://127.0.0.1:8000", "../../etc/passwd")

    assert key.isalnum()
    assert len(key) == 32
    assert key != session_key("http://127.0.0.1:9000", "../../etc/passwd")
    assert key != session_key("http://127.0.0.1:8000", "other")


def test_pruning_removes_only_sessions_idle_for_days(tmp_path: Path) -> None:
    now = time.time()
    idle, active = tmp_path / "idle", tmp_path / "active"
    idle.write_text("")
    active.write_text("")
    os.utime(idle, (now - ANNOUNCED_KEEP_SECONDS - 60,) * 2)
    os.utime(active, (now - ANNOUNCED_KEEP_SECONDS + 60,) * 2)

    prune_announced(tmp_path, now, ANNOUNCED_KEEP_SECONDS)
    prune_announced(tmp_path / "missing", now, ANNOUNCED_KEEP_SECONDS)

    assert sorted(path.name for path in tmp_path.iterdir()) == ["active"]
