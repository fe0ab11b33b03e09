"""Notifications of questions (docs/reference.md#notifications): delivered by Apprise to
real receivers on loopback, by the database queue's real worker, once per (question,
event, target).

The deliveries run in threads of their own, with connections of their own, so these
tests commit for real (``transaction=True``)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.principal import Principal
from messaging.models import Message, NotificationDelivery, NotificationTarget
from messaging.notifications import (
    FAILURES_THAT_DISABLE,
    RETRY_DELAYS,
    deliveries_attempt,
    deliveries_make,
    delivery_attempt,
    notification_target_add,
    question_of,
)
from messaging.services import message_send
from projects.models import Grant, Project
from tests.background import tasks_run_due
from tests.conftest import Persona, make_project
from tests.decision_examples import question_send
from tests.receivers import HttpReceiver, SmtpReceiver, http_receiver, smtp_receiver

__all__ = ["http_receiver", "smtp_receiver"]  # the fixtures

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Principal.root()


@pytest.fixture
def projects(alice: Persona, bob: Persona, charlie: Persona, auth_on: str) -> Project:
    """alice writes ``operator`` (the mailbox) and ``orchestrator`` (the asker); bob only
    reads the mailbox; charlie has nothing."""
    operator = make_project(alice, "default", "operator", restricted=True)
    make_project(alice, "default", "orchestrator", restricted=True)
    Grant.objects.create(user=bob.user, project=operator, level=Grant.Level.READ)
    return operator


def ask(**fields: Any) -> Message:
    return question_send(**fields)


def test_a_question_is_told_to_who_may_answer_and_to_the_server_wide_targets(
    projects: Project,
    alice: Persona,
    bob: Persona,
    charlie: Persona,
    http_receiver: HttpReceiver,
    settings: SettingsWrapper,
) -> None:
    settings.AI_MEMORY_NOTIFY_URLS = http_receiver.url("everyone")
    settings.AI_MEMORY_PUBLIC_URL = "https://memory.example.test"
    for persona in (alice, bob, charlie):
        notification_target_add(user=persona.user, url=http_receiver.url(persona.user.username))

    question = ask(details="x" * 600)
    tasks_run_due()

    told = {posted.path: posted.body for posted in http_receiver.all_now()}
    assert sorted(told) == ["alice", "everyone"]
    alices = told["alice"]
    assert alices["title"] == "decision: Accept the known-flake exception on the export test?"
    body = alices["message"]
    assert "- Accept the exception (accept) (recommended)" in body
    assert "- Send it back (reject): The test has to be stable." in body
    assert "x" * 500 + "…" in body and "x" * 501 not in body
    assert "Asked by default/orchestrator." in body
    page = f"https://memory.example.test/web/w/default/operator/decisions/{question.pk}/"
    assert f"Answer page: {page}" in body
    assert body.count("https://memory.example.test/web/a/") == 2  # one link per option
    assert told["everyone"]["message"].count("/web/a/") == 0  # server-wide: no answer links
    assert f"Answer page: {page}" in told["everyone"]["message"]
    deliveries = NotificationDelivery.objects.filter(message=question)
    assert sorted(deliveries.values_list("state", "attempts")) == [("sent", 1), ("sent", 1)]


def test_a_notification_carries_no_token_and_no_target_url(
    projects: Project, alice: Persona, http_receiver: HttpReceiver, settings: SettingsWrapper
) -> None:
    secret_url = http_receiver.url("alice") + "?token=target-secret-123"
    notification_target_add(user=alice.user, url=secret_url)

    ask()
    tasks_run_due()

    [posted] = http_receiver.all_now()
    text = f"{posted.body['title']}\n{posted.body['message']}"
    assert alice.token not in text and settings.AI_MEMORY_ROOT_TOKEN not in text
    assert "target-secret-123" not in text and str(http_receiver.port) not in text
    assert "links need AI_MEMORY_PUBLIC_URL" in text


def test_mail_reaches_a_real_smtp_server(
    projects: Project, alice: Persona, smtp_receiver: SmtpReceiver
) -> None:
    notification_target_add(user=alice.user, url=smtp_receiver.url("alice@example.com"))

    ask()
    tasks_run_due()

    mail = smtp_receiver.mail.get(timeout=15)
    assert mail["Subject"] == "decision: Accept the known-flake exception on the export test?"
    assert mail["To"] == "alice@example.com"


def test_each_event_is_delivered_once_however_many_workers_race(
    projects: Project, alice: Persona, http_receiver: HttpReceiver
) -> None:
    notification_target_add(user=alice.user, url=http_receiver.url("alice"))
    question = ask()
    barrier = threading.Barrier(6)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            found = question_of(question.pk)
            assert found is not None
            deliveries_attempt(deliveries_make(found, NotificationDelivery.Event.ARRIVAL))
            tasks_run_due()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert [posted.path for posted in http_receiver.all_now()] == ["alice"]
    assert NotificationDelivery.objects.get().state == NotificationDelivery.State.SENT


def test_a_failing_target_is_retried_then_disabled_with_its_reason(
    projects: Project, alice: Persona, http_receiver: HttpReceiver
) -> None:
    http_receiver.statuses["alice"] = 500
    target = notification_target_add(user=alice.user, url=http_receiver.url("alice"))
    question = ask()

    tasks_run_due()
    delivery = NotificationDelivery.objects.get(message=question)
    assert (delivery.state, delivery.attempts) == ("pending", 1)
    assert "500" in delivery.last_error or delivery.last_error
    [retry] = _queued("delivery_retry")
    due_in = (retry.run_after - timezone.now()).total_seconds()
    assert RETRY_DELAYS[0] - 2 <= due_in <= RETRY_DELAYS[0]

    for _ in range(len(RETRY_DELAYS)):  # the clock moved: each retry is due
        done = delivery_attempt(delivery.pk)
        assert done is not None

    delivery.refresh_from_db()
    target.refresh_from_db()
    assert (delivery.state, delivery.attempts) == ("failed", 1 + len(RETRY_DELAYS))
    assert target.failures == FAILURES_THAT_DISABLE and not target.enabled
    assert target.disabled_reason.startswith("disabled after 5 failed attempts in a row")
    assert len(http_receiver.all_now()) == 1 + len(RETRY_DELAYS)
    assert delivery_attempt(delivery.pk) is None  # failed for good: nothing more is sent


def test_a_target_that_hangs_holds_up_no_other(
    projects: Project, alice: Persona, bob: Persona, http_receiver: HttpReceiver
) -> None:
    Grant.objects.filter(user=bob.user).update(level=Grant.Level.WRITE)
    Grant.objects.create(
        user=bob.user, project=Project.objects.get(name="orchestrator"), level="write"
    )
    http_receiver.held.add("alice")
    notification_target_add(user=alice.user, url=http_receiver.url("alice"))
    notification_target_add(user=bob.user, url=http_receiver.url("bob"))
    worker = threading.Thread(target=tasks_run_due)

    ask()
    worker.start()

    assert http_receiver.next().path == "bob"  # while alice's is still held
    http_receiver.release.set()
    worker.join()
    assert http_receiver.next().path == "alice"


def test_a_reminder_goes_once_and_only_while_the_question_is_unanswered(
    projects: Project, alice: Persona, http_receiver: HttpReceiver
) -> None:
    from messaging.tasks import question_remind

    notification_target_add(user=alice.user, url=http_receiver.url("alice"))
    question = ask(deadline="2h")
    tasks_run_due()
    assert http_receiver.next().body["title"].startswith("decision: ")
    [reminder] = _queued("question_remind")
    assert reminder.run_after == question.created_at + timedelta(minutes=96)

    question_remind.call(str(question.pk))
    question_remind.call(str(question.pk))

    [posted] = http_receiver.all_now()
    assert posted.body["title"] == "reminder: Accept the known-flake exception on the export test?"
    assert "Deadline: " in posted.body["message"]


def test_a_removed_target_is_told_nothing(
    projects: Project, alice: Persona, http_receiver: HttpReceiver
) -> None:
    target = notification_target_add(user=alice.user, url=http_receiver.url("alice"))
    NotificationTarget.objects.filter(pk=target.pk).update(enabled=False)

    ask()
    tasks_run_due()

    assert http_receiver.all_now() == []


def _queued(task_name: str) -> list[Any]:
    from django_tasks_db.models import DBTaskResult

    return list(
        DBTaskResult.objects.filter(task_path=f"messaging.tasks.{task_name}", status="READY")
    )


def test_a_question_queues_one_task_and_a_plain_message_none(projects: Project) -> None:
    message_send(
        principal=ROOT,
        to_workspace="default",
        to_project="operator",
        from_workspace="default",
        from_project="orchestrator",
        body="Please add an endpoint.",
    )
    assert _queued("question_arrived") == []

    question = ask(deadline="2h")

    [task] = _queued("question_arrived")
    assert task.args_kwargs == {"args": [str(question.pk)], "kwargs": {}}


def test_an_anonymous_server_tells_only_the_server_wide_targets(
    http_receiver: HttpReceiver, settings: SettingsWrapper
) -> None:
    # A user without a token: issuing one would turn authentication on.
    dana = User.objects.create_user("dana", password="dana-password")
    make_project(None, "default", "operator")
    make_project(None, "default", "orchestrator")
    settings.AI_MEMORY_NOTIFY_URLS = http_receiver.url("everyone")
    settings.AI_MEMORY_PUBLIC_URL = "https://memory.example.test"
    NotificationTarget.objects.create(user=dana, url=http_receiver.url("dana"))

    ask()
    tasks_run_due()

    [posted] = http_receiver.all_now()
    assert posted.path == "everyone"
    assert "/web/a/" not in posted.body["message"]  # no answer links without authentication


def test_an_attempt_whose_worker_stopped_is_failed_and_never_sent_again(
    projects: Project, alice: Persona, http_receiver: HttpReceiver
) -> None:
    from messaging.housekeeping import housekeeping_run

    notification_target_add(user=alice.user, url=http_receiver.url("alice"))
    question = ask()
    found = question_of(question.pk)
    assert found is not None
    [delivery_id] = deliveries_make(found, NotificationDelivery.Event.ARRIVAL)
    # A worker claimed it and stopped (a restart) before it recorded what came of it.
    NotificationDelivery.objects.filter(pk=delivery_id).update(
        claimed_at=timezone.now() - timedelta(minutes=6), attempts=1
    )

    housekeeping_run()
    tasks_run_due()

    delivery = NotificationDelivery.objects.get(pk=delivery_id)
    assert (delivery.state, delivery.attempts) == ("failed", 1)
    assert delivery.last_error.startswith("the worker stopped during this attempt")
    assert delivery_attempt(delivery_id) is None
    assert http_receiver.all_now() == []


@pytest.mark.parametrize("requires_root", [False, True])
def test_who_is_told_is_who_may_answer_in_three_queries(
    projects: Project,
    alice: Persona,
    bob: Persona,
    charlie: Persona,
    settings: SettingsWrapper,
    requires_root: bool,
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from messaging.answer_selectors import answer_refusal
    from messaging.notifications import question_destinations

    settings.AI_MEMORY_ROOT_USERNAME = "alice"
    dana = User.objects.create_user("dana", password="dana-password")
    Grant.objects.create(user=dana, project=projects, level=Grant.Level.WRITE)  # not the asker
    everyone = [alice.user, bob.user, charlie.user, dana]
    for user in everyone:
        notification_target_add(user=user, url=f"json://127.0.0.1:9/{user.username}")
    question = question_of(ask(requires_root=requires_root).pk)
    assert question is not None

    with CaptureQueriesContext(connection) as queries:
        told = {d.target.user.username for d in question_destinations(question) if d.target}

    expected = {
        user.username
        for user in everyone
        if answer_refusal(Principal.for_user(user), projects, question) is None
    }
    assert told == expected == {"alice"}
    # The targets, the reply_project, every user's grants (the root token is set, so
    # whether authentication is on costs none), however many users.
    assert len(queries.captured_queries) == 3
