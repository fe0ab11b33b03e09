# The search index of messages (docs/architecture.md#data-model), and the index a thread
# walks down. The full-text index is the database's own, kept by it in the transaction of
# every write: the send's insert and the purge's delete need no change.

from django.db import migrations, models

# SQLite: an FTS5 table over the message table's subject and body (external content: the
# text is read back from the message table for snippets, never stored twice), with the
# porter stemmer. Its rowid is the message's rowid. The two other columns hold "p" and the
# hex id of the recipient and of the sender: a search asks for the caller's key in the
# box's column AND its words, so the project is part of the index lookup. A migration
# that remakes the message table on SQLite (Django copies it for most column changes)
# drops these triggers and renumbers rowids: it must run SQLITE_REMOVE then
# SQLITE_CREATE again (tests/messaging/test_message_search.py checks they are there).
SQLITE_COLUMNS = "subject, body, to_project_id, from_project_id"
SQLITE_VALUES = "{row}.subject, {row}.body, 'p' || {row}.to_project_id, 'p' || {row}.from_project_id"
SQLITE_INSERT = (
    f"INSERT INTO message_fts(rowid, {SQLITE_COLUMNS}) "
    f"VALUES (new.rowid, {SQLITE_VALUES.format(row='new')});"
)
SQLITE_DELETE = (
    f"INSERT INTO message_fts(message_fts, rowid, {SQLITE_COLUMNS}) "
    f"VALUES ('delete', old.rowid, {SQLITE_VALUES.format(row='old')});"
)
SQLITE_CREATE = [
    f"CREATE VIRTUAL TABLE message_fts USING fts5({SQLITE_COLUMNS}, "
    "content='messaging_message', content_rowid='rowid', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    # The messages already stored, in one pass.
    f"INSERT INTO message_fts(rowid, {SQLITE_COLUMNS}) "
    f"SELECT rowid, {SQLITE_VALUES.format(row='messaging_message')} FROM messaging_message",
    "CREATE TRIGGER message_fts_insert AFTER INSERT ON messaging_message "
    f"BEGIN {SQLITE_INSERT} END",
    "CREATE TRIGGER message_fts_delete AFTER DELETE ON messaging_message "
    f"BEGIN {SQLITE_DELETE} END",
    "CREATE TRIGGER message_fts_update AFTER UPDATE OF "
    f"{SQLITE_COLUMNS} ON messaging_message BEGIN {SQLITE_DELETE} {SQLITE_INSERT} END",
]
SQLITE_REMOVE = [
    "DROP TRIGGER IF EXISTS message_fts_insert",
    "DROP TRIGGER IF EXISTS message_fts_delete",
    "DROP TRIGGER IF EXISTS message_fts_update",
    "DROP TABLE IF EXISTS message_fts",
]

# PostgreSQL: a generated tsvector (english: stemmed, stop words dropped; the subject
# weighted A, the body B), written by the database with the row, and one GIN index over
# the recipient, the sender and it (btree_gin, a trusted extension a database owner may
# create, indexes the uuids): a search's project and words are one index lookup, which
# skips through a common word's entries to the project's. (With a GIN index on the
# vector alone and the inbox btree, the planner ANDed the bitmap of all 700,000 messages
# holding a common word with the project's: 63 ms of the 89.) The ORM does not know the
# column: no model field, no change to any statement.
# ASCII punctuation is read as spaces first (messaging.search.POSTGRESQL_SEPARATOR_RUNS, the
# same): PostgreSQL's parser keeps "/v1/export", "config.yaml" or "bob@example.com"
# whole, and "export" would not find them, as it does on SQLite. regexp_replace of the
# signs as ranges: translate() with 32 characters to map took 45 us of a 200-character
# body, this 5 us.
SEPARATOR_RUNS = "[!-/:-@[-`{-~]+"


def _separated(column):
    return f"regexp_replace({column}, '{SEPARATOR_RUNS}', ' ', 'g')"


POSTGRESQL_CREATE = [
    "CREATE EXTENSION IF NOT EXISTS btree_gin",
    "ALTER TABLE messaging_message ADD COLUMN search_vector tsvector GENERATED ALWAYS AS "
    f"(setweight(to_tsvector('english', {_separated('subject')}), 'A') || "
    f"setweight(to_tsvector('english', {_separated('body')}), 'B')) STORED",
    "CREATE INDEX message_search ON messaging_message "
    "USING gin (to_project_id, from_project_id, search_vector)",
]
POSTGRESQL_REMOVE = [
    "DROP INDEX IF EXISTS message_search",
    "ALTER TABLE messaging_message DROP COLUMN IF EXISTS search_vector",
]


def _run(sqlite, postgresql):
    def run(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        for statement in sqlite if vendor == "sqlite" else postgresql if vendor == "postgresql" else []:
            schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('messaging', '0011_wake_webhooks'),
        ('projects', '0005_fewer_indexes'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='message',
            index=models.Index(condition=models.Q(('in_reply_to__isnull', False)), fields=['in_reply_to'], name='message_reply'),
        ),
        migrations.RunPython(
            _run(SQLITE_CREATE, POSTGRESQL_CREATE),
            _run(SQLITE_REMOVE, POSTGRESQL_REMOVE),
            elidable=False,
        ),
    ]
