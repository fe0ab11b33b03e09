"""Fewer indexes on activity rows: the project key leads activity_recent, and the
counterpart, empty on handoff and page rows, gets a partial index."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0004_rate_window"),
    ]

    operations = [
        # Only the indexes go: Django would rebuild the whole table on SQLite for each
        # field (a copy of every row per field), where dropping the indexes is enough.
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="activity",
                    name="counterpart",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="projects.project",
                    ),
                ),
                migrations.AlterField(
                    model_name="activity",
                    name="project",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="activities",
                        to="projects.project",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS projects_activity_counterpart_id_5a90c771",
                    reverse_sql="CREATE INDEX projects_activity_counterpart_id_5a90c771 ON projects_activity (counterpart_id)",
                ),
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS projects_activity_project_id_0e9ae3fa",
                    reverse_sql="CREATE INDEX projects_activity_project_id_0e9ae3fa ON projects_activity (project_id)",
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="activity",
            index=models.Index(
                condition=models.Q(("counterpart__isnull", False)),
                fields=["counterpart"],
                name="activity_counterpart",
            ),
        ),
    ]
