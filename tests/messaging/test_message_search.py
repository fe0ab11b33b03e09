"""Search (docs/reference.md#search-and-threads): the subject and body of a project's
mail in every stored state, stemmed, ranked, with a snippet; the access filter inside the
query; the user's text only ever words; nothing changed by a search."""

from __future__ import annotations

import importlib
import re
import string
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aimemory_site.lib.errors import BadRequest, Code, NotFound
from messaging import search
from messaging.models import Message
from messaging.retention import messages_purge
from messaging.search import SearchHit, message_search, query_words
from messaging.services import message_pop
from projects.models import Activity, Grant, Project
from tests.conftest import Persona, make_project
from tests.messaging.conftest import ANON, send

pytestmark = pytest.mark.django_db


def _search(query: str, project: str = "project-b", **extra: Any) -> list[SearchHit]:
    principal = extra.pop("principal", ANON)
    return message_search(principal, workspace="default", project=project, query=query, **extra)


def _bodies(hits: list[SearchHit]) -> list[str]:
    return [hit.message.body for hit in hits]


def test_a_search_finds_the_word_in_the_body_or_the_subject(
    project_a: Project, project_b: Project
) -> None:
    send("We should ship the export soon.")
    send("Nothing here.", subject="export endpoint")
    send("Unrelated text.")
    assert sorted(_bodies(_search("export"))) == [
        "Nothing here.",
        "We should ship the export soon.",
    ]


def test_a_word_matches_on_its_stem(project_a: Project, project_b: Project) -> None:
    send("Please deploy the release tonight.")
    assert _bodies(_search("deploying")) == ["Please deploy the release tonight."]
    assert _bodies(_search("deployed")) == ["Please deploy the release tonight."]


def test_every_word_must_match(project_a: Project, project_b: Project) -> None:
    send("deploy the export service")
    send("deploy the billing service")
    assert _bodies(_search("deploy export")) == ["deploy the export service"]
    assert _search("deploy missing") == []


def test_a_word_inside_a_path_a_host_or_a_name_is_a_word(
    project_a: Project, project_b: Project
) -> None:
    """PostgreSQL's parser would keep "/v1/export" or "config.yaml" whole (migration 0012)."""
    message = send("Add a /v1/export route to config.yaml; ask bob@example.com (snake_case).")
    for query in ("export", "yaml", "config", "example", "bob", "snake"):
        [hit] = _search(query)
        assert hit.message.pk == message.pk
        assert f"[{query}" in hit.snippet.lower() or f"{query}]" in hit.snippet.lower(), hit.snippet


def test_the_query_reads_punctuation_as_the_postgresql_index_does() -> None:
    """The migration froze its own copy of the separators; the snippet's fallback reads
    the search's."""
    migration = importlib.import_module("messaging.migrations.0012_search")
    assert migration.SEPARATOR_RUNS == search.POSTGRESQL_SEPARATOR_RUNS
    # The runs' class holds ASCII's punctuation, and nothing else of ASCII: what the
    # query's words are separated by too.
    runs = re.compile(search.POSTGRESQL_SEPARATOR_RUNS)
    ascii_signs = {chr(code) for code in range(0x20, 0x7F) if runs.fullmatch(chr(code))}
    assert ascii_signs == set(string.punctuation)
    assert all(not query_words(char) for char in string.punctuation)


def test_case_does_not_matter(project_a: Project, project_b: Project) -> None:
    send("The Release is OUT.")
    assert _bodies(_search("RELEASE out")) == ["The Release is OUT."]


def test_the_box_says_whose_mail_is_searched(
    project_a: Project, project_b: Project, project_c: Project
) -> None:
    received = send("export from a")
    sent = send("export to c", to="project-c", sender="project-b")
    assert [hit.message.pk for hit in _search("export")] == [received.pk]
    assert [hit.message.pk for hit in _search("export", box="outbox")] == [sent.pk]
    assert {hit.message.pk for hit in _search("export", box="all")} == {received.pk, sent.pk}
    # project-c's own search sees its inbox, not what b received.
    assert [hit.message.pk for hit in _search("export", project="project-c")] == [sent.pk]


def test_a_bad_box_is_the_list_error(project_b: Project) -> None:
    with pytest.raises(BadRequest) as caught:
        _search("export", box="trash")
    assert caught.value.code == Code.INVALID_BOX


