"""Send keys and pop request ids belong to their principal: on an open project every user
acts as the project, so the key alone must not join one user's retry to another's send.

Keys and request ids recorded before this migration have no principal and so match no
retry: they are forgotten, as they would be after 24 hours. On SQLite the message table
is not rebuilt: the new column is nullable and the unique constraint a partial index."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("messaging", "0004_fewer_indexes"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="message",
            name="message_idempotency_key_unique",
        ),
        migrations.AddField(
            model_name="message",
            name="idempotency_principal",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
        migrations.AddConstraint(
            model_name="message",
            constraint=models.UniqueConstraint(
                condition=models.Q(("idempotency_key__isnull", False)),
                fields=("from_project", "idempotency_key", "idempotency_principal"),
                name="message_idempotency_key_unique",
            ),
        ),
        migrations.RemoveConstraint(
            model_name="poprequest",
            name="pop_request_unique",
        ),
        migrations.AddField(
            model_name="poprequest",
            name="principal_key",
            field=models.CharField(default="", max_length=64),
            preserve_default=False,
        ),
        migrations.AddConstraint(
            model_name="poprequest",
            constraint=models.UniqueConstraint(
                fields=("inbox", "request_id", "principal_key"), name="pop_request_unique"
            ),
        ),
    ]
