"""``ai-memory decision ask|answer|wait``: operator decisions over the mailbox (docs/reference.md#operator-decisions), run as the real CLI against a live server.

project-a asks, project-b is the mailbox the operator reads: each command runs in that
project's repository, so the scope is resolved the way an agent's is.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytest_django.fixtures import Settings as SettingsWrapper
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.decision import (
    format_answered,
    oldest_reply,
    option_arg,
    server_wait_seconds,
)
from aimemory_site.lib.decisions import decision_body_write, decision_subject
from aimemory_site.lib.principal import Principal
from messaging.answer_services import decision_answer
from messaging.models import Message
from projects.services import project_get_or_create
from tests.cli.conftest import SpawnCli
from tests.conftest import Persona, make_project

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]

ASK_QUESTION = [
    "decision", "ask", "--to-workspace", "default", "--to-project", "project-b",
    "--question", "Accept the known-flake exception on the export test?",
]  # fmt: skip
OPTIONS = [
    "--option", "accept:Accept the exception:Land it with the flake written down.",
    "--option", "reject:Send it back",
]  # fmt: skip
ASK_B = [*ASK_QUESTION, *OPTIONS]
UNKNOWN_ID = "0190b1d8-0000-7000-8000-000000000000"
SCOPE_A = ["--workspace", "default", "--project", "project-a"]


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def reply_row(
    message_id: str, question_id: str, option: str | None, *, accepted: bool = True
) -> dict[str, Any]:
    """A listed reply as the API shows it; ``option=None`` for a body that did not parse."""
    parsed = (
        None
        if option is None
        else {"question_id": question_id, "option": option, "accepted": accepted}
    )
    return {
        "id": message_id,
        "subject": f"decision-reply: {question_id}",
        "decision_reply": parsed,
    }


# ---- arguments, without a server --------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ([], "at least one --option"),
        ([*OPTIONS, "--option", "accept:Again"], "duplicate option id: accept"),
        ([*OPTIONS, "--recommended", "maybe"], "--recommended 'maybe' names none of the options"),
        (["--option", "no-label"], "argument --option: expected ID:LABEL[:DESCRIPTION]"),
        (["--option", ":label only"], "argument --option: expected ID:LABEL[:DESCRIPTION]"),
        (["--option", "id:"], "argument --option: expected ID:LABEL[:DESCRIPTION]"),
    ],
    ids=["no option", "duplicate id", "unknown recommended", "no label", "no id", "empty label"],
)
def test_ask_with_options_no_one_could_answer_is_an_argument_error(
    offline_cli: RunCli, arguments: list[str], reason: str
) -> None:
    result = offline_cli(*ASK_QUESTION, *arguments)

    # Exit 2 before any request: the offline server would have made a send exit 1.
    assert result.returncode == 2
    assert reason in result.stderr
    assert "cannot reach" not in result.stderr
    assert result.stdout == ""


def test_an_empty_question_is_an_argument_error(offline_cli: RunCli) -> None:
    result = offline_cli(*ASK_QUESTION[:6], "--question", "  ", *OPTIONS)

    assert result.returncode == 2
    assert "the question is empty" in result.stderr


def test_a_negative_timeout_is_an_argument_error(offline_cli: RunCli) -> None:
    result = offline_cli("decision", "wait", UNKNOWN_ID, "--timeout", "-1")

    assert result.returncode == 2
    assert "argument --timeout" in result.stderr


def test_decision_help_lists_its_three_commands(offline_cli: RunCli) -> None:
    overview = offline_cli("decision", "--help")
    top = offline_cli("--help")

    assert overview.returncode == 0
    assert "{ask,answer,wait}" in overview.stdout
    for command in ("ask", "answer", "wait"):
        assert f"ai-memory decision {command}" in overview.stdout
        page = offline_cli("decision", command, "--help")
        assert page.returncode == 0
        assert "examples:" in page.stdout
    assert "decision" in top.stdout


@pytest.mark.parametrize(
    "command",
    [
        [*ASK_B],
        ["decision", "answer", UNKNOWN_ID, "--option", "accept"],
        ["decision", "wait", UNKNOWN_ID],
    ],
    ids=["ask", "answer", "wait"],
)
def test_unreachable_server_is_exit_1_with_one_line(
    offline_cli: RunCli, unreachable_url: str, command: list[str]
) -> None:
    result = offline_cli(*command)

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        f"ai-memory: cannot reach ai-memory server at {unreachable_url}: Connection refused "
        "(the server may not be running: start it with `ai-memory serve`)\n"
    )


def test_importing_the_decision_commands_loads_no_django_and_no_yaml() -> None:
    probe = (
        "import sys, aimemory_site.cli.decision; "
        "assert not {'django', 'yaml', 'messaging'} & set(sys.modules), sorted(sys.modules)"
    )

    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)

    assert result.returncode == 0, result.stderr


# ---- pure parts -------------------------------------------------------------------------


def test_a_reply_the_server_did_not_accept_is_said_sent_not_answered() -> None:
    assert format_answered("q-1", "accept", "r-1", "default/project-a") == (
        "Answered decision q-1: accept (reply r-1 sent to default/project-a)."
    )
    assert format_answered("q-1", "accept", "r-1", "default/project-a", accepted=False) == (
        "Sent reply r-1 to default/project-a for decision q-1: accept."
    )


def test_an_option_description_may_hold_colons() -> None:
    option = option_arg("merge: Merge it : CI is green: 12:00 build")

    assert (option.id, option.label, option.description) == (
        "merge",
        "Merge it",
        "CI is green: 12:00 build",
    )
    assert option_arg("hold:Hold it").description is None


@pytest.mark.parametrize(
    ("remaining", "asked"), [(600.0, 60), (59.2, 60), (1.2, 2), (0.3, 1), (0.0, 0), (-0.1, 0)]
)
def test_a_server_wait_never_gives_up_before_the_timeout(remaining: float, asked: int) -> None:
    assert server_wait_seconds(remaining) == asked


def test_the_oldest_accepted_reply_that_parses_is_the_answer() -> None:
    question_id = str(uuid.uuid4())
    rows = [
        {"id": "mail", "subject": "unrelated", "decision_reply": None},
        reply_row("other", str(uuid.uuid4()), "accept"),
        reply_row("broken", question_id, None),
        reply_row("forged", question_id, "accept", accepted=False),
        reply_row("first", question_id, "reject"),
        reply_row("second", question_id, "accept"),
    ]

    found = oldest_reply(rows, question_id)

    assert found is not None and found["id"] == "first"
    assert oldest_reply(rows[:4], question_id) is None


# ---- against the real server ------------------------------------------------------------


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


@pytest.fixture
def repos(make_repo: MakeRepo, transactional_db: None) -> tuple[Path, Path]:
    """The repositories of project-a (the asker) and project-b (the mailbox), both
    registered on the server."""
    for name in ("project-a", "project-b"):
        project_get_or_create(principal=Principal.anonymous(), workspace="default", project=name)
    return make_repo("project-a"), make_repo("project-b")


def pending_ids() -> set[str]:
    return {str(pk) for pk in Message.objects.pending().values_list("id", flat=True)}


@pytest.mark.django_db(transaction=True)
def test_a_question_round_trips_between_two_projects(cli: RunCli, repos: tuple[Path, Path]) -> None:
    repo_a, repo_b = repos
    asked = ok(
        cli(
            *ASK_B, "--recommended", "accept", "--requires-root",
            "--details", "Failed once in forty CI runs.",
            "--link", "https://example.test/pull/12",
            cwd=repo_a,
        )
    )  # fmt: skip
    question_id = asked.strip()
    listed = json.loads(ok(cli("message", "list", "--json", cwd=repo_b)))["messages"]

    reply_id = json.loads(ok(
        cli("decision", "answer", question_id, "--option", "accept", "--comment",
            "Accepting it.\nThe flake is written down.", "--json", cwd=repo_b)
    ))["message_id"]  # fmt: skip
    reply = Message.objects.select_related("to_project", "from_project").get(id=reply_id)
    waited = cli("decision", "wait", question_id, "--timeout", "30", cwd=repo_a)

    assert asked == f"{uuid.UUID(question_id)}\n"
    assert [row["id"] for row in listed] == [question_id]
    assert listed[0]["subject"] == (
        "decision: Accept the known-flake exception on the export test?"
    )
    assert listed[0]["decision"] == {
        "question": "Accept the known-flake exception on the export test?",
        "requires_root": True,
        "reply_project": "default/project-a",
        "options": [
            {
                "id": "accept",
                "label": "Accept the exception",
                "description": "Land it with the flake written down.",
                "recommended": True,
            },
            {"id": "reject", "label": "Send it back", "description": None, "recommended": False},
        ],
        "details": "Failed once in forty CI runs.",
        "links": ["https://example.test/pull/12"],
    }
    assert (reply.from_project.name, reply.to_project.name) == ("project-b", "project-a")
    assert str(reply.in_reply_to) == question_id
    assert reply.subject == f"decision-reply: {question_id}"
    assert reply.decision_reply == {
        "question_id": question_id,
        "option": "accept",
        "comment": "Accepting it.\nThe flake is written down.",
        "accepted": True,
        "refusal": None,
        "via": "message",
    }
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout == "accept\n"
    assert waited.stderr == "Accepting it.\nThe flake is written down.\n"
    assert pending_ids() == set()
    assert Message.objects.get(id=question_id).state == Message.State.CANCELLED
    assert Message.objects.get(id=reply_id).state == Message.State.CLAIMED


@pytest.mark.django_db(transaction=True)
def test_answer_says_what_it_sent_and_json_prints_the_reply(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, repo_b = repos
    first_question = ok(cli(*ASK_B, cwd=repo_a)).strip()
    second_question = ok(cli(*ASK_B, cwd=repo_a)).strip()

    said = cli("decision", "answer", first_question, "--option", "accept", cwd=repo_b)
    printed = cli("decision", "answer", second_question, "--option", "reject", "--comment",
                  "Not yet.", "--json", cwd=repo_b)  # fmt: skip

    [reply] = Message.objects.filter(in_reply_to=first_question)
    assert (said.returncode, said.stderr) == (0, "")
    assert said.stdout == (
        f"Answered decision {first_question}: accept (reply {reply.pk} sent to default/project-a).\n"
    )
    assert printed.returncode == 0, printed.stderr
    [json_reply] = Message.objects.filter(in_reply_to=second_question)
    assert json.loads(printed.stdout) == {
        "message_id": str(json_reply.pk),
        "decision_reply": {
            "question_id": second_question,
            "option": "reject",
            "comment": "Not yet.",
            "accepted": True,
            "refusal": None,
            "via": "message",
        },
    }


@pytest.mark.django_db(transaction=True)
def test_answer_refuses_an_option_the_question_does_not_offer(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, repo_b = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()

    refused = cli("decision", "answer", question_id, "--option", "maybe", cwd=repo_b)

    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr == (
        f"ai-memory: decision {question_id} offers no option 'maybe' (it offers: accept, reject)\n"
    )
    assert pending_ids() == {question_id}


@pytest.mark.django_db(transaction=True)
def test_answer_refuses_what_is_not_a_pending_decision_in_the_mailbox(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, repo_b = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()
    to_b = ["message", "send", "--to-workspace", "default", "--to-project", "project-b"]
    ordinary_id = ok(cli(*to_b, "--subject", "export", "Add /v1/export", cwd=repo_a)).split()[2]
    sent = pending_ids()

    unknown = cli("decision", "answer", UNKNOWN_ID, "--option", "accept", cwd=repo_b)
    ordinary = cli("decision", "answer", ordinary_id, "--option", "accept", cwd=repo_b)
    # The question is in project-b's inbox, not in project-a's.
    elsewhere = cli("decision", "answer", question_id, "--option", "accept", cwd=repo_a)
    malformed = cli("decision", "answer", "not-an-id", "--option", "accept", cwd=repo_b)

    assert (unknown.returncode, ordinary.returncode) == (1, 1)
    assert (elsewhere.returncode, malformed.returncode) == (1, 1)
    assert (
        unknown.stderr
        == f"ai-memory: no pending decision {UNKNOWN_ID} in default/project-b's inbox\n"
    )
    assert ordinary.stderr == (
        f"ai-memory: message {ordinary_id} in default/project-b is not a decision question\n"
    )
    assert elsewhere.stderr == (
        f"ai-memory: no pending decision {question_id} in default/project-a's inbox\n"
    )
    assert "no pending decision not-an-id" in malformed.stderr
    assert pending_ids() == sent


@pytest.mark.django_db(transaction=True)
def test_wait_takes_the_oldest_reply_and_leaves_later_ones_pending(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, repo_b = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()
    answer = ["decision", "answer", question_id, "--json", "--option"]
    first_id = json.loads(ok(cli(*answer, "reject", cwd=repo_b)))["message_id"]
    second_id = json.loads(ok(cli(*answer, "accept", cwd=repo_b)))["message_id"]

    waited = cli("decision", "wait", question_id, "--timeout", "30", cwd=repo_a)

    assert waited.returncode == 0, waited.stderr
    assert waited.stdout == "reject\n"
    assert Message.objects.get(id=first_id).state == Message.State.CLAIMED
    assert pending_ids() == {second_id}


@pytest.mark.django_db(transaction=True)
def test_wait_times_out_within_a_second_of_its_deadline(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, _ = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()

    started = time.monotonic()
    waited = cli("decision", "wait", question_id, "--timeout", "1.2", cwd=repo_a)
    elapsed = time.monotonic() - started

    assert waited.returncode == 1
    assert waited.stdout == ""
    # Not a terminal: no word while it waits, only the outcome.
    assert waited.stderr == (
        f"ai-memory: no answer to decision {question_id} in default/project-a's inbox "
        "within 1.2 s\n"
    )
    # One server wait of 2 s (1.2 rounded up), plus the process's start-up.
    assert 1.2 <= elapsed < 4
    assert pending_ids() == {question_id}


@pytest.mark.django_db(transaction=True)
def test_wait_parks_on_the_server_until_the_answer_comes(
    cli: RunCli,
    spawn_cli: Callable[[str], SpawnCli],
    live_server: LiveServer,
    repos: tuple[Path, Path],
    parked: threading.Event,
) -> None:
    repo_a, repo_b = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()
    waiting = spawn_cli(live_server.url)("decision", "wait", question_id, cwd=repo_a)
    # Parked in the server: the pop of the question's replies waits there, no polling.
    assert parked.wait(30)

    ok(cli("decision", "answer", question_id, "--option", "accept", "--comment",
           "Land it.", cwd=repo_b))  # fmt: skip

    stdout, stderr = waiting.communicate(timeout=30)
    assert (waiting.returncode, stdout, stderr) == (0, "accept\n", "Land it.\n")
    assert pending_ids() == set()
    assert Message.objects.get(id=question_id).state == Message.State.CANCELLED


@pytest.mark.django_db(transaction=True)
def test_wait_takes_an_answer_from_the_web_answer_page(
    cli: RunCli,
    spawn_cli: Callable[[str], SpawnCli],
    live_server: LiveServer,
    repos: tuple[Path, Path],
    parked: threading.Event,
    settings: SettingsWrapper,
) -> None:
    settings.AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS = True
    repo_a, _ = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()
    waiting = spawn_cli(live_server.url)("decision", "wait", question_id, "--json", cwd=repo_a)
    assert parked.wait(30)

    # What the answer page's form does on submit.
    decision_answer(
        principal=Principal.anonymous(),
        workspace="default",
        project="project-b",
        question_id=uuid.UUID(question_id),
        option="reject",
        comment="Send it back:\nQA is not done.",
    )

    stdout, stderr = waiting.communicate(timeout=30)
    assert (waiting.returncode, stderr) == (0, "")
    assert json.loads(stdout) == {
        "question_id": question_id,
        "option": "reject",
        "comment": "Send it back:\nQA is not done.",
        "accepted": True,
        "refusal": None,
        "via": "web",
    }
    assert pending_ids() == set()


@pytest.mark.django_db(transaction=True)
def test_wait_says_once_a_minute_on_a_terminal_that_it_waits(
    cli: RunCli, live_server: LiveServer, repos: tuple[Path, Path]
) -> None:
    repo_a, _ = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()
    controller, terminal = pty.openpty()
    try:
        waited = subprocess.run(
            [sys.executable, "-m", "aimemory_site.cli.main", "decision", "wait", question_id,
             *SCOPE_A, "--timeout", "1"],
            stdout=subprocess.PIPE, stderr=terminal, text=True, timeout=30, check=False,
            env={**os.environ, "AI_MEMORY_SERVER_URL": live_server.url,
                 "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        )  # fmt: skip
        os.close(terminal)
        said = _read_all(controller)
    finally:
        os.close(controller)

    assert waited.returncode == 1
    lines = said.replace("\r\n", "\n").splitlines()
    # At the start, and not again within the minute; then the timeout.
    assert lines == [
        f"ai-memory: waiting for the answer to decision {question_id} (1 s left)",
        f"ai-memory: no answer to decision {question_id} in default/project-a's inbox within 1 s",
    ]


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


@pytest.mark.django_db(transaction=True)
def test_ask_json_prints_the_send_answer(cli: RunCli, repos: tuple[Path, Path]) -> None:
    repo_a, _ = repos

    answer = json.loads(ok(cli(*ASK_B, "--json", cwd=repo_a)))

    assert answer == {
        "message_id": answer["message_id"],
        "omitted_chars": 0,
        "redactions": 0,
        "idempotent_replay": False,
    }
    assert pending_ids() == {answer["message_id"]}


@pytest.mark.django_db(transaction=True)
def test_answer_to_a_question_whose_reply_project_is_gone_is_exit_1_and_sends_nothing(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, repo_b = repos
    # Written by hand, as an agent without the CLI would: 'decision ask' always names
    # the asking project, which exists once it has sent.
    body = decision_body_write(
        "Accept the known-flake exception?",
        [{"id": "accept", "label": "Accept the exception"}],
        requires_root=False,
        reply_project="default/project-gone",
    )
    to_b = ["message", "send", "--to-workspace", "default", "--to-project", "project-b"]
    subject = decision_subject("Accept the known-flake exception?")
    question_id = ok(cli(*to_b, "--subject", subject, body, cwd=repo_a)).split()[2]

    refused = cli("decision", "answer", question_id, "--option", "accept", cwd=repo_b)

    assert refused.returncode == 1
    assert refused.stdout == ""
    assert refused.stderr == (
        f"ai-memory: decision {question_id} names reply_project default/project-gone, which "
        "was not found (no such project, or one you may not read), so no answer was sent. "
        "Ask the asker to send the question again with the right reply_project.\n"
    )
    assert pending_ids() == {question_id}


@pytest.mark.django_db(transaction=True)
def test_wait_json_prints_the_replys_decision_reply(cli: RunCli, repos: tuple[Path, Path]) -> None:
    repo_a, repo_b = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()
    ok(cli("decision", "answer", question_id, "--option", "reject", "--comment", "Not yet.",
           cwd=repo_b))  # fmt: skip

    waited = cli("decision", "wait", question_id, "--timeout", "30", "--json", cwd=repo_a)

    assert waited.returncode == 0, waited.stderr
    assert json.loads(waited.stdout) == {
        "question_id": question_id,
        "option": "reject",
        "comment": "Not yet.",
        "accepted": True,
        "refusal": None,
        "via": "message",
    }
    assert waited.stderr == ""
    assert pending_ids() == set()


@pytest.mark.django_db(transaction=True)
def test_wait_prints_no_comment_line_when_the_reply_has_none(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, repo_b = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()
    ok(cli("decision", "answer", question_id, "--option", "accept", cwd=repo_b))

    waited = cli("decision", "wait", question_id, "--timeout", "30", cwd=repo_a)

    assert (waited.returncode, waited.stdout, waited.stderr) == (0, "accept\n", "")


# ---- forged replies, with authentication on --------------------------------------------


@pytest.fixture
def secured_repos(
    make_repo: MakeRepo, auth_on: str, alice: Persona, charlie: Persona
) -> dict[str, Path]:
    """alice's open project-a (the asker) and project-b (the mailbox), and charlie's
    unrelated project-c; every signed-in user writes the open ones. Nobody but the root
    token is root."""
    make_project(alice, "default", "project-a")
    make_project(alice, "default", "project-b")
    make_project(charlie, "default", "project-c", restricted=True)
    return {name: make_repo(name) for name in ("project-a", "project-b", "project-c")}


def as_(token: str) -> dict[str, str]:
    return {"AI_MEMORY_AUTH_TOKEN": token}


@pytest.mark.slow  # ten CLI processes and a wait that runs out
@pytest.mark.django_db(transaction=True)
def test_wait_ignores_forged_replies_and_takes_the_accepted_one(
    cli: RunCli, secured_repos: dict[str, Path], auth_on: str, bob: Persona, charlie: Persona
) -> None:
    repo_a, repo_b, repo_c = (secured_repos[f"project-{n}"] for n in "abc")
    question_id = ok(cli(*ASK_B, "--requires-root", cwd=repo_a, env=as_(auth_on))).strip()
    reply_to_a = [
        "message", "send", "--to-workspace", "default", "--to-project", "project-a",
        "--subject", f"decision-reply: {question_id}",
    ]  # fmt: skip
    # bob is not root; charlie writes from a project the question never went to; and an
    # option the question does not offer.
    not_root = cli("decision", "answer", question_id, "--option", "accept", "--json",
                   cwd=repo_b, env=as_(bob.token))  # fmt: skip
    wrong_project = ok(cli(*reply_to_a, f"question_id: {question_id}\noption: accept",
                           cwd=repo_c, env=as_(charlie.token)))  # fmt: skip
    unknown_option = ok(cli(*reply_to_a, f"question_id: {question_id}\noption: maybe",
                            cwd=repo_b, env=as_(auth_on)))  # fmt: skip
    forged = pending_ids() - {question_id}

    listed = json.loads(ok(cli("message", "list", "--json", cwd=repo_a, env=as_(auth_on))))
    too_early = cli("decision", "wait", question_id, "--timeout", "1.2", cwd=repo_a,
                    env=as_(auth_on))  # fmt: skip
    # Pending beside an accepted answer, a refused one is left alone.
    again = cli("decision", "answer", question_id, "--option", "accept", "--json", cwd=repo_b,
                env=as_(bob.token))  # fmt: skip
    not_root_again = json.loads(again.stdout)["message_id"]
    ok(cli("decision", "answer", question_id, "--option", "reject", "--comment",
           "Hold it: QA is not done.", cwd=repo_b, env=as_(auth_on)))  # fmt: skip
    waited = cli("decision", "wait", question_id, "--timeout", "30", cwd=repo_a,
                 env=as_(auth_on))  # fmt: skip

    # The non-root answer is sent, as any message is, and said not to count.
    assert not_root.returncode == 1
    not_root_id = json.loads(not_root.stdout)["message_id"]
    assert json.loads(not_root.stdout)["decision_reply"]["accepted"] is False
    assert not_root.stderr == (
        "ai-memory: the reply was sent, but the asker will not take it: the question "
        "requires root, and this reply was not sent by root (the root token, a superuser, "
        "or the user named by AI_MEMORY_ROOT_USERNAME).\n"
    )
    assert forged == {not_root_id, wrong_project.split()[2], unknown_option.split()[2]}
    replies = {row["id"]: row["decision_reply"] for row in listed["messages"]}
    assert set(replies) == forged
    assert [reply["accepted"] for reply in replies.values()] == [False, False, False]
    assert all(reply["refusal"] for reply in replies.values())
    # The refused answers linked to the question (bob's, and the one with an option it
    # does not offer, linked by its question_id) are what the server's wait brought: they
    # are taken out, and said. charlie's project never got the question, so his reply is
    # not linked to it: ordinary mail.
    unknown_option_id = unknown_option.split()[2]
    assert too_early.returncode == 1
    assert too_early.stderr == (
        f"ai-memory: took reply {not_root_id} to decision {question_id}, but the server did "
        "not accept it as the answer: the question requires root, and this reply was not "
        "sent by root (the root token, a superuser, or the user named by "
        "AI_MEMORY_ROOT_USERNAME).\n"
        f"ai-memory: took reply {unknown_option_id} to decision {question_id}, but the "
        "server did not accept it as the answer: option 'maybe' is not one the question "
        "offers (it offers: accept, reject).\n"
        f"ai-memory: no answer to decision {question_id} in default/project-a's inbox "
        "within 1.2 s\n"
    )
    assert waited.returncode == 0, waited.stderr
    assert waited.stdout == "reject\n"
    assert waited.stderr == "Hold it: QA is not done.\n"
    # charlie's reply stays in the inbox as ordinary mail; the question is withdrawn.
    assert pending_ids() == (forged - {not_root_id, unknown_option_id}) | {not_root_again}
    assert Message.objects.get(id=question_id).state == Message.State.CANCELLED


# ---- deadlines and provenance ----------------------------------------------------------------


def _expire_now(question_id: str) -> str:
    """Move the clock past the question's deadline; the deadline as the wait says it."""
    from datetime import timedelta

    from django.utils import timezone

    passed = (timezone.now() - timedelta(seconds=30)).replace(microsecond=0)
    Message.objects.filter(pk=question_id).update(expires_at=passed)
    return passed.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.django_db(transaction=True)
