"""The human output names a project the server left out (null: the caller may not read
it) as the web does: "a project you cannot read" (docs/operating.md#projects-and-grants)."""

from __future__ import annotations

from aimemory_site.cli.messages import format_message_list, format_popped, format_status
from tests.cli.test_message_commands import NOW, SCOPE_B, api_message

HIDDEN_SENDER = dict.fromkeys(
    ("from_workspace", "from_project", "from_workspace_id", "from_project_id")
)
HIDDEN_RECIPIENT = dict.fromkeys(("to_workspace", "to_project", "to_workspace_id", "to_project_id"))


def test_a_hidden_sender_reads_as_a_project_you_cannot_read() -> None:
    message = api_message(**HIDDEN_SENDER)

    listed = format_message_list([message], box="inbox", scope=SCOPE_B, now=NOW)
    popped = format_popped(message, "NOTICE")
    status = format_status(message)

    assert listed.splitlines()[-1] == "    from a project you cannot read"
    assert "  from: a project you cannot read (agent: claude)" in popped.splitlines()
    assert "  from: a project you cannot read (agent: claude)" in status.splitlines()
    assert "None" not in listed + popped + status


def test_a_hidden_recipient_reads_the_same_way() -> None:
    message = api_message(**HIDDEN_RECIPIENT)

    listed = format_message_list([message], box="outbox", scope=SCOPE_B, now=NOW)
    status = format_status(message)

    assert listed.splitlines()[-1] == "    to a project you cannot read"
    assert "  to: a project you cannot read" in status.splitlines()
