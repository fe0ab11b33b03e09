"""Scope resolution: which project an MCP call acts on, and how that was decided.

docs/reference.md#scope-resolution. pop, cancel and send refuse an inferred scope; list and briefing
answer it and say where it came from.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.mcp_tool import ToolCall
from aimemory_site.lib.principal import Principal
from projects.access import readable_projects
from projects.models import Activity, AgentSession, ServerBoot


class ScopeSource(enum.StrEnum):
    EXPLICIT = "explicit"
    SESSION = "session"
    SHARED_SLOT = "shared_slot"
    STARTUP_SEED = "startup_seed"
    DEFAULT = "default"
    DEFAULT_AFTER_MISMATCH = "default_after_mismatch"


@dataclass(frozen=True)
class ResolvedScope:
    workspace: str
    project: str
    source: ScopeSource
    # The caller's lifecycle-hook session when it named the scope (source ``session``),
    # so surfaces can stamp it on what they do without looking it up again.
    session: AgentSession | None = field(default=None, compare=False)

    @property
    def inferred(self) -> bool:
        return self.source not in (ScopeSource.EXPLICIT, ScopeSource.SESSION)


def _clean(value: str | None) -> str:
    return (value or "").strip()


def scope_resolve(
    *,
    principal: Principal,
    workspace: str | None,
    project: str | None,
    session_id: str | None,
) -> ResolvedScope:
    """Resolve the caller's (workspace, project); never creates anything.

    Whitespace-only values count as absent. Naming only one of the pair is an error.
    Inference is per caller (docs/reference.md#scope-resolution): a session id counts only when
    ``principal`` registered it, and the shared slot and startup seed consider only
    projects ``principal`` may read (its own sessions first), so an inferred scope never
    names a project the caller may not read.
    """
    ws, proj, sid = _clean(workspace), _clean(project), _clean(session_id)
    if bool(ws) != bool(proj):
        raise BadRequest(
            "workspace and project must be provided together", code=Code.SCOPE_INCOMPLETE
        )
    if ws:
        return ResolvedScope(ws, proj, ScopeSource.EXPLICIT)
    if sid:
        session = (
            AgentSession.objects.select_related("project__workspace")
            .filter(session_id=sid, principal_key=principal.key)
            .first()
        )
        if session is not None:
            p = session.project
            return ResolvedScope(p.workspace.name, p.name, ScopeSource.SESSION, session)
        return _default(ScopeSource.DEFAULT_AFTER_MISMATCH)
    readable = readable_projects(principal).values("pk")
    boot = ServerBoot.objects.order_by("-started_at").values_list("started_at", flat=True).first()
    latest = (
        AgentSession.objects.select_related("project__workspace")
        .filter(project__in=readable)
        .order_by("-last_seen_at")
    )
    if boot is not None:
        latest = latest.filter(last_seen_at__gte=boot)
    slot = latest.filter(principal_key=principal.key).first() or latest.first()
    if slot is not None:
        p = slot.project
        return ResolvedScope(p.workspace.name, p.name, ScopeSource.SHARED_SLOT)
    if boot is not None:
        seed = (
            Activity.objects.select_related("project__workspace")
            .filter(created_at__lt=boot, project__in=readable)
            .order_by("-created_at")
            .first()
        )
        if seed is not None:
            p = seed.project
            return ResolvedScope(p.workspace.name, p.name, ScopeSource.STARTUP_SEED)
    return _default(ScopeSource.DEFAULT)


def _default(source: ScopeSource) -> ResolvedScope:
    return ResolvedScope(
        settings.AI_MEMORY_DEFAULT_WORKSPACE, settings.AI_MEMORY_DEFAULT_PROJECT, source
    )


_REFUSALS = {
    "pop": (
        "refusing to pop from {ws}/{proj}: it was resolved by {source}, not named, so it may "
        "not be the project you are working in. Pass workspace and project (the SessionStart "
        "inbox notice and memory_briefing name them)."
    ),
    "cancel": (
        "refusing to cancel the outbox of {ws}/{proj}: it was resolved by {source}, not named, "
        "so it may not be the project you are working in. Pass workspace and project to name "
        "the sending project."
    ),
    "handoff": (
        "refusing to write a handoff for {ws}/{proj}: it was resolved by {source}, not named, "
        "so it may not be the project you are working in. Pass workspace and project."
    ),
    "write_page": (
        "refusing to write a page in {ws}/{proj}: it was resolved by {source}, not named, so "
        "it may not be the project you are working in. Pass workspace and project."
    ),
    "decision_answer": (
        "refusing to answer a decision from {ws}/{proj}: it was resolved by {source}, not "
        "named, so it may not be the mailbox that holds the question. Pass workspace and "
        "project (the project whose inbox holds it)."
    ),
    "send": (
        "refusing to send as {ws}/{proj}: it was resolved by {source}, not named, so it may "
        "not be the project you are working in. Pass from_workspace and from_project to name "
        "the sending project."
    ),
}

LIST_HINT = (
    "This mailbox ({ws}/{proj}) was resolved by {source} scope, not named explicitly, so it "
    "may be another project's. A SessionStart notice or memory_briefing count names the "
    "project it is for; re-run with that workspace and project explicitly."
)


def scope_require_named(scope: ResolvedScope, operation: str) -> None:
    """Refuse ``operation`` ("pop", "cancel", "send", "handoff", "write_page",
    "decision_answer") on an inferred scope."""
    if scope.inferred:
        raise BadRequest(
            _REFUSALS[operation].format(
                ws=scope.workspace, proj=scope.project, source=scope.source.value
            ),
            code=Code.SCOPE_NOT_NAMED,
        )


def scope_hint(scope: ResolvedScope) -> str:
    return LIST_HINT.format(ws=scope.workspace, proj=scope.project, source=scope.source.value)


def scope_of_call(
    call: ToolCall, workspace: str = "workspace", project: str = "project"
) -> ResolvedScope:
    """The scope an MCP tool call acts on, from the named arguments or its session."""
    return scope_resolve(
        principal=call.principal,
        workspace=call.text(workspace),
        project=call.text(project),
        session_id=call.session_id,
    )


def scope_annotate(payload: dict[str, Any], scope: ResolvedScope) -> dict[str, Any]:
    """Name an inferred scope in a read's answer, so the agent can tell it was guessed."""
    if scope.inferred:
        payload["resolved_scope"] = {"workspace": scope.workspace, "project": scope.project}
        payload["scope_source"] = scope.source.value
        payload["hint"] = scope_hint(scope)
    return payload