def test_ask_with_a_deadline_sets_the_questions_expiry(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, _ = repos
    asked = cli(*ASK_B, "--deadline", "2h", "--on-deadline", "reject", cwd=repo_a)

    question = Message.objects.get(pk=ok(asked).strip())
    assert question.expires_at is not None
    assert question.decision is not None and question.decision["on_deadline"] == "reject"


@pytest.mark.django_db(transaction=True)
def test_ask_with_a_deadline_too_near_is_refused(cli: RunCli, repos: tuple[Path, Path]) -> None:
    repo_a, _ = repos
    refused = cli(*ASK_B, "--deadline", "10s", cwd=repo_a)

    assert refused.returncode == 1
    assert "between 60 seconds and 30 days" in refused.stderr
    assert pending_ids() == set()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("as_json", [False, True])
def test_wait_on_a_question_past_its_deadline_ends_at_once_with_exit_3(
    cli: RunCli, repos: tuple[Path, Path], as_json: bool
) -> None:
    repo_a, _ = repos
    question_id = ok(cli(*ASK_B, "--deadline", "2h", cwd=repo_a)).strip()
    deadline = _expire_now(question_id)
    started = time.monotonic()

    waited = cli("decision", "wait", question_id, "--timeout", "60",
                 *(["--json"] if as_json else []), cwd=repo_a)  # fmt: skip

    assert time.monotonic() - started < 15
    assert waited.returncode == 3
    assert waited.stderr == f"no answer by the deadline ({deadline})\n"
    if as_json:
        assert json.loads(waited.stdout) == {"expired": True, "deadline": deadline}
    else:
        assert waited.stdout == ""


@pytest.mark.django_db(transaction=True)
def test_wait_requiring_a_person_leaves_an_agents_answer_pending(
    cli: RunCli, repos: tuple[Path, Path]
) -> None:
    repo_a, repo_b = repos
    question_id = ok(cli(*ASK_B, cwd=repo_a)).strip()
    answered = ok(
        cli("decision", "answer", question_id, "--option", "reject", "--json", cwd=repo_b)
    )
    reply_id = json.loads(answered)["message_id"]

    waited = cli("decision", "wait", question_id, "--timeout", "3", "--require-person",
                 cwd=repo_a)  # fmt: skip

    assert waited.returncode == 1
    assert "no answer to decision" in waited.stderr
    assert Message.objects.get(pk=reply_id).state == "pending"
