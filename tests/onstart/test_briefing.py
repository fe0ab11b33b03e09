"""The briefing and the on-start block: what they hold, in which order, and that the
block never holds message text."""

from __future__ import annotations

import pytest

from aimemory_site.lib.principal import Principal
from aimemory_site.onstart.selectors import briefing_get
from aimemory_site.onstart.services import scope_line
from projects.models import Page, Project
from projects.scope import scope_resolve
from tests.conftest import SEND, A, ApiCall

pytestmark = pytest.mark.django_db

HEADER = "📘 ai-memory brief for default/project-a:"


def test_the_brief_in_memory_briefing_and_on_request_in_the_block(
    api: ApiCall, project_a: Project
) -> None:
    Page.objects.create(project=project_a, path="_rules/style", body="Use black.", pinned=True)

    briefing = api("get", "/api/v1/briefing", A)[1]
    without = api("post", "/api/v1/sessions", {**A, "session_id": "s1"})[1]
    with_brief = api("post", "/api/v1/sessions", {**A, "session_id": "s2", "inject_brief": True})[1]

    assert briefing["brief"].startswith(HEADER)
    assert without["brief"] is None
    assert HEADER not in without["context"]
    assert with_brief["brief"] == briefing["brief"]
    assert with_brief["context"].startswith(HEADER)


def test_the_block_order_and_that_it_never_holds_message_text(
    api: ApiCall, project_a: Project, project_b: Project
) -> None:
    Page.objects.create(project=project_a, path="_rules/style", body="Use black.")
    to_a = {**SEND, "to_project": "project-a", "from_project": "project-b"}
    api("post", "/api/v1/messages", {**to_a, "subject": "SUBJECT-X", "body": "BODY-X"})
    api("post", "/api/v1/handoffs", {**A, "body": "HANDOFF-X"})

    block = api("post", "/api/v1/sessions", {**A, "session_id": "s", "inject_brief": True})[1]

    parts = block["context"].split("\n\n")
    assert parts[0].startswith("🤝 ai-memory handoff for default/project-a")
    assert parts[0].endswith("HANDOFF-X")
    assert parts[1] == HEADER
    assert parts[2] == "## _rules/style\nUse black."
    assert parts[3].startswith("📬 ai-memory: 1 cross-project message waiting")
    assert parts[4] == scope_line(workspace="default", project="project-a")
    assert "SUBJECT-X" not in block["context"] and "BODY-X" not in block["context"]
    assert block["pending_message_count"] == 1


def test_an_inferred_briefing_says_so(api: ApiCall, project_a: Project) -> None:
    api("post", "/api/v1/sessions", {**A, "session_id": "s-a"})
    principal = Principal.anonymous()

    answer = briefing_get(
        principal=principal,
        scope=scope_resolve(principal=principal, workspace=None, project=None, session_id=None),
    )

    assert answer["scope"]["resolved_by"] == "shared_slot"
    assert "resolved by shared_slot" in answer["hint"]


def test_the_scope_line_is_the_contracts_text() -> None:
    assert scope_line(workspace="acme", project="api") == (
        'ai-memory: this session\'s project is acme/api. Pass workspace "acme" and project '
        '"api" (from_workspace and from_project when sending) to the memory_* tools.'
    )
