"""Message expiry (docs/reference.md#messages): ``expires_in_seconds`` and
``AI_MEMORY_MESSAGE_TTL`` set ``expires_at``; a pending message past it is ``expired`` at
once on every surface, without waiting for the background to store it so.

Expired messages are made by moving ``expires_at`` into the past, or by freezing the
clock, never by sleeping.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.decisions import (
    decision_body_write,
    decision_reply_subject,
    decision_reply_write,
    decision_subject,
)
from aimemory_site.lib.errors import BadRequest, Code, Conflict
from messaging.limits import MAX_PENDING_PER_INBOX
from messaging.models import Message
from messaging.retention import messages_expire
from messaging.services import message_cancel, message_pop
from projects.models import Project
from tests.conftest import ApiCall
from tests.messaging.conftest import ANON, send
from tests.webui.conftest import cards, page, section, text_of

pytestmark = pytest.mark.django_db

HOUR = 3600
A = {"workspace": "default", "project": "project-a"}
B = {"workspace": "default", "project": "project-b"}
SEND = {
    "to_workspace": "default",
    "to_project": "project-b",
    "from_workspace": "default",
    "from_project": "project-a",
    "body": "Please add a /v1/export endpoint.",
}


@pytest.fixture
def projects(project_a: Project, project_b: Project) -> None:
    """default/project-a and default/project-b on an anonymous server."""


def expire(message: Message, *, ago: timedelta = timedelta(seconds=1)) -> None:
    """Move the expiry of ``message`` into the past, as if its time had passed."""
    Message.objects.filter(pk=message.pk).update(expires_at=timezone.now() - ago)


def pop_b(**extra: Any) -> Message | None:
    return message_pop(principal=ANON, workspace="default", project="project-b", **extra)


def _moment(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# ---- setting it ---------------------------------------------------------------------------


def test_a_send_with_expires_in_seconds_shows_expires_at_in_every_message_json(
    api: ApiCall, projects: None
) -> None:
    status, sent = api("post", "/api/v1/messages", {**SEND, "expires_in_seconds": 2 * HOUR})
    assert status == 201
    _, plain = api("post", "/api/v1/messages", SEND)

    _, listed = api("get", "/api/v1/messages", B)
    _, outbox = api("get", "/api/v1/messages", {**A, "box": "outbox"})
    _, status_of = api("get", f"/api/v1/messages/{sent['message_id']}", A)
    _, popped = api("post", "/api/v1/messages/pop", B)

    first, second = listed["messages"]
    assert first["id"] == sent["message_id"]
    assert _moment(first["expires_at"]) - _moment(first["created_at"]) == timedelta(hours=2)
    assert first["expires_at"].endswith("Z")
    assert second["expires_at"] is None
    assert [m["expires_at"] for m in outbox["messages"]] == [first["expires_at"], None]
    assert status_of["expires_at"] == first["expires_at"]
    assert status_of["state"] == "pending"
    assert popped["message"]["expires_at"] == first["expires_at"]
    assert plain["message_id"] == second["id"]


def test_the_default_ttl_applies_to_sends_that_name_none(
    settings: SettingsWrapper, projects: None
) -> None:
    settings.AI_MEMORY_MESSAGE_TTL = 90
    defaulted = send()
    named = send(expires_in_seconds=7 * 86_400)
    settings.AI_MEMORY_MESSAGE_TTL = None
    never = send()

    assert defaulted.expires_at == defaulted.created_at + timedelta(seconds=90)
    assert named.expires_at == named.created_at + timedelta(days=7)
    assert never.expires_at is None
    stored = {m.pk: m.expires_at for m in Message.objects.all()}
    assert stored == {m.pk: m.expires_at for m in (defaulted, named, never)}


@pytest.mark.parametrize("seconds", [59, 2_592_001, 0, -60, 10**12])
def test_an_expiry_outside_60_to_2592000_seconds_is_invalid_expiry_and_writes_nothing(
    api: ApiCall, projects: None, seconds: int
) -> None:
    status, body = api("post", "/api/v1/messages", {**SEND, "expires_in_seconds": seconds})

    assert status == 400
    assert body["code"] == "invalid_expiry" == Code.INVALID_EXPIRY.value
    assert "60..2592000 seconds" in body["detail"]
    assert not Message.objects.exists()


@pytest.mark.parametrize("seconds", [60, 2_592_000])
def test_both_ends_of_the_range_are_accepted(api: ApiCall, projects: None, seconds: int) -> None:
    status, sent = api("post", "/api/v1/messages", {**SEND, "expires_in_seconds": seconds})

    assert status == 201
    message = Message.objects.get(pk=sent["message_id"])
    assert message.expires_at == message.created_at + timedelta(seconds=seconds)


def test_a_whole_number_written_as_a_float_is_an_expiry(api: ApiCall, projects: None) -> None:
    # JSON (and JSON Schema's integer) let a client write 3600 as 3600.0.
    status, sent = api("post", "/api/v1/messages", {**SEND, "expires_in_seconds": 3600.0})

    assert status == 201
    message = Message.objects.get(pk=sent["message_id"])
    assert message.expires_at == message.created_at + timedelta(hours=1)


@pytest.mark.parametrize("value", [90.5, "3600", True])
def test_an_expiry_that_is_no_whole_number_writes_nothing(
    api: ApiCall, projects: None, value: object
) -> None:
    status, _ = api("post", "/api/v1/messages", {**SEND, "expires_in_seconds": value})

    assert status == 422
    assert not Message.objects.exists()


def test_the_service_refuses_a_boolean_as_an_expiry(projects: None) -> None:
    with pytest.raises(BadRequest) as refused:
        send(expires_in_seconds=True)
    assert refused.value.code == Code.INVALID_EXPIRY
    assert not Message.objects.exists()


# ---- expired at once, everywhere ------------------------------------------------------------


def test_an_expired_message_is_never_listed_popped_or_cancelled(projects: None) -> None:
    gone = send("expired", expires_in_seconds=HOUR)
    live = send("still wanted", expires_in_seconds=HOUR)
    expire(gone)

    inbox = [m.pk for m in Message.objects.pending().inbox_of(gone.to_project)]
    cancelled = message_cancel(
        principal=ANON, workspace="default", project="project-a", message_id=str(gone.pk)
    )
    named = pop_b(message_id=str(gone.pk))
    popped = pop_b()

    assert inbox == [live.pk]
    assert cancelled == 0
    assert named is None
    assert popped is not None and popped.pk == live.pk
    assert pop_b() is None
    gone.refresh_from_db()
    assert gone.state == Message.State.PENDING  # stored so until the background runs
    assert gone.state_at(timezone.now()) == Message.State.EXPIRED


def test_cancel_all_counts_only_the_messages_that_have_not_expired(projects: None) -> None:
    expired = [send(f"old {n}", expires_in_seconds=60) for n in range(3)]
    for message in expired:
        expire(message)
    send("fresh")

    count = message_cancel(principal=ANON, workspace="default", project="project-a")

    assert count == 1
    states = sorted(m.state_at(timezone.now()) for m in Message.objects.all())
    assert states == ["cancelled", "expired", "expired", "expired"]


def test_rest_list_status_and_cancel_see_an_expired_message_as_expired(
    api: ApiCall, projects: None
) -> None:
    _, sent = api("post", "/api/v1/messages", {**SEND, "expires_in_seconds": 60})
    expire(Message.objects.get(pk=sent["message_id"]))

    _, inbox = api("get", "/api/v1/messages", B)
    _, outbox = api("get", "/api/v1/messages", {**A, "box": "outbox"})
    _, to_sender = api("get", f"/api/v1/messages/{sent['message_id']}", A)
    _, to_recipient = api("get", f"/api/v1/messages/{sent['message_id']}", B)
    _, cancelled = api("post", "/api/v1/messages/cancel", {**A, "message_id": sent["message_id"]})
    _, popped = api("post", "/api/v1/messages/pop", B)

    assert inbox == {"messages": []}
    assert outbox == {"messages": []}
    assert to_sender["state"] == to_recipient["state"] == "expired"
    assert to_sender["expires_at"] is not None
    assert cancelled == {"cancelled": 0}
    assert popped == {"message": None}


def test_status_says_expired_once_the_background_stored_it(api: ApiCall, projects: None) -> None:
    message = send(expires_in_seconds=60)
    expire(message)

    stored = messages_expire()
    _, status = api("get", f"/api/v1/messages/{message.pk}", A)

    assert stored == 1
    assert Message.objects.get(pk=message.pk).state == Message.State.EXPIRED
    assert status["state"] == "expired"


def test_expired_messages_do_not_count_against_the_inbox_bound(projects: None) -> None:
    for n in range(MAX_PENDING_PER_INBOX):
        send(f"request {n}", expires_in_seconds=60)
    with pytest.raises(Conflict, match="is full"):
        send("one too many")
    Message.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    fits = send("room again")

    assert fits.pk is not None
    assert Message.objects.pending().count() == 1


def test_briefing_and_the_session_start_notice_count_no_expired_message(
    api: ApiCall, projects: None
) -> None:
    expire(send("expired"))
    _, briefing = api("get", "/api/v1/briefing", B)
    _, started = api("post", "/api/v1/sessions", {**B, "session_id": "s-1"})
    send("waiting")
    _, started_again = api("post", "/api/v1/sessions", {**B, "session_id": "s-2"})

    assert briefing["pending_message_count"] == 0
    assert started["pending_message_count"] == 0
    assert "📬" not in started["context"]
    assert started_again["pending_message_count"] == 1
    assert "📬 ai-memory: 1 cross-project message waiting" in started_again["context"]


def test_the_web_shows_no_expired_message_in_badges_summary_or_mailbox(
    client: Client, projects: None
) -> None:
    expire(send("expired request, never shown", subject="expired subject"))
    quiet_home = page(client, "/web/")
    quiet_mailbox = section(page(client, "/web/w/default/project-b/"), "mailbox-heading")
    send("the live request", subject="live subject")
    home = page(client, "/web/")
    mailbox = section(page(client, "/web/w/default/project-b/"), "mailbox-heading")

    assert "badge" not in cards(quiet_home)["default/project-b"]
    assert "expired subject" not in quiet_mailbox
    assert "1 inbox" in text_of(cards(home)["default/project-b"])
    assert "live subject" in mailbox
    assert "expired subject" not in mailbox
    assert "expired request" not in home + mailbox


# ---- a pop racing the clock -----------------------------------------------------------------


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[datetime]]:
    """``timezone.now`` stopped at a moment the test moves (``frozen[0]``)."""
    moment = [timezone.now()]
    monkeypatch.setattr(timezone, "now", lambda: moment[0])
    yield moment


def test_a_message_expires_at_the_moment_itself(projects: None, frozen: list[datetime]) -> None:
    message = send(expires_in_seconds=60)
    frozen[0] += timedelta(seconds=60)

    assert pop_b() is None
    assert Message.objects.pending().count() == 0
    frozen[0] -= timedelta(microseconds=1)
    claimed = pop_b()
    assert claimed is not None and claimed.pk == message.pk


def test_a_pop_never_returns_a_message_whose_time_has_passed(
    project_a: Project, project_b: Project, frozen: list[datetime]
) -> None:
    """A property over many rounds: whatever mix of expiries waits in the inbox, at a
    moment on the clock, every pop (oldest or named) claims only messages unexpired at
    that moment, and no unexpired message is left behind."""
    rng = random.Random(27)
    for _ in range(40):
        Message.objects.all().delete()
        start = frozen[0]
        expiries = [
            None if rng.random() < 0.2 else start + timedelta(milliseconds=rng.randint(-3, 3))
            for _ in range(rng.randint(1, 6))
        ]
        made = [
            Message.objects.create(
                to_project=project_b,
                from_project=project_a,
                body=f"n{n}",
                created_at=start - timedelta(seconds=10 - n),
                expires_at=expires,
            )
            for n, expires in enumerate(expiries)
        ]
        live = {m.pk for m in made if m.expires_at is None or m.expires_at > start}
        victim = rng.choice(made)
        named = pop_b(message_id=str(victim.pk))
        claimed = [] if named is None else [named.pk]
        while (popped := pop_b()) is not None:
            claimed.append(popped.pk)

        assert (named is not None) == (victim.pk in live)
        assert set(claimed) == live
        assert len(claimed) == len(live)
        frozen[0] = start + timedelta(milliseconds=1)


@pytest.fixture
def ticking(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[datetime]]:
    """``timezone.now`` that moves on by one microsecond at every reading, so a moment set
    a few readings ahead falls inside whatever runs next (``ticking[0]`` is the clock)."""
    moment = [timezone.now()]

    def now() -> datetime:
        moment[0] += timedelta(microseconds=1)
        return moment[0]

    monkeypatch.setattr(timezone, "now", now)
    yield moment


def test_a_pop_racing_an_expiry_never_returns_the_message(
    project_a: Project, project_b: Project, ticking: list[datetime]
) -> None:
    """1,000 rounds of one message whose expiry falls among the clock readings of the pop
    that claims it (before the pop, at any reading within it, or after it): a message
    is returned only when its claim's own moment came before its expiry, and one that is
    not returned stays pending with its time run out."""
    rng = random.Random(1000)
    readings_per_pop = _readings_of_one_pop(project_a, project_b, ticking)
    returned = refused = 0
    for _ in range(1000):
        Message.objects.all().delete()
        ahead = rng.randint(-1, readings_per_pop + 1)
        message = Message.objects.create(
            to_project=project_b,
            from_project=project_a,
            body="deploy the fix tonight",
            created_at=ticking[0] - timedelta(seconds=1),
            expires_at=ticking[0] + timedelta(microseconds=ahead),
        )
        named = rng.random() < 0.5
        popped = pop_b(message_id=str(message.pk)) if named else pop_b()

        if popped is not None:
            returned += 1
            assert popped.claimed_at is not None and message.expires_at is not None
            assert popped.claimed_at < message.expires_at
        else:
            refused += 1
            message.refresh_from_db()
            assert message.state == Message.State.PENDING
            assert message.state_at(ticking[0]) == Message.State.EXPIRED
    # Both outcomes came up often, so the race was run from both sides.
    assert returned > 100 and refused > 100


def _readings_of_one_pop(project_a: Project, project_b: Project, clock: list[datetime]) -> int:
    """How many times a pop of a live message reads the clock."""
    Message.objects.create(to_project=project_b, from_project=project_a, body="live")
    before = clock[0]
    assert pop_b() is not None
    return (clock[0] - before) // timedelta(microseconds=1)


# ---- linked replies -------------------------------------------------------------------------


def _question(to: str = "project-a", sender: str = "project-b") -> Message:
    return send(
        decision_body_write(
            "Ship it?",
            [{"id": "yes", "label": "Yes"}, {"id": "no", "label": "No"}],
            requires_root=False,
            reply_project=f"default/{sender}",
        ),
        to=to,
        sender=sender,
        subject=decision_subject("Ship it?"),
    )


def test_a_decision_reply_without_in_reply_to_is_linked_to_its_question(
    projects: None,
) -> None:
    question = _question()
    reply = send(
        decision_reply_write(str(question.pk), "yes", "go"),
        to="project-b",
        sender="project-a",
        subject=decision_reply_subject(str(question.pk)),
    )

    assert reply.in_reply_to == question.pk
    assert Message.objects.get(pk=reply.pk).in_reply_to == question.pk


def test_a_decision_reply_naming_a_question_of_other_projects_is_sent_unlinked(
    projects: None, project_c: Project
) -> None:
    elsewhere = _question(to="project-c", sender="project-b")  # project-a is neither side
    unknown = uuid.uuid4()
    replies = [
        send(
            decision_reply_write(str(target), "yes"),
            to="project-b",
            sender="project-a",
            subject=decision_reply_subject(str(target)),
        )
        for target in (elsewhere.pk, unknown)
    ]
    not_an_id = send(
        decision_reply_write("not-a-uuid", "yes"),
        to="project-b",
        subject=decision_reply_subject("not-a-uuid"),
    )

    assert [reply.in_reply_to for reply in replies] == [None, None]
    assert not_an_id.in_reply_to is None


def test_an_explicit_in_reply_to_is_kept_on_a_decision_reply(projects: None) -> None:
    question = _question()
    other = send("an earlier request", to="project-a", sender="project-b")
    reply = send(
        decision_reply_write(str(question.pk), "no"),
        to="project-b",
        subject=decision_reply_subject(str(question.pk)),
        in_reply_to=str(other.pk),
    )

    assert reply.in_reply_to == other.pk
