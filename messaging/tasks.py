"""The server's background work, on the Django Tasks API (docs/operating.md#background-work).

Each task runs in the worker that ``ai-memory serve`` starts beside its web processes
(``ai-memory manage db_worker`` runs one on its own, for a host of its own), never on a
request's path, after the commit that enqueued it. The queue is a table: tasks outlive a
restart, and any host's worker may take any of them. What a task does is idempotent or
claimed (``messaging.notifications``), so a task run twice does nothing twice.

- A question: its arrival told at once, a reminder at 80% of the way to its deadline,
  and at the deadline the asker's fallback answer and the outcome told
  (``question_arrived``, queued by the question's send itself: ``question_task_row``).
- A notification that failed: tried again after 5, 15, 30 and 60 s.
- Mail for a project with a wake webhook: the wake, at most one per debounce window, and
  a failed one again after 5, 15, 30 and 60 s (``wake_fire``, queued after the send's
  commit by ``wake_schedule``; ``messaging.wake_webhooks``).

The housekeeping's task, at start and every hour, is in ``messaging.housekeeping``.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone
from django_tasks import task
from django_tasks_db.models import DBTaskResult, get_date_max

from aimemory_site.lib.decisions import (
    deadline_text,
    decision_reply_subject,
    decision_reply_write,
)
from aimemory_site.lib.errors import AppError
from aimemory_site.lib.principal import Principal
from messaging.answer_selectors import (
    decision_answer_taken,
    decision_of,
    question_deadline,
    question_fallback,
)
from messaging.models import Message, NotificationDelivery
from messaging.notifications import (
    Attempted,
    deliveries_attempt,
    deliveries_make,
    delivery_attempt,
    question_of,
)
from messaging.wake_webhooks import wake_attempt, wake_due_set, wakes_overdue

logger = logging.getLogger(__name__)

Event = NotificationDelivery.Event

#: Where between its sending and its deadline a question is told again.
REMINDER_AT = 0.8


def question_task_row(question: Message) -> DBTaskResult[Any, Any]:
    """The queue's row of ``question_arrived`` for ``question``, as the backend's
    ``enqueue`` makes it, for the send to insert with the question in its own statements
    (``messaging.services``): one commit, and the task exists if and only if the question
    does. The worker takes it as any enqueued task (the notification tests run it)."""
    return DBTaskResult(
        id=uuid.uuid4(),
        args_kwargs={"args": [str(question.pk)], "kwargs": {}},
        priority=question_arrived.priority,
        task_path=question_arrived.module_path,
        queue_name=question_arrived.queue_name,
        backend_name=question_arrived.backend,
        run_after=get_date_max(),  # the backend's "as soon as possible"
    )


def _retries_schedule(attempted: list[Attempted], outcome: str = "") -> None:
    for done in attempted:
        if done.retry_at is not None:
            delivery_retry.using(run_after=done.retry_at).enqueue(done.delivery_id, outcome)


def _tell(question: Message, event: str, outcome: str = "") -> None:
    _retries_schedule(
        deliveries_attempt(deliveries_make(question, event), outcome=outcome), outcome
    )


def _open_and_unanswered(question: Message, now: datetime) -> bool:
    return question.state_at(now) == Message.State.PENDING and (
        decision_answer_taken(question.to_project, question.pk) is None
    )


@task()
def question_arrived(message_id: str) -> None:
    """Tell everyone who may answer that question ``message_id`` arrived, and with a
    deadline schedule the reminder (at ``REMINDER_AT`` of the way) and the deadline's
    task (each runs at once if its time has passed: it then finds what to do)."""
    question = question_of(message_id)
    if question is None:
        return
    deadline = question_deadline(question)
    if deadline is not None:
        remind_at = question.created_at + (deadline - question.created_at) * REMINDER_AT
        with transaction.atomic():
            question_remind.using(run_after=remind_at).enqueue(message_id)
            question_deadline_pass.using(run_after=deadline).enqueue(message_id)
    _tell(question, Event.ARRIVAL)


@task()
def question_remind(message_id: str) -> None:
    """Remind them, once, if question ``message_id`` is still open and unanswered."""
    question = question_of(message_id)
    if question is not None and _open_and_unanswered(question, timezone.now()):
        _tell(question, Event.REMINDER)


@task()
def question_deadline_pass(message_id: str) -> None:
    """Question ``message_id`` reached its deadline: unless an accepted answer exists,
    send the asker's fallback answer (``on_deadline``) as the mailbox project, and tell
    everyone what happened."""
    question = question_of(message_id)
    if question is None:
        return
    deadline = question_deadline(question)
    if deadline is None or decision_answer_taken(question.to_project, question.pk):
        return
    _tell(question, Event.DEADLINE, deadline_fallback_send(question, deadline))


def deadline_fallback_send(question: Message, deadline: datetime) -> str:
    """Send ``question``'s fallback answer, if it names one, from its mailbox project to
    the asker with ``via: deadline`` (once: its idempotency key is the question's); what
    happened, in a sentence for the notification."""
    when = deadline_text(deadline)
    fallback = question_fallback(question)
    if fallback is None:
        return f"No answer by the deadline ({when}): the question expired unanswered."
    from messaging.services import message_send  # messaging.services enqueues these tasks

    decision = decision_of(question)
    label = next((o["label"] for o in decision["options"] if o["id"] == fallback), fallback)
    mailbox = question.to_project
    reply_workspace, _, reply_project = (decision["reply_project"] or "").partition("/")
    try:
        message_send(
            principal=Principal.root(),
            to_workspace=reply_workspace,
            to_project=reply_project,
            from_workspace=mailbox.workspace.name,
            from_project=mailbox.name,
            subject=decision_reply_subject(str(question.pk)),
            body=decision_reply_write(
                str(question.pk),
                fallback,
                f"no answer by the deadline ({when}); the asker's fallback was taken.",
            ),
            in_reply_to=str(question.pk),
            idempotency_key=f"deadline:{question.pk}",
            reply_via="deadline",
        )
    except AppError as exc:
        logger.warning("the deadline fallback of question %s was not sent: %s", question.pk, exc)
        return (
            f"No answer by the deadline ({when}); the asker's fallback {label} could not be "
            f"sent: {exc}"
        )
    return (
        f"No answer by the deadline ({when}): the asker's fallback {label} ({fallback}) was taken."
    )


@task()
def delivery_retry(delivery_id: int, outcome: str = "") -> None:
    """Attempt notification ``delivery_id`` again (``delivery_attempt`` claims it)."""
    done = delivery_attempt(delivery_id, outcome=outcome)
    _retries_schedule([done] if done is not None else [], outcome)


def wake_schedule(project_id: uuid.UUID) -> None:
    """Queue the wake of each enabled webhook of ``project_id`` that has none queued
    (``wake_due_set``), each wake's task in the transaction that queues it: a wake is
    queued if and only if its task exists. A send calls it after its commit, when its
    statement saw such a webhook; a failure is logged, never raised (the send is made)."""
    try:
        with transaction.atomic():
            for webhook_id, due in wake_due_set(project_id, timezone.now()):
                wake_fire.using(run_after=due).enqueue(webhook_id)
    except Exception:
        logger.exception("the wake of project %s was not queued", project_id)


def wakes_requeue_overdue() -> int:
    """Queue again each wake whose task is gone (``wakes_overdue``); how many."""
    overdue = wakes_overdue()
    for webhook_id, _ in overdue:
        wake_fire.enqueue(webhook_id)
    return len(overdue)


@task()
def wake_fire(webhook_id: int) -> None:
    """Make webhook ``webhook_id``'s queued wake (``wake_attempt`` claims it); a failed
    one is queued again, as ``wake_attempt`` says when."""
    outcome = wake_attempt(webhook_id, lambda at: wake_fire.using(run_after=at).enqueue(webhook_id))
    logger.info("wake webhook %s: %s", webhook_id, outcome)
