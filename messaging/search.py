"""Search and threads: reads over a project's stored mail (docs/reference.md#search-and-threads).

Neither changes anything: no claim, no update, no activity row.

The full-text index is kept by the database itself, in the same transaction as every
write of a message (docs/architecture.md#data-model): on SQLite the FTS5 table
``message_fts`` (porter stemmer) that triggers on the message table keep, on
PostgreSQL the generated ``search_vector`` column (english configuration, subject
weighted A, body B) with its GIN index. The user's text never reaches either as query
syntax: its words are taken out (``query_words``), stop words dropped, and each is given
as a quoted word, all of them required.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from django.db import connection

from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.limits import (
    SEARCH_LIMIT_DEFAULT,
    SEARCH_QUERY_MAX_CHARS,
    SEARCH_SNIPPET_MAX_CHARS,
    search_limit_clamp,
)
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.sql import db_value, uuid_of
from messaging.arguments import message_id_required
from messaging.models import Message
from messaging.selectors import box_parse, status_of
from projects.access import Level, project_access

SEARCH_BOXES = ("inbox", "outbox", "all")
# The bounds live with the list's in aimemory_site.lib.limits, which the CLI and the
# schemas quote.
QUERY_MAX_CHARS = SEARCH_QUERY_MAX_CHARS
SNIPPET_MAX_CHARS = SEARCH_SNIPPET_MAX_CHARS
# The most messages one thread walks: its depth up and the messages reached down.
THREAD_MAX_MESSAGES = 1000

# PostgreSQL's english stop words (the snowball list its 'english' configuration drops),
# applied to the query on both databases so both find the same: SQLite's porter
# tokenizer keeps them.
_STOP_WORDS_TEXT = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his
himself she her hers herself it its itself they them their theirs themselves what
which who whom this that these those am is are was were be been being have has had
having do does did doing a an the and but if or because as until while of at by for
with about against between into through during before after above below to from up
down in out on off over under again further then once here there when where why how
all any both each few more most other some such no nor not only own same so than too
very s t can will just don should now
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

# A word: letters and digits. Underscores and every other sign separate words, as both
# databases' tokenizers say.
_WORD = re.compile(r"[^\W_]+")

# The runs of ASCII punctuation PostgreSQL's index reads as one space
# (messaging/migrations/0012_search.py, which must say the same): its parser would keep a
# path or a host whole.
POSTGRESQL_SEPARATOR_RUNS = "[!-/:-@[-`{-~]+"

# What marks a match while the snippet is cut; brackets once cut (a body may hold
# brackets of its own, "[REDACTED]" for one).
_OPEN, _CLOSE = "\ue000", "\ue001"
_MARKS = re.compile(f"[{_OPEN}{_CLOSE}]")


@dataclass(frozen=True)
class SearchHit:
    message: Message
    #: At most SNIPPET_MAX_CHARS around the match, each match between _OPEN and _CLOSE.
    marked: str

    @property
    def snippet(self) -> str:
        """The snippet as the API shows it: each match in [ ]."""
        return self.marked.replace(_OPEN, "[").replace(_CLOSE, "]")

    def parts(self) -> list[tuple[str, bool]]:
        """The snippet as runs of (text, whether it is a match), for a page that shows
        the matches its own way: exact, where a body's own brackets ("[REDACTED]") would
        make the bracketed ``snippet`` ambiguous."""
        parts = []
        for index, run in enumerate(_MARKS.split(self.marked)):
            if run:
                parts.append((run, index % 2 == 1))
        return parts


def query_words(query: str) -> list[str]:
    """The words of ``query`` the search looks for: lower case, stop words dropped, each
    once, in order. Everything else in it (quotes, ``*``, ``:``, ``-``, ``NEAR``'s
    parentheses, SQL) is a separator; ``AND``, ``OR``, ``NOT`` are words like any other
    (stop words, so dropped); ``NEAR`` is the word "near"."""
    words = (word.lower() for word in _WORD.findall(query))
    return list(dict.fromkeys(word for word in words if word not in STOP_WORDS))


def query_parse(query: str | None) -> str:
    """The search text, or 400 invalid_query over 500 characters."""
    text = query or ""
    if len(text) > QUERY_MAX_CHARS:
        raise BadRequest(
            f"query must be at most {QUERY_MAX_CHARS} characters, got {len(text)}",
            code=Code.INVALID_QUERY,
        )
    return text


def message_search(
    principal: Principal,
    *,
    workspace: str,
    project: str,
    query: str,
    box: str = "inbox",
    limit: int | None = SEARCH_LIMIT_DEFAULT,
) -> list[SearchHit]:
    """Messages of every stored state whose recipient (``inbox``), sender (``outbox``)
    or either (``all``) is the project, whose subject or body holds every word of
    ``query`` (on its stem), best match first, then newest; at most ``limit``. Needs
    read. The project is a condition of the index lookup itself, so a limit is never
    filled with rows the caller may not see."""
    which = box_parse(box, SEARCH_BOXES)
    text = query_parse(query)
    count = search_limit_clamp(limit)
    scope = project_access(principal, workspace, project, need=Level.READ)
    words = query_words(text)
    if not words:
        return []
    if connection.vendor == "postgresql":
        ranked = _ranked_postgresql(scope.pk, which, words, count)
    else:
        ranked = _ranked_sqlite(scope.pk, which, words, count)
    if not ranked:
        return []
    found = Message.objects.filter(pk__in=[pk for pk, _ in ranked]).select_related(
        "to_project__workspace", "from_project__workspace"
    )
    by_id = {message.pk: message for message in found}
    # A message purged between the two reads is left out.
    return [
        SearchHit(message=by_id[pk], marked=_snippet_cut(snippet))
        for pk, snippet in ranked
        if pk in by_id
    ]


def _fts_query(words: list[str]) -> str:
    # Each word a quoted string (a phrase of its tokens): never an operator, a column
    # filter or a prefix. The words hold no quote (``_WORD``).
    return " AND ".join(f'"{word}"' for word in words)


# Matches of the project's key column (``p`` and the project's id, written by the
# triggers of migration 0012) in the box's columns, intersected with the words.
_FTS_KEY_COLUMNS = {
    "inbox": "to_project_id",
    "outbox": "from_project_id",
    "all": "to_project_id from_project_id",
}


def _ranked_sqlite(
    project_id: Any, box: str, words: list[str], limit: int
) -> list[tuple[Any, str]]:
    key = "p" + uuid_of(project_id).hex
    match = f"{{{_FTS_KEY_COLUMNS[box]}}} : {key} AND ({_fts_query(words)})"
    owner = _owner_condition("m", box)
    project = db_value(Message, "to_project", project_id)
    # Ranked in the index alone (bm25: the subject counts twice the body, the key columns
    # nothing; equal ranks newest first, by rowid, which is the order the sends took the
    # one write lock); then only the rows kept are read, checked against the project
    # once more, and given their snippets (a snippet tokenizes its row again).
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH top AS (SELECT rowid AS r, bm25(message_fts, 2.0, 1.0, 0.0, 0.0) AS score "
            "FROM message_fts WHERE message_fts MATCH %s ORDER BY score, rowid DESC LIMIT %s) "
            f"SELECT m.id, snippet(message_fts, 1, '{_OPEN}', '{_CLOSE}', '…', 24), "
            f"snippet(message_fts, 0, '{_OPEN}', '{_CLOSE}', '…', 24) "
            # CROSS JOIN: the kept rows lead (SQLite keeps the order written). Left
            # to the planner, once ANALYZE had run, it matched every row again to join.
            "FROM top CROSS JOIN message_fts CROSS JOIN messaging_message m "
            "WHERE message_fts.rowid = top.r AND m.rowid = top.r "
            f"AND message_fts MATCH %s AND {owner} ORDER BY top.score, top.r DESC",
            [match, limit, match, *([project] * owner.count("%s"))],
        )
        return [(uuid_of(row[0]), _either(row[1], row[2])) for row in cursor.fetchall()]


def _ranked_postgresql(
    project_id: Any, box: str, words: list[str], limit: int
) -> list[tuple[Any, str]]:
    owner = _owner_condition("m", box)
    headline = f"'StartSel={_OPEN}, StopSel={_CLOSE}, MaxWords=35, MinWords=15'"
    # The words joined by spaces: plainto_tsquery ANDs their lexemes, and reads no
    # operator in them (there is none left to read). The project and the words are one
    # lookup of the multicolumn GIN index (migration 0012), which skips through a common
    # word's entries to the project's; only the matches are read and ranked.
    # The tsquery is written out where it is used, not shared through a CTE: the planner
    # must see the words to weigh a common one against the project (a CTE hid them, and
    # it ANDed the bitmap of every message holding the word: 100 ms, not 25).
    tsquery = "plainto_tsquery('english', %s)"
    text = " ".join(words)
    # Quoted for SQL, and its % doubled for the driver's parameters.
    separated = f"regexp_replace(shown.body, '{POSTGRESQL_SEPARATOR_RUNS}', ' ', 'g')"
    # The snippets of the rows kept: the body's, the subject's, and only when neither
    # shows the match (a word inside a path, which the index found as a word of its
    # own), the body's read as the index reads it.
    with connection.cursor() as cursor:
        cursor.execute(
            "WITH top AS (SELECT m.id, m.subject, m.body, m.created_at, "
            f"ts_rank_cd(m.search_vector, {tsquery}) AS rank FROM messaging_message m "
            f"WHERE m.search_vector @@ {tsquery} AND {owner} "
            "ORDER BY rank DESC, m.created_at DESC, m.id DESC LIMIT %s), "
            "shown AS (SELECT top.*, "
            f"ts_headline('english', top.body, {tsquery}, {headline}) AS body_snippet, "
            f"ts_headline('english', top.subject, {tsquery}, {headline}) AS subject_snippet "
            "FROM top) "
            "SELECT id, body_snippet, subject_snippet, CASE WHEN strpos(body_snippet, %s) > 0 "
            "OR strpos(subject_snippet, %s) > 0 THEN NULL "
            f"ELSE ts_headline('english', {separated}, {tsquery}, "
            f"{headline}) END FROM shown "
            "ORDER BY rank DESC, created_at DESC, id DESC",
            [
                text,
                text,
                *([project_id] * owner.count("%s")),
                limit,
                text,
                text,
                _OPEN,
                _OPEN,
                text,
            ],
        )
        return [(row[0], _either(row[1], row[2], row[3])) for row in cursor.fetchall()]


def _owner_condition(alias: str, box: str) -> str:
    if box == "inbox":
        return f"{alias}.to_project_id = %s"
    if box == "outbox":
        return f"{alias}.from_project_id = %s"
    return f"({alias}.to_project_id = %s OR {alias}.from_project_id = %s)"


def _either(body: str | None, subject: str | None, fallback: str | None = None) -> str:
    """The body's snippet if the match is there, else the subject's, else ``fallback``."""
    for text in (body, subject, fallback):
        if text and _OPEN in text:
            return text
    return body or subject or ""


def _snippet_cut(text: str) -> str:
    """At most ``SNIPPET_MAX_CHARS`` characters around the first match, its marks kept."""
    text = " ".join(text.split())
    start = text.find(_OPEN)
    plain_length = len(text.replace(_OPEN, "").replace(_CLOSE, ""))
    if plain_length > SNIPPET_MAX_CHARS:
        # From a little before the first match, on a word boundary where there is one.
        begin = max(0, start - 60) if start >= 0 else 0
        if begin:
            space = text.find(" ", begin)
            begin = space + 1 if 0 <= space < start else begin
        text = text[begin:]
        prefix = "…" if begin else ""
        budget = SNIPPET_MAX_CHARS - len(prefix) - 1
        kept, visible = [], 0
        for char in text:
            if char not in (_OPEN, _CLOSE):
                if visible == budget:
                    break
                visible += 1
            kept.append(char)
        text = prefix + "".join(kept) + "…"
        if text.count(_OPEN) > text.count(_CLOSE):
            # A match cut at the end: its bracket closed within the budget.
            text = text[:-2] + _CLOSE + "…" if text[-2] != _OPEN else text[:-2] + "…"
    return text


def message_thread(
    principal: Principal, *, workspace: str, project: str, message_id: str
) -> list[Message]:
    """The message the ``in_reply_to`` chain of ``message_id`` starts from and every
    message that answers it, directly or through others, oldest first: those whose
    sender or recipient is the caller's project, the others left out. Needs read; a
    message the project may not see is 404 ``message_not_found``, as status says it.
    At most ``THREAD_MAX_MESSAGES`` deep and reached."""
    wanted = message_id_required(message_id)
    scope = project_access(principal, workspace, project, need=Level.READ)
    status_of(scope, wanted)
    table = Message._meta.db_table
    start = db_value(Message, "id", wanted)
    project_value = db_value(Message, "to_project", scope.pk)
    sql = (
        "WITH RECURSIVE up(id, in_reply_to, depth) AS ("
        f"SELECT id, in_reply_to, 0 FROM {table} WHERE id = %s "
        f"UNION ALL SELECT m.id, m.in_reply_to, up.depth + 1 FROM {table} m "
        "JOIN up ON m.id = up.in_reply_to WHERE up.depth < %s), "
        "root AS (SELECT id FROM up ORDER BY depth DESC LIMIT 1), "
        "down(id, depth) AS (SELECT id, 0 FROM root "
        f"UNION ALL SELECT m.id, down.depth + 1 FROM {table} m "
        "JOIN down ON m.in_reply_to = down.id WHERE down.depth < %s), "
        "reached AS (SELECT id FROM down LIMIT %s) "
        f"SELECT m.id FROM {table} m WHERE m.id IN (SELECT id FROM reached) "
        "AND (m.to_project_id = %s OR m.from_project_id = %s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            [
                start,
                THREAD_MAX_MESSAGES,
                THREAD_MAX_MESSAGES,
                THREAD_MAX_MESSAGES,
                project_value,
                project_value,
            ],
        )
        ids: list[uuid.UUID] = [uuid_of(row[0]) for row in cursor.fetchall()]
    return list(
        Message.objects.filter(pk__in=ids)
        .select_related("to_project__workspace", "from_project__workspace")
        .oldest_first()
    )
