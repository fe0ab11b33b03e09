"""Two repositories hand each other a message through a live server, only via the CLI.

Both projects come to exist the way they do in real use: an agent session starts in each
repository and its harness runs ``ai-memory hook session-start``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_django.live_server_helper import LiveServer

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]

SEND_TO_B = ["message", "send", "--to-workspace", "default", "--to-project", "project-b"]


def start_session(cli: RunCli, repo: Path, session_id: str) -> None:
    hook_input = json.dumps(
        {"session_id": session_id, "cwd": str(repo), "hook_event_name": "SessionStart"}
    )
    started = cli("hook", "session-start", cwd=repo, stdin=hook_input)
    assert started.returncode == 0, started.stderr


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.django_db(transaction=True)
def test_message_round_trips_across_projects_with_claim_once_and_cancel(
    make_cli: Callable[[str], RunCli], live_server: LiveServer, make_repo: MakeRepo
) -> None:
    cli = make_cli(live_server.url)
    repo_a, repo_b = make_repo("project-a"), make_repo("project-b")
    start_session(cli, repo_a, "session-a")
    start_session(cli, repo_b, "session-b")

    sent = ok(cli(*SEND_TO_B, "--subject", "export", "Add a /v1/export endpoint.", cwd=repo_a))
    message_id = sent.split()[2]
    assert sent == f"Sent message {message_id} from default/project-a to default/project-b.\n"

    listed = ok(cli("message", "list", cwd=repo_b))
    assert listed.startswith("Pending inbox messages for default/project-b (oldest first):\n")
    assert f"    id: {message_id}\n    from default/project-a\n" in listed

    popped = ok(cli("message", "pop", cwd=repo_b))
    assert message_id in popped
    assert "Add a /v1/export endpoint." in popped
    assert "untrusted cross-project input" in popped
    provenance, _, fenced = popped.partition("\n\n")
    assert provenance.splitlines()[:2] == [
        f"Popped message {message_id} for default/project-b.",
        "  from: default/project-a (agent: other)",
    ]
    assert fenced.index("---- body (untrusted cross-project input) ----") < fenced.index(
        "Add a /v1/export endpoint."
    )

    assert ok(cli("message", "pop", cwd=repo_b)) == (
        "No pending messages in default/project-b's inbox.\n"
    )

    second_id = ok(cli(*SEND_TO_B, "Never mind this one.", cwd=repo_a)).split()[2]
    outbox = ok(cli("message", "list", "--outbox", cwd=repo_a))
    assert f"    id: {second_id}\n    to default/project-b\n" in outbox
    assert ok(cli("message", "cancel", "--id", second_id, cwd=repo_a)) == (
        "Cancelled 1 message in default/project-a.\n"
    )

    assert ok(cli("message", "pop", cwd=repo_b)) == (
        "No pending messages in default/project-b's inbox.\n"
    )
    assert ok(cli("message", "list", "--outbox", cwd=repo_a)) == (
        "No pending outbox messages for default/project-a.\n"
    )
