"""Session wakes (docs/reference.md#waiting-and-waking): which pending messages a session
has been told about, and the wait that answers as soon as there is mail it has not.

A session is told about mail by its session start (the on-start block's inbox notice) and
by a wake; each message at most once, recorded by ``messaging.session_waits``.
A wake never pops and never carries message text: it answers counts and the notice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from aimemory_site.lib.errors import Code, NotFound
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.wakeups import (
    inbox_topic,
    once_per_call,
    session_topic,
    wait_for,
    wait_seconds_parse,
    wake_publish,
)
from aimemory_site.onstart.selectors import session_of_principal
from messaging.notices import inbox_notice
from messaging.selectors import message_pending_count
from messaging.session_waits import (
    pending_announce,
    session_wait_current,
    session_wait_ended,
    session_wait_newest,
)
from projects.access import Level, project_access, project_access_again
from projects.models import Project
from projects.services import session_id_parse


def _wake_answer(*, project: Project, new: int, pending: int, superseded: bool) -> dict[str, Any]:
    context = None
    if new:
        context = inbox_notice(
            count=pending, workspace=project.workspace.name, project=project.name
        )
    return {
        "new_message_count": new,
        "pending_message_count": pending,
        "context": context,
        "superseded": superseded,
    }


def session_wait(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    session_id: str,
    wait_seconds: object = None,
    client_gone: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """``POST /api/v1/sessions/wait``: answer as soon as mail the session has not been told
    about is pending in the project (announcing it), or when ``wait_seconds`` (clamped to
    0..60; not an integer: 400 ``invalid_wait_seconds``) have passed, or when a newer
    wait of the same session supersedes this one. Once ``client_gone`` says the caller has
    gone, it announces nothing more: mail it would have told stays new to the session.

    Needs read on the project, checked first, so a caller learns nothing of a project it
    may not read. The session id must be one ``principal`` registered: any other (unknown,
    or another principal's) is 404 ``session_not_found`` and changes nothing. Must not be
    called inside ``transaction.atomic``: it parks, holding no connection (``wait_for``).
    """
    wait = wait_seconds_parse(wait_seconds)
    found = project_access(principal, workspace, project, need=Level.READ)
    session_id = session_id_parse(session_id)
    session = session_of_principal(principal, session_id)
    if session is None:
        raise NotFound(
            f"no session {session_id[:200]!r} registered by this caller: start it with "
            "POST /api/v1/sessions first",
            code=Code.SESSION_NOT_FOUND,
        )
    topic = session_topic(session.session_id)

    def newest() -> uuid.UUID:
        token = session_wait_newest(session, found, wait)
        # Committed: an older wait of this session, in any process, wakes and finds it
        # is no longer the newest.
        wake_publish([topic])
        return token

    # Once per call: a later run of this call (after a wake) is the same wait.
    token = once_per_call(newest, client_gone)

    def look() -> dict[str, Any] | None:
        if not session_wait_current(session, token):
            pending = message_pending_count(project=found)
            return _wake_answer(project=found, new=0, pending=pending, superseded=True)
        announced = pending_announce(session=session, project=found)
        if not announced.new:
            return None
        return _wake_answer(
            project=found, new=announced.new, pending=announced.pending, superseded=False
        )

    answer = wait_for(
        look,
        topics=[inbox_topic(found.pk), topic],
        wait_seconds=wait,
        caller=principal.wait_key,
        recheck=lambda: project_access_again(principal, workspace, project, need=Level.READ),
        # A newer wait of this session takes its older one's place under the caps.
        place=f"session:{session.pk}",
        client_gone=client_gone,
    )
    if wait > 0:
        session_wait_ended(session, token)
    if answer is not None:
        return answer
    return _wake_answer(
        project=found, new=0, pending=message_pending_count(project=found), superseded=False
    )
