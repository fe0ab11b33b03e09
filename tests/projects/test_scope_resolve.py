"""Scope resolution: each of the six sources of docs/reference.md#scope-resolution."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.errors import BadRequest
from aimemory_site.lib.principal import Principal
from projects.models import Activity, AgentSession, ServerBoot
from projects.scope import (
    ResolvedScope,
    ScopeSource,
    scope_hint,
    scope_require_named,
    scope_resolve,
)
from projects.services import project_get_or_create, server_boot_record, session_start

pytestmark = pytest.mark.django_db

ANON = Principal.anonymous()


def _start(project: str, session_id: str) -> None:
    session_start(principal=ANON, workspace="default", project=project, session_id=session_id)


def test_named_scope_is_explicit_even_when_the_project_does_not_exist() -> None:
    scope = scope_resolve(
        principal=Principal.anonymous(), workspace="ws", project="p", session_id="anything"
    )
    assert scope == ResolvedScope("ws", "p", ScopeSource.EXPLICIT)
    assert not scope.inferred


@pytest.mark.parametrize(
    ("workspace", "project"), [("ws", None), (None, "p"), ("ws", "  "), ("", "p")]
)
def test_half_a_scope_is_an_error(workspace: str | None, project: str | None) -> None:
    with pytest.raises(BadRequest, match=r"^workspace and project must be provided together$"):
        scope_resolve(
            principal=Principal.anonymous(), workspace=workspace, project=project, session_id=None
        )


def test_known_session_id_resolves_to_its_project() -> None:
    _start("project-a", "sess-a")
    _start("project-b", "sess-b")  # holds the shared slot now
    scope = scope_resolve(
        principal=Principal.anonymous(), workspace=None, project=None, session_id="sess-a"
    )
    assert scope == ResolvedScope("default", "project-a", ScopeSource.SESSION)
    assert not scope.inferred


def test_session_id_that_matches_nothing_falls_back_to_default(settings: SettingsWrapper) -> None:
    settings.AI_MEMORY_DEFAULT_WORKSPACE = "home"
    settings.AI_MEMORY_DEFAULT_PROJECT = "inbox"
    _start("project-a", "sess-a")
    scope = scope_resolve(
        principal=Principal.anonymous(), workspace=None, project=None, session_id="sess-unknown"
    )
    assert scope == ResolvedScope("home", "inbox", ScopeSource.DEFAULT_AFTER_MISMATCH)
    assert scope.inferred


def test_shared_slot_follows_the_latest_session_start() -> None:
    _start("project-a", "sess-a")
    assert scope_resolve(
        principal=Principal.anonymous(), workspace=None, project=None, session_id=None
    ) == ResolvedScope("default", "project-a", ScopeSource.SHARED_SLOT)
    _start("project-b", "sess-b")
    assert (
        scope_resolve(
            principal=Principal.anonymous(), workspace=None, project=None, session_id=None
        ).project
        == "project-b"
    )
    _start("project-a", "sess-a")  # the same session publishing again moves the slot back
    assert (
        scope_resolve(
            principal=Principal.anonymous(), workspace=None, project=None, session_id=None
        ).project
        == "project-a"
    )


def test_after_a_restart_the_most_recently_active_project_seeds_the_scope() -> None:
    _start("project-a", "sess-a")
    _start("project-b", "sess-b")
    earlier = timezone.now() - timedelta(minutes=5)
    AgentSession.objects.update(last_seen_at=earlier)
    Activity.objects.update(created_at=earlier)
    Activity.objects.filter(project__name="project-a").update(
        created_at=earlier + timedelta(seconds=1)
    )
    server_boot_record()
    assert scope_resolve(
        principal=Principal.anonymous(), workspace=None, project=None, session_id=None
    ) == ResolvedScope("default", "project-a", ScopeSource.STARTUP_SEED)
    _start("project-b", "sess-b")  # the first session after the restart takes the slot
    assert scope_resolve(
        principal=Principal.anonymous(), workspace=None, project=None, session_id=None
    ) == ResolvedScope("default", "project-b", ScopeSource.SHARED_SLOT)


def test_nothing_to_go_on_resolves_to_default() -> None:
    assert scope_resolve(
        principal=Principal.anonymous(), workspace=None, project=None, session_id=None
    ) == ResolvedScope("default", "default", ScopeSource.DEFAULT)
    ServerBoot.objects.create()
    project_get_or_create(principal=ANON, workspace="default", project="later")
    Activity.objects.update(created_at=timezone.now() + timedelta(minutes=1))
    # Activity after the boot is not a seed, and there is no session: still default.
    assert (
        scope_resolve(
            principal=Principal.anonymous(), workspace=None, project=None, session_id=None
        ).source
        == "default"
    )


@pytest.mark.parametrize(
    ("operation", "expected"),
    [
        (
            "pop",
            "refusing to pop from default/frank: it was resolved by shared_slot, not named, so "
            "it may not be the project you are working in. Pass workspace and project (the "
            "SessionStart inbox notice and memory_briefing name them).",
        ),
        (
            "cancel",
            "refusing to cancel the outbox of default/frank: it was resolved by shared_slot, not "
            "named, so it may not be the project you are working in. Pass workspace and project "
            "to name the sending project.",
        ),
        (
            "send",
            "refusing to send as default/frank: it was resolved by shared_slot, not named, so it "
            "may not be the project you are working in. Pass from_workspace and from_project to "
            "name the sending project.",
        ),
    ],
)
def test_inferred_scope_is_refused_with_the_contract_text(operation: str, expected: str) -> None:
    scope = ResolvedScope("default", "frank", ScopeSource.SHARED_SLOT)
    with pytest.raises(BadRequest) as refused:
        scope_require_named(scope, operation)
    assert refused.value.message == expected
    assert refused.value.code == "scope_not_named"


@pytest.mark.parametrize("source", [ScopeSource.EXPLICIT, ScopeSource.SESSION])
def test_named_scopes_are_not_refused(source: ScopeSource) -> None:
    scope_require_named(ResolvedScope("default", "frank", source), "pop")


def test_list_hint_names_the_mailbox() -> None:
    hint = scope_hint(ResolvedScope("default", "frank", ScopeSource.DEFAULT))
    assert hint.startswith("This mailbox (default/frank) was resolved by default scope")
