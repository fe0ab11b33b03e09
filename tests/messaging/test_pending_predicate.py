"""The raw spelling of "pending in this inbox" selects what the queryset selects."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from messaging.models import PENDING_IN_INBOX_SQL, Message, pending_in_inbox_params
from messaging.services import message_cancel, message_pop
from projects.models import Project
from tests.messaging.conftest import ANON, send


def _raw_pending_ids(inbox: Project) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {Message._meta.db_table} WHERE {PENDING_IN_INBOX_SQL}",
            pending_in_inbox_params(inbox.pk, timezone.now()),
        )
        return {str(Message._meta.pk.to_python(row[0])) for row in cursor.fetchall()}


def test_raw_pending_predicate_matches_the_queryset(
    project_a: Project, project_b: Project, project_c: Project
) -> None:
    send("to b, popped")
    message_pop(principal=ANON, workspace="default", project="project-b")
    send("to b, waiting")
    cancelled = send("to b, cancelled")
    message_cancel(
        principal=ANON, workspace="default", project="project-a", message_id=str(cancelled.id)
    )
    send("to c", to="project-c")
    send("to a", to="project-a", sender="project-b")

    for inbox in (project_a, project_b, project_c):
        expected = {
            str(pk) for pk in Message.objects.inbox_of(inbox).pending().values_list("pk", flat=True)
        }
        assert _raw_pending_ids(inbox) == expected
    assert len(_raw_pending_ids(project_b)) == 1
