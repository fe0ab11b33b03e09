"""Fewer indexes on messages: the project keys lead the inbox and outbox indexes, and the
session keys, mostly empty, get partial indexes. Every index is written on every send
and claim."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0003_decisions"),
        ("projects", "0005_fewer_indexes"),
    ]

    operations = [
        # Only the indexes go: Django would rebuild the whole table on SQLite for each
        # field (a copy of every row per field), where dropping the indexes is enough.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="claimed_by_session",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="projects.agentsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="from_project",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="outbox_messages",
                        to="projects.project",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="from_session",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="projects.agentsession",
                    ),
                ),
                migrations.AlterField(
                    model_name="message",
                    name="to_project",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="inbox_messages",
                        to="projects.project",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS messaging_message_claimed_by_session_id_aafcc3d0",
                    reverse_sql="CREATE INDEX messaging_message_claimed_by_session_id_aafcc3d0 ON messaging_message (claimed_by_session_id)",
                ),
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS messaging_message_from_project_id_36be097e",
                    reverse_sql="CREATE INDEX messaging_message_from_project_id_36be097e ON messaging_message (from_project_id)",
                ),
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS messaging_message_from_session_id_d1b5c2c0",
                    reverse_sql="CREATE INDEX messaging_message_from_session_id_d1b5c2c0 ON messaging_message (from_session_id)",
                ),
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS messaging_message_to_project_id_6ad742fd",
                    reverse_sql="CREATE INDEX messaging_message_to_project_id_6ad742fd ON messaging_message (to_project_id)",
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("from_session__isnull", False)),
                fields=["from_session"],
                name="message_from_session",
            ),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("claimed_by_session__isnull", False)),
                fields=["claimed_by_session"],
                name="message_claimed_by_session",
            ),
        ),
    ]