def test_every_stored_state_is_searched(project_a: Project, project_b: Project) -> None:
    now = timezone.now()
    pending = send("state check pending")
    claimed = send("state check claimed")
    Message.objects.filter(pk=claimed.pk).update(state="claimed", claimed_at=now)
    cancelled = send("state check cancelled")
    Message.objects.filter(pk=cancelled.pk).update(state="cancelled", cancelled_at=now)
    expired = send("state check expired")
    Message.objects.filter(pk=expired.pk).update(state="expired", expires_at=now)
    found = {hit.message.pk for hit in _search("state check")}
    assert found == {pending.pk, claimed.pk, cancelled.pk, expired.pk}


def test_a_search_never_changes_a_message(project_a: Project, project_b: Project) -> None:
    message = send("leave me pending")
    activities = Activity.objects.count()
    before = Message.objects.values().get(pk=message.pk)
    assert [hit.message.pk for hit in _search("pending")] == [message.pk]
    assert Message.objects.values().get(pk=message.pk) == before
    assert Activity.objects.count() == activities
    assert message_pop(principal=ANON, workspace="default", project="project-b") == message


def test_a_better_match_comes_first_then_the_newest(project_a: Project, project_b: Project) -> None:
    now = timezone.now()
    once = send("the migration ran; nothing else to report on this long line of text")
    often = send("migration migration migration", subject="migration")
    Message.objects.filter(pk=once.pk).update(created_at=now - timedelta(hours=2))
    Message.objects.filter(pk=often.pk).update(created_at=now - timedelta(hours=3))
    assert [hit.message.pk for hit in _search("migration")] == [often.pk, once.pk]
    older = send("same words here")
    newer = send("same words here")
    Message.objects.filter(pk=older.pk).update(created_at=now - timedelta(hours=1))
    assert [hit.message.pk for hit in _search("same words")] == [newer.pk, older.pk]


def test_the_limit_keeps_the_best(project_a: Project, project_b: Project) -> None:
    for n in range(5):
        send(f"report number {n}")
    assert len(_search("report", limit=2)) == 2
    assert len(_search("report", limit=0)) == 1
    assert len(_search("report", limit=None)) == 5


def test_the_snippet_brackets_the_match_within_200_characters(
    project_a: Project, project_b: Project
) -> None:
    filler = "lorem ipsum dolor sit amet " * 40
    send(f"{filler} the needle is here {filler}", subject="haystack")
    [hit] = _search("needle")
    assert "[needle]" in hit.snippet
    assert len(hit.snippet) <= 200
    [subject_hit] = _search("haystack")
    assert subject_hit.snippet == "[haystack]"


def test_a_short_body_is_its_own_snippet(project_a: Project, project_b: Project) -> None:
    send("Deploying the [beta] build now.")
    [hit] = _search("deploy")
    assert hit.snippet == "[Deploying] the [beta] build now."


def test_stop_words_and_punctuation_alone_find_nothing(
    project_a: Project, project_b: Project
) -> None:
    send("the and of it is to be")
    send('*** "" --- ::: ()')
    assert _search("the and of") == []
    assert _search('*** "" ::: ()') == []
    assert _search("") == []


def test_a_query_over_500_characters_is_invalid(project_b: Project) -> None:
    assert _search("x" * 500) == []
    with pytest.raises(BadRequest) as caught:
        _search("x" * 501)
    assert caught.value.code == Code.INVALID_QUERY


def test_a_redacted_secret_is_never_found_and_its_message_is(
    project_a: Project, project_b: Project
) -> None:
    token = "ghp_" + "A1b2C3d4E5" * 4
    message = send(f"The deploy token is {token} for the staging cluster.")
    assert "[REDACTED]" in message.body
    assert [hit.message.pk for hit in _search("staging cluster")] == [message.pk]
    assert _search(token) == []
    assert _search("A1b2C3d4E5") == []


def test_the_purge_removes_messages_from_the_index(project_a: Project, project_b: Project) -> None:
    old = timezone.now() - timedelta(days=40)
    gone = send("archived quarterly numbers")
    Message.objects.filter(pk=gone.pk).update(state="claimed", created_at=old, claimed_at=old)
    kept = send("current quarterly numbers")
    assert len(_search("quarterly")) == 2
    messages_purge(older_than_days=30, pause=0)
    assert [hit.message.pk for hit in _search("quarterly")] == [kept.pk]
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO message_fts(message_fts) VALUES ('integrity-check')")


