"""Retention (docs/reference.md#messages): the purge deletes claimed, cancelled and
expired messages (with the pop request ids naming them) and claimed and expired handoffs
that finished more than N days ago, and nothing else: never a pending message, never a
page. ``manage purge_messages --dry-run`` counts the same and changes nothing."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from messaging.housekeeping import housekeeping_run
from messaging.models import Announcement, Message, PopRequest
from messaging.retention import Purged, housekeeping, messages_expire, messages_purge
from projects.models import AgentSession, Handoff, Page, Project

pytestmark = pytest.mark.django_db

DAY = timedelta(days=1)


def _message(a: Project, b: Project, label: str, **fields: Any) -> Message:
    return Message.objects.create(to_project=b, from_project=a, body=label, **fields)


def _handoff(project: Project, label: str, **fields: Any) -> Handoff:
    return Handoff.objects.create(project=project, body=label, **fields)


@pytest.fixture
def history(project_a: Project, project_b: Project) -> dict[str, set[str]]:
    """Messages and handoffs of every kind around a 30-day cut; which go and which stay."""
    now = timezone.now()
    old, recent = now - 40 * DAY, now - 2 * DAY
    going = [
        _message(project_a, project_b, "claimed long ago", state="claimed", created_at=old,
                 claimed_at=old + DAY),
        _message(project_a, project_b, "cancelled long ago", state="cancelled", created_at=old,
                 cancelled_at=old),
        _message(project_a, project_b, "stored expired", state="expired", created_at=old,
                 expires_at=old + DAY),
        _message(project_a, project_b, "expired, not yet stored", created_at=old,
                 expires_at=old + DAY),
    ]  # fmt: skip
    staying = [
        _message(project_a, project_b, "pending for ages", created_at=old),
        _message(project_a, project_b, "pending, expires later", created_at=old,
                 expires_at=now + DAY),
        _message(project_a, project_b, "old, claimed lately", state="claimed", created_at=old,
                 claimed_at=recent),
        _message(project_a, project_b, "expired lately", created_at=old, expires_at=recent),
        _message(project_a, project_b, "claimed lately", state="claimed", created_at=recent,
                 claimed_at=recent),
    ]  # fmt: skip
    # Each pop request id dates from its pop, which claimed its message.
    PopRequest.objects.create(
        inbox=project_b,
        principal_key="anon",
        request_id="r-old",
        message=going[0],
        created_at=old + DAY,  # its claimed_at
    )
    PopRequest.objects.create(
        inbox=project_b,
        principal_key="anon",
        request_id="r-kept",
        message=staying[2],
        created_at=recent,  # its claimed_at
    )
    handoffs_going = [
        _handoff(project_b, "claimed long ago", state="claimed", created_at=old,
                 expires_at=old + 7 * DAY, claimed_at=old + DAY),
        _handoff(project_b, "expired long ago", created_at=old, expires_at=old + 7 * DAY),
    ]  # fmt: skip
    handoffs_staying = [
        _handoff(project_b, "open", created_at=recent, expires_at=now + 5 * DAY),
        _handoff(project_b, "expired lately", created_at=old, expires_at=recent),
        _handoff(project_b, "claimed lately", state="claimed", created_at=recent,
                 expires_at=now + 5 * DAY, claimed_at=recent),
    ]  # fmt: skip
    Page.objects.create(project=project_b, path="notes/old", body="kept", updated_at=old)
    return {
        "going": {m.body for m in going},
        "staying": {m.body for m in staying},
        "handoffs_going": {h.body for h in handoffs_going},
        "handoffs_staying": {h.body for h in handoffs_staying},
    }


def _bodies() -> set[str]:
    return set(Message.objects.values_list("body", flat=True))


def _handoff_bodies() -> set[str]:
    return set(Handoff.objects.values_list("body", flat=True))


def _snapshot() -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = list(Message.objects.order_by("id").values_list())
    rows += list(Handoff.objects.order_by("id").values_list())
    rows += list(PopRequest.objects.order_by("id").values_list())
    rows += list(Page.objects.order_by("id").values_list())
    return rows


@pytest.mark.parametrize("batch", [500, 2, 1])
def test_the_purge_deletes_only_what_finished_before_the_cut(
    history: dict[str, set[str]], batch: int
) -> None:
    assert _bodies() == history["going"] | history["staying"]
    assert (Message.objects.count(), Handoff.objects.count(), PopRequest.objects.count()) == (
        9,
        5,
        2,
    )

    purged = messages_purge(older_than_days=30, batch=batch, pause=0)

    assert purged == Purged(messages=4, pop_requests=1, handoffs=2, expired=2)
    assert _bodies() == history["staying"]
    assert _handoff_bodies() == history["handoffs_staying"]
    assert list(PopRequest.objects.values_list("request_id", flat=True)) == ["r-kept"]
    assert Page.objects.count() == 1
    assert Message.objects.get(body="expired lately").state == Message.State.EXPIRED
    assert Message.objects.get(body="pending for ages").state == Message.State.PENDING


def test_the_purge_deletes_a_message_a_session_was_told_of(
    project_a: Project, project_b: Project
) -> None:
    old = timezone.now() - 40 * DAY
    told = _message(project_a, project_b, "told, claimed long ago", state="claimed",
                    created_at=old, claimed_at=old)  # fmt: skip
    session = AgentSession.objects.create(session_id="s-told", project=project_b)
    Announcement.objects.create(session=session, message=told)

    assert messages_purge(older_than_days=30).messages == 1

    assert not Message.objects.filter(pk=told.pk).exists()
    assert not Announcement.objects.exists()


def test_a_second_purge_finds_nothing(history: dict[str, set[str]]) -> None:
    messages_purge(older_than_days=30, pause=0)

    assert messages_purge(older_than_days=30, pause=0) == Purged(0, 0, 0, 0)


def test_zero_days_deletes_everything_finished_and_still_no_pending_message(
    history: dict[str, set[str]],
) -> None:
    messages_purge(older_than_days=0, pause=0)

    assert _bodies() == {"pending for ages", "pending, expires later"}
    assert _handoff_bodies() == {"open"}
    assert Page.objects.count() == 1


def test_a_dry_run_changes_nothing_and_counts_what_the_purge_deletes(
    history: dict[str, set[str]],
) -> None:
    before = _snapshot()

    would = messages_purge(older_than_days=30, batch=2, dry_run=True, pause=0)

    assert _snapshot() == before
    assert would == Purged(messages=4, pop_requests=1, handoffs=2, expired=2)
    assert messages_purge(older_than_days=30, pause=0) == would


def test_the_command_prints_what_it_deleted_and_on_a_dry_run_what_it_would(
    history: dict[str, set[str]],
) -> None:
    before = _snapshot()
    dry, real = io.StringIO(), io.StringIO()

    call_command("purge_messages", "--older-than-days", "30", "--dry-run", stdout=dry)
    unchanged = _snapshot() == before
    call_command("purge_messages", "--older-than-days", "30", "--batch-size", "3", stdout=real)

    assert unchanged
    assert dry.getvalue() == (
        "would delete 4 messages (with 1 pop request id) and 2 handoffs finished more than "
        "30 days ago; would store 2 expired messages as expired\n"
    )
    assert real.getvalue() == dry.getvalue().replace("would delete", "deleted").replace(
        "would store", "stored"
    )
    assert _bodies() == history["staying"]


@pytest.mark.parametrize("days", ["-1", "soon"])
def test_the_command_refuses_a_negative_or_unreadable_age_and_deletes_nothing(
    history: dict[str, set[str]], days: str
) -> None:
    before = _snapshot()

    with pytest.raises(CommandError, match="--older-than-days"):
        call_command("purge_messages", "--older-than-days", days)

    assert _snapshot() == before


def test_the_expiry_sweep_stores_only_passed_pending_messages(
    project_a: Project, project_b: Project
) -> None:
    now = timezone.now()
    passed = [_message(project_a, project_b, f"passed {n}", expires_at=now - DAY) for n in range(5)]
    _message(project_a, project_b, "later", expires_at=now + DAY)
    _message(project_a, project_b, "never")
    _message(project_a, project_b, "claimed", state="claimed", expires_at=now - DAY)

    stored = messages_expire(now=now, batch=2, pause=0)

    assert stored == len(passed)
    states = dict(Message.objects.values_list("body", "state"))
    assert states == {
        **{m.body: "expired" for m in passed},
        "later": "pending",
        "never": "pending",
        "claimed": "claimed",
    }


def test_housekeeping_purges_only_with_a_retention_set(
    settings: SettingsWrapper, history: dict[str, set[str]]
) -> None:
    settings.AI_MEMORY_RETENTION_DAYS = None
    assert housekeeping() is None
    assert _bodies() == history["going"] | history["staying"]  # expired stored, none deleted
    assert Message.objects.filter(state="expired").count() == 3

    settings.AI_MEMORY_RETENTION_DAYS = 30
    purged = housekeeping()

    assert purged is not None and purged.messages == 4
    assert _bodies() == history["staying"]


def test_the_walk_steps_over_a_long_run_of_kept_rows(
    project_a: Project, project_b: Project
) -> None:
    """Rows created before the cut but finished after it are read once per purge, and the
    ones behind them are still reached, batch after batch."""
    now = timezone.now()
    old = now - 40 * DAY
    for n in range(7):
        _message(project_a, project_b, f"kept {n}", state="claimed",
                 created_at=old + timedelta(seconds=n), claimed_at=now - DAY)  # fmt: skip
    _message(project_a, project_b, "behind them", state="cancelled",
             created_at=old + timedelta(minutes=5), cancelled_at=old + timedelta(minutes=5))  # fmt: skip

    purged = messages_purge(older_than_days=30, batch=2, pause=0, now=now)

    assert purged.messages == 1
    assert "behind them" not in _bodies()
    assert len(_bodies()) == 7


@pytest.mark.django_db(transaction=True)  # the housekeeping closes its own connections
def test_the_servers_housekeeping_runs_the_retention_purge(
    settings: SettingsWrapper, history: dict[str, set[str]]
) -> None:
    settings.AI_MEMORY_RETENTION_DAYS = 30

    housekeeping_run()

    assert _bodies() == history["staying"]
    assert _handoff_bodies() == history["handoffs_staying"]


@pytest.mark.parametrize("dry_run", [False, True])
def test_zero_days_keeps_what_a_retry_within_24_hours_needs(
    project_a: Project, project_b: Project, dry_run: bool
) -> None:
    """A send's retry key and a pop's request id answer their retries for 24 hours,
    whatever the retention (docs/reference.md#expiry-and-retention)."""
    from messaging.services import message_pop, message_send
    from tests.messaging.conftest import ANON

    def send() -> Any:
        return message_send(
            principal=ANON,
            to_workspace="default",
            to_project="project-b",
            from_workspace="default",
            from_project="project-a",
            body="Add an export.",
            idempotency_key="send-once",
        )

    def pop() -> Message | None:
        return message_pop(
            principal=ANON, workspace="default", project="project-b", request_id="pop-once"
        )

    sent = send().message
    claimed = pop()
    send_later = _message(project_a, project_b, "another, still pending")
    cancelled = _message(project_a, project_b, "cancelled, no key", state="cancelled",
                         cancelled_at=timezone.now() - timedelta(seconds=1))  # fmt: skip

    purged = messages_purge(older_than_days=0, dry_run=dry_run, pause=0)

    # Only the cancelled message without a key goes; the keyed send and the popped one stay.
    assert (purged.messages, purged.pop_requests) == (1, 0)
    assert Message.objects.filter(pk=cancelled.pk).exists() == dry_run
    assert Message.objects.filter(pk=sent.pk).exists()
    again = send()
    assert (again.message.pk, again.replay) == (sent.pk, True)
    retried = pop()
    assert claimed is not None and retried is not None and retried.pk == claimed.pk
    assert Message.objects.get(pk=send_later.pk).state == Message.State.PENDING


def test_the_command_counts_one_of_each_in_the_singular(
    project_a: Project, project_b: Project
) -> None:
    old = timezone.now() - 3 * DAY
    claimed = _message(project_a, project_b, "claimed", state="claimed", created_at=old,
                       claimed_at=old)  # fmt: skip
    PopRequest.objects.create(
        inbox=project_b, principal_key="anon", request_id="r", message=claimed, created_at=old
    )
    _message(project_a, project_b, "expired lately", created_at=old,
             expires_at=timezone.now() - timedelta(hours=1))  # fmt: skip
    _handoff(project_b, "claimed", state="claimed", created_at=old, expires_at=old + DAY,
             claimed_at=old)  # fmt: skip
    said = io.StringIO()

    call_command("purge_messages", "--older-than-days", "1", "--dry-run", stdout=said)

    assert said.getvalue() == (
        "would delete 1 message (with 1 pop request id) and 1 handoff finished more than "
        "1 day ago; would store 1 expired message as expired\n"
    )
