"""The pending questions are read through their own partial index
(docs/reference.md#waiting-on-you): a signed-in viewer's home page and its live region ask
for them every second, and without it each ask scanned every message ever kept."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from messaging.models import Message
from projects.models import Project

pytestmark = pytest.mark.django_db


def test_the_pending_questions_are_found_through_their_index(
    project_a: Project, project_b: Project
) -> None:
    Message.objects.bulk_create(
        Message(to_project=project_b, from_project=project_a, body=f"request {n}")
        for n in range(50)
    )
    questions = Message.objects.pending().filter(decision__isnull=False).order_by("created_at")

    with transaction.atomic():
        if connection.vendor == "postgresql":
            # A table this small is cheaper to scan; the test asks whether the index serves.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL enable_seqscan = off")
        plan = questions.explain()

    assert "message_pending_question" in plan
