"""The on-start block a lifecycle hook prints into a new agent session: the handoff it
claimed, the brief, the inbox notice, and the scope line that names the project."""

from __future__ import annotations

from typing import Any

from aimemory_site.lib.errors import BadRequest, Code, Conflict
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.session_sources import (
    SESSION_SOURCES,
    SOURCE_COMPACT,
    SOURCE_INIT,
    SOURCE_RESUME,
    SOURCE_STARTUP,
)
from aimemory_site.onstart.selectors import session_of_principal
from messaging.notices import inbox_notice
from messaging.selectors import message_pending_count
from messaging.session_waits import pending_announce
from projects.access import Level, project_access, project_level_of
from projects.brief_selectors import brief_compile
from projects.handoff_selectors import handoff_payload, handoff_text
from projects.handoff_services import handoff_claim
from projects.models import AgentSession, Project
from projects.services import session_start

# Starts that go on with a session the agent already had (a resume, a compaction), or
# that register a project from a terminal (``ai-memory init``): none of them is the next
# session a handoff was written for, so none may take it.
_CONTINUING_SOURCES = frozenset({SOURCE_RESUME, SOURCE_COMPACT, SOURCE_INIT})


def scope_line(*, workspace: str, project: str) -> str:
    """The block's last line, always there: a static MCP client learns the names to pass."""
    return (
        f"ai-memory: this session's project is {workspace}/{project}. Pass workspace "
        f'"{workspace}" and project "{project}" (from_workspace and from_project when '
        "sending) to the memory_* tools."
    )


def onstart_block(
    *,
    project: Project,
    session_id: str,
    session: AgentSession | None = None,
    claim_handoff: bool = False,
    inject_brief: bool = False,
) -> dict[str, Any]:
    """The hook answer: names, the ``context`` text and what it is made of.

    In order, joined by a blank line: the handoff this call claimed (``claim_handoff``:
    the caller starts a session and holds write), the brief (``inject_brief``), the inbox
    notice (when mail waits), and always the scope line. It never holds message text and
    never pops; the mail is only counted and named. With a ``session``, the pending mail
    the notice counts is recorded as told to it (``pending_announce``), so its wakes
    announce only mail that came later.
    """
    workspace, name = project.workspace.name, project.name
    handoff = handoff_claim(project=project, session=session) if claim_handoff else None
    brief = brief_compile(project) if inject_brief else None
    if session is None:
        count = message_pending_count(project=project)
    else:
        count = pending_announce(session=session, project=project).pending
    parts = []
    if handoff is not None:
        parts.append(handoff_text(handoff, workspace=workspace, project=name))
    if brief is not None:
        parts.append(brief)
    if count:
        parts.append(inbox_notice(count=count, workspace=workspace, project=name))
    parts.append(scope_line(workspace=workspace, project=name))
    return {
        "workspace": workspace,
        "project": name,
        "session_id": session_id,
        "context": "\n\n".join(parts),
        "handoff": handoff_payload(handoff) if handoff is not None else None,
        "brief": brief,
        "pending_message_count": count,
    }


def session_source_check(source: str | None) -> str:
    """The start's ``source``; none at all (a hook older than the field) is a startup.

    Raises BadRequest (``invalid_source``) for a value no hook sends, before anything is
    written: guessing would either eat a handoff or withhold one.
    """
    if source is None:
        return SOURCE_STARTUP
    if source not in SESSION_SOURCES:
        known = ", ".join(SESSION_SOURCES[:-1]) + f" or {SESSION_SOURCES[-1]}"
        raise BadRequest(
            f"source must be one of {known}, got {source[:80]!r}", code=Code.INVALID_SOURCE
        )
    return source


def handoff_claimable(*, session_created: bool, source: str, cross_site: bool) -> bool:
    """Whether a session start may claim the project's next handoff: the one rule.

    Only a new session claims: an id this principal registered before (a repeat, a
    resume under the same id) and a continuing ``source`` claim nothing. Nor does a
    request a browser marks cross-site, so a web page cannot make a start eat the note.
    """
    return session_created and source not in _CONTINUING_SOURCES and not cross_site


def onstart_for_session_start(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    session_id: str,
    agent: str | None = None,
    source: str | None = None,
    inject_brief: bool = False,
    cross_site: bool = False,
) -> dict[str, Any]:
    """``POST /api/v1/sessions``: register the session (creating the project if new) and
    answer its on-start block, with the next handoff when ``handoff_claimable``.

    Needs write (or creates the project). An unknown ``source`` is refused, and a session
    id another principal registered is 409 ``session_taken``; neither writes anything.
    """
    checked_source = session_source_check(source)
    started = session_start(
        principal=principal,
        workspace=workspace,
        project=project,
        session_id=session_id,
        agent=agent,
    )
    claim = handoff_claimable(
        session_created=started.session_created, source=checked_source, cross_site=cross_site
    )
    return onstart_block(
        project=started.project,
        session_id=started.session.session_id,
        session=started.session,
        claim_handoff=claim,
        inject_brief=inject_brief,
    )


def onstart_for_hook(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    session_id: str,
    cross_site: bool = False,
) -> dict[str, Any]:
    """The block ``GET /handoff`` answers for an existing project; creates no project.

    Needs read. Without a ``session_id`` it only reports: nothing is claimed or written.
    With one it counts as a startup of that session: a writer's new id is registered and
    may claim (``handoff_claimable``); a repeated id claims nothing, and an id another
    principal registered claims nothing and stays theirs. A reader may look, never take
    the handoff away from the writers, and a request a browser marks cross-site (an
    ``<img>`` on a web page) writes nothing at all.
    """
    found = project_access(principal, workspace, project, need=Level.READ)
    session_id = session_id.strip()
    if not session_id or cross_site:
        return onstart_block(project=found, session_id=session_id)
    if project_level_of(principal, found) < Level.WRITE:
        # A reader's start registers nothing; a session it registered is still told of
        # the mail this block announces, so its wakes do not announce it again.
        own = session_of_principal(principal, session_id)
        return onstart_block(project=found, session_id=session_id, session=own)
    try:
        started = session_start(
            principal=principal,
            workspace=found.workspace.name,
            project=found.name,
            session_id=session_id,
        )
    except Conflict as taken:
        if taken.code != Code.SESSION_TAKEN:
            raise
        return onstart_block(project=found, session_id=session_id)
    claim = handoff_claimable(
        session_created=started.session_created, source=SOURCE_STARTUP, cross_site=cross_site
    )
    return onstart_block(
        project=started.project,
        session_id=started.session.session_id,
        session=started.session,
        claim_handoff=claim,
    )
