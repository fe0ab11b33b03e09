"""message_send: fail closed, scrub then cap, the 256 bound, and nothing half-written."""

from __future__ import annotations

import pytest

from aimemory_site.lib.errors import BadRequest, Conflict, Forbidden, NotFound
from messaging.limits import MAX_PENDING_PER_INBOX
from messaging.models import Message
from messaging.services import message_pop
from projects.models import Activity, Project
from tests.conftest import Persona, make_project
from tests.messaging.conftest import ANON, send


def test_send_stores_a_pending_message_with_provenance(
    project_a: Project, project_b: Project, alice: Persona
) -> None:
    message = send(subject="export endpoint", principal=alice.principal)
    assert message.state == Message.State.PENDING
    assert message.to_project == project_b
    assert message.from_project == project_a
    assert message.from_agent == "other"
    assert message.from_owner_user == "alice"
    assert message.subject == "export endpoint"
    assert message.id.version == 7


def test_anonymous_sender_has_no_owner(project_a: Project, project_b: Project) -> None:
    assert send().from_owner_user == ""


def test_unknown_recipient_is_rejected_not_created(project_a: Project) -> None:
    with pytest.raises(NotFound) as missing:
        send(to="project-typo")
    assert missing.value.code == "project_not_found"
    assert not Project.objects.filter(name="project-typo").exists()
    assert not Message.objects.exists()


def test_unknown_sender_is_rejected(project_b: Project) -> None:
    with pytest.raises(NotFound):
        send(sender="nobody")
    assert not Message.objects.exists()


@pytest.mark.parametrize("body", ["", "   \n\t "])
def test_empty_body_is_rejected(project_a: Project, project_b: Project, body: str) -> None:
    with pytest.raises(BadRequest) as empty:
        send(body)
    assert empty.value.code == "empty_body"
    assert not Message.objects.exists()
    assert not Activity.objects.filter(kind=Activity.Kind.MESSAGE_SENT).exists()


def test_subject_becomes_one_line(project_a: Project, project_b: Project) -> None:
    message = send(subject="line one\nline two\r\x07\tend")
    assert message.subject == "line one line two   end"


@pytest.mark.parametrize("subject", ["", "  ", "\n"])
def test_blank_subject_is_empty(project_a: Project, project_b: Project, subject: str) -> None:
    assert send(subject=subject).subject == ""


def test_long_subject_is_capped_at_200(project_a: Project, project_b: Project) -> None:
    message = send(subject="s" * 500)
    assert len(message.subject) == 200
    assert message.subject.endswith("…")


def test_long_body_keeps_8000_chars_and_says_how_many_were_dropped(
    project_a: Project, project_b: Project
) -> None:
    message = send("é" * 8000 + "x" * 1234)
    assert message.body == "é" * 8000 + "\n[message body truncated; 1234 chars omitted]"


def test_secrets_are_scrubbed_from_subject_and_body(project_a: Project, project_b: Project) -> None:
    token = "ghp_" + "A1b2C3d4E5" * 4
    message = send(f"use {token} to push", subject=f"token {token}")
    assert token not in message.body
    assert "[REDACTED]" in message.body
    assert token not in message.subject


def test_secret_straddling_the_cap_does_not_survive_in_part(
    project_a: Project, project_b: Project
) -> None:
    token = "ghp_" + "Z9y8X7w6V5" * 4
    message = send("a" * 7990 + " " + token + " tail")
    assert "ghp_" not in message.body
    assert "Z9y8" not in message.body


def test_a_huge_body_is_capped_with_the_true_count(project_a: Project, project_b: Project) -> None:
    body = "x" * 500_000
    message = send(body)
    assert message.body == "x" * 8000 + "\n[message body truncated; 492000 chars omitted]"


def test_a_huge_body_never_keeps_unscrubbed_text(project_a: Project, project_b: Project) -> None:
    """Redactions shrink the scrubbed window below the cap: nothing past it is kept raw."""
    token = "ghp_" + "Q1w2E3r4T5" * 4
    message = send((token + " ") * 3000 + token + " " + "y" * 100_000)
    assert "ghp_" not in message.body
    assert "Q1w2" not in message.body
    assert "y" not in message.body.split("\n[message body truncated")[0]
    assert message.body.endswith(" chars omitted]")


def test_full_inbox_rejects_the_next_send_until_one_is_popped(
    project_a: Project, project_b: Project
) -> None:
    for i in range(MAX_PENDING_PER_INBOX):
        send(f"request {i}")
    with pytest.raises(Conflict) as full:
        send("one too many")
    assert full.value.code == "inbox_full"
    assert full.value.http_status == 409
    assert "full" in full.value.message
    assert Message.objects.count() == MAX_PENDING_PER_INBOX
    message_pop(principal=ANON, workspace="default", project="project-b")
    send("fits again")
    assert Message.objects.filter(state=Message.State.PENDING).count() == MAX_PENDING_PER_INBOX


def test_other_inboxes_do_not_count_towards_the_bound(
    project_a: Project, project_b: Project, project_c: Project
) -> None:
    Message.objects.bulk_create(
        Message(to_project=project_c, from_project=project_a, body="x")
        for _ in range(MAX_PENDING_PER_INBOX)
    )

    sent = send()

    assert sent.to_project == project_b
    assert Message.objects.get(pk=sent.pk).state == Message.State.PENDING
    assert Message.objects.filter(to_project=project_c).count() == MAX_PENDING_PER_INBOX


def test_send_needs_write_on_the_recipient(
    alice: Persona, bob: Persona, charlie: Persona, alices_restricted: Project
) -> None:
    bobs = make_project(bob, "default", "bobs")
    with pytest.raises(Forbidden):
        send(to="alpha", sender="bobs", principal=bob.principal)
    with pytest.raises(NotFound):
        send(to="alpha", sender="bobs", principal=charlie.principal)
    assert not Message.objects.exists()
    assert bobs.outbox_messages.count() == 0


def test_nobody_signs_as_a_project_they_cannot_read(
    charlie: Persona, alices_restricted: Project, alices_open: Project
) -> None:
    with pytest.raises(NotFound):
        send(to="commons", sender="alpha", principal=charlie.principal)
    assert not Message.objects.exists()


def test_send_records_activity_on_both_sides_without_the_body(
    project_a: Project, project_b: Project
) -> None:
    send("the secret plan", subject="plan")
    sent = Activity.objects.get(kind=Activity.Kind.MESSAGE_SENT)
    received = Activity.objects.get(kind=Activity.Kind.MESSAGE_RECEIVED)
    assert (sent.project, sent.counterpart) == (project_a, project_b)
    assert (received.project, received.counterpart) == (project_b, project_a)
    for entry in (sent, received):
        assert "secret plan" not in entry.summary
        assert "plan" not in entry.summary
