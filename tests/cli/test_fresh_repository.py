"""A fresh repository works from the CLI at once: ``ai-memory init`` registers its project,
and a command run before that says to run it.

Against a live server, through the real ``ai-memory`` process, as a new user meets it.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.lib.principal import Principal
from projects.handoff_services import handoff_create
from projects.models import Handoff, Project
from tests.cli.conftest import MakeRepo, RunCli
from tests.conftest import Persona, make_project

pytestmark = pytest.mark.django_db(transaction=True)

NOT_FOUND = (
    "server returned 404: project default/myrepo not found. Check the workspace and project "
    "names; a project exists once an agent session started there."
)


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_init_registers_the_project_so_message_commands_work_at_once(
    cli: RunCli, make_repo: MakeRepo, live_server: LiveServer
) -> None:
    repo = make_repo("myrepo")

    out = ok(cli("init", cwd=repo))
    listed = ok(cli("message", "list", cwd=repo))
    sent = ok(cli("message", "send", "--to-workspace", "default", "--to-project", "myrepo",
                  "A note to self.", cwd=repo))  # fmt: skip

    assert out.splitlines()[1] == (
        f"Registered default/myrepo on the server at {live_server.url}: the CLI and the "
        "agents' hooks can use it now."
    )
    assert listed == "No pending inbox messages for default/myrepo.\n"
    assert sent.startswith("Sent message ")
    assert Project.objects.filter(workspace__name="default", name="myrepo").exists()


def test_init_takes_no_handoff_meant_for_the_next_agent_session(
    cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("myrepo")
    make_project(None, "default", "myrepo")
    handoff_create(
        principal=Principal.anonymous(), workspace="default", project="myrepo", body="Next: X."
    )

    out = ok(cli("init", cwd=repo))

    assert Handoff.objects.get().state == Handoff.State.OPEN
    assert "Next: X." not in out


def test_init_registers_the_project_an_existing_marker_names(
    cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("myrepo")
    (repo / ".ai-memory.toml").write_text('workspace = "acme"\nproject = "billing"\n')

    out = ok(cli("init", "--project", "other", cwd=repo))

    assert "Registered acme/billing on the server" in out
    assert not Project.objects.filter(name="other").exists()


def test_init_without_a_server_writes_the_marker_and_says_registration_is_left(
    offline_cli: RunCli, make_repo: MakeRepo, unreachable_url: str
) -> None:
    repo = make_repo("myrepo")

    result = offline_cli("init", cwd=repo)

    assert result.returncode == 0
    assert (repo / ".ai-memory.toml").is_file()
    assert result.stderr == (
        f"ai-memory: could not register default/myrepo on the server: cannot reach ai-memory "
        f"server at {unreachable_url}: Connection refused (the server may not be running: "
        "start it with `ai-memory serve`). Run `ai-memory init` again once the server runs.\n"
    )


def test_init_refused_by_the_server_says_what_to_fix_and_to_run_it_again(
    cli: RunCli, make_repo: MakeRepo, alice: Persona
) -> None:
    repo = make_repo("myrepo")

    result = cli("init", cwd=repo)

    assert result.returncode == 0
    assert (repo / ".ai-memory.toml").is_file()
    assert result.stderr.startswith(
        "ai-memory: could not register default/myrepo on the server: POST /api/v1/sessions: "
        "server returned 401: "
    )
    assert result.stderr.endswith(
        "set AI_MEMORY_AUTH_TOKEN to a token from `ai-memory manage issue_token USER`. "
        "Run `ai-memory init` again once that is fixed.\n"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["message", "list"],
        ["message", "pop"],
        ["message", "send", "--to-workspace", "default", "--to-project", "known", "hi"],
        ["handoff", "list"],
        ["page", "list"],
    ],
    ids=" ".join,
)
def test_a_404_for_the_working_directorys_project_says_to_run_init(
    cli: RunCli, make_repo: MakeRepo, command: list[str]
) -> None:
    make_project(None, "default", "known")
    repo = make_repo("myrepo")

    result = cli(*command, cwd=repo)

    assert result.returncode == 1
    assert result.stderr.endswith(
        f"{NOT_FOUND} Run `ai-memory init` here to register default/myrepo.\n"
    ), result.stderr


def test_a_404_for_the_recipient_does_not_say_to_run_init(cli: RunCli, make_repo: MakeRepo) -> None:
    repo = make_repo("myrepo")
    ok(cli("init", cwd=repo))

    result = cli("message", "send", "--to-workspace", "default", "--to-project", "nowhere",
                 "hi", cwd=repo)  # fmt: skip

    assert result.returncode == 1
    assert "project default/nowhere not found" in result.stderr
    assert "ai-memory init" not in result.stderr


def test_a_404_for_a_project_named_by_flags_does_not_say_to_run_init(
    cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("elsewhere")

    result = cli("message", "list", "--workspace", "default", "--project", "myrepo", cwd=repo)

    assert result.returncode == 1
    assert result.stderr.endswith(f"{NOT_FOUND}\n")