@pytest.mark.skipif("connection.vendor != 'sqlite'")
def test_the_sqlite_index_is_kept_by_its_triggers(project_a: Project, project_b: Project) -> None:
    """A migration that remakes the message table drops them (messaging/migrations/0012)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
        names = {row[0] for row in cursor.fetchall()}
    assert {"message_fts_delete", "message_fts_insert", "message_fts_update"} <= names
    message = send("first words")
    Message.objects.filter(pk=message.pk).update(body="second words")
    assert _search("first") == []
    assert [hit.message.pk for hit in _search("second")] == [message.pk]


# Persona access: the filter is inside the query.


@pytest.fixture
def mail(alice: Persona, alices_restricted: Project) -> dict[str, Message]:
    """alice's own project default/mine, which writes to and receives from others, and
    mail of alice's restricted project alpha (bob reads it, charlie nothing)."""
    make_project(alice, "default", "mine", restricted=True)
    make_project(alice, "default", "elsewhere", restricted=True)
    return {
        "mine": send(
            "the rollout plan, once", to="mine", sender="elsewhere", principal=alice.principal
        ),
        # Would rank first: the word three times, in the subject too.
        "alpha": send(
            "rollout rollout rollout",
            subject="rollout",
            to="alpha",
            sender="elsewhere",
            principal=alice.principal,
        ),
    }


def test_alice_never_finds_another_projects_mail_even_when_it_ranks_first(
    alice: Persona, mail: dict[str, Message]
) -> None:
    hits = _search("rollout", project="mine", principal=alice.principal, limit=1, box="all")
    assert [hit.message.pk for hit in hits] == [mail["mine"].pk]


def test_bob_searches_what_he_reads(bob: Persona, mail: dict[str, Message]) -> None:
    hits = _search("rollout", project="alpha", principal=bob.principal)
    assert [hit.message.pk for hit in hits] == [mail["alpha"].pk]


def test_charlie_gets_the_same_404_as_for_a_missing_project(
    charlie: Persona, mail: dict[str, Message]
) -> None:
    with pytest.raises(NotFound) as restricted:
        _search("rollout", project="alpha", principal=charlie.principal)
    with pytest.raises(NotFound) as missing:
        _search("rollout", project="no-such", principal=charlie.principal)
    assert restricted.value.code == missing.value.code == Code.PROJECT_NOT_FOUND
    assert restricted.value.message.replace("alpha", "no-such") == missing.value.message


def test_a_revoked_grant_searches_nothing(bob: Persona, mail: dict[str, Message]) -> None:
    Grant.objects.filter(user=bob.user).delete()
    with pytest.raises(NotFound):
        _search("rollout", project="alpha", principal=bob.principal)


# The user's text is words, never query syntax.

SYNTAX = [
    '"',
    '"unbalanced',
    "*",
    "rollout*",
    "NEAR(rollout plan)",
    "rollout NEAR plan",
    "subject:rollout",
    "to_project_id:p0",
    "{to_project_id from_project_id}: rollout",
    "-rollout",
    "rollout -plan",
    "rollout AND OR NOT plan",
    "^rollout",
    "(rollout",
    "rollout)",
    "'; DROP TABLE messaging_message; --",
    "rollout' OR '1'='1",
    "rollout & plan | !x <-> y",
    "rollout:* & plan:A",
    "\\",
    "\x00rollout",
]


@pytest.mark.parametrize("query", SYNTAX)
def test_fts_syntax_is_only_words(query: str, project_a: Project, project_b: Project) -> None:
    message = send("The rollout plan: NEAR done AND not subject to change.")
    hits = _search(query, box="all")
    words = query_words(query)
    expected = all(word in _INDEXED for word in words) and bool(words)
    assert [hit.message.pk for hit in hits] == ([message.pk] if expected else [])
    assert Message.objects.count() == 1


# The words of the message above, as a search finds them (stop words dropped).
_INDEXED = {"rollout", "plan", "near", "done", "subject", "change"}


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    query=st.lists(
        st.sampled_from(
            [
                *"\"'*:-^()[]{}+;,.!&|<>~\\/ \t_é1x",
                "NEAR",
                "AND",
                "OR",
                "NOT",
                "rollout",
                "plan",
                "DROP",
                "SELECT",
                "subject",
                "to_project_id",
                "p0",
                "a",
                "the",
            ]
        ),
        max_size=30,
    ).map("".join)
)
def test_any_text_is_a_search_never_an_error(
    query: str, project_a: Project, project_b: Project
) -> None:
    if not Message.objects.exists():
        send("The rollout plan: NEAR done AND not subject to change.")
    hits = _search(query, box="all")
    words = query_words(query)
    found = bool(words) and all(word in _INDEXED for word in words)
    assert len(hits) == (1 if found else 0), query
    assert Message.objects.count() == 1
