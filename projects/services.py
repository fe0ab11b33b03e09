"""Writes for workspaces, projects, sessions, tokens and activity."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from aimemory_site.lib.agents import AGENT_OTHER, agent_normalize
from aimemory_site.lib.errors import BadRequest, Code, Conflict
from aimemory_site.lib.names import name_invalid_message, name_is_valid
from aimemory_site.lib.principal import Principal
from projects.access import Level, project_check
from projects.auth import TOKEN_PREFIX, token_hash
from projects.models import (
    Activity,
    AgentSession,
    ApiToken,
    Grant,
    Project,
    ServerBoot,
    Workspace,
)


def name_validate(kind: str, value: str) -> str:
    """Return ``value`` stripped, or raise BadRequest if it is not a valid name."""
    value = value.strip()
    if not name_is_valid(value):
        raise BadRequest(name_invalid_message(kind, value), code=Code.INVALID_NAME)
    return value


def session_agent(session: AgentSession | None) -> str:
    """The agent kind of what a session does; without a session it is ``other``."""
    return session.agent if session is not None else AGENT_OTHER


def activity_record(
    *,
    project: Project,
    kind: str,
    actor: str,
    summary: str,
    counterpart: Project | None = None,
) -> Activity:
    """Append a Recent Activity entry (metadata only; callers never pass a body)."""
    activity = activity_new(
        project=project, kind=kind, actor=actor, summary=summary, counterpart=counterpart
    )
    activity.save(force_insert=True)
    return activity


def activity_new(
    *,
    project: Project,
    kind: str,
    actor: str,
    summary: str,
    counterpart: Project | None = None,
) -> Activity:
    """A Recent Activity entry, not yet saved (metadata only; never a body)."""
    return Activity(
        project=project,
        kind=kind,
        actor=actor[:200],
        summary=summary[:300],
        counterpart=counterpart,
    )


@transaction.atomic
def project_get_or_create(
    *, principal: Principal, workspace: str, project: str
) -> tuple[Project, bool]:
    """Return the named project, creating it (and its workspace) if new.

    Creating needs an authenticated caller or an anonymous server, which every principal
    is by construction; an existing project needs write.
    """
    workspace = name_validate("workspace", workspace)
    project = name_validate("project", project)
    found = (
        Project.objects.select_related("workspace")
        .filter(workspace__name=workspace, name=project)
        .first()
    )
    if found is not None:
        project_check(principal, found, need=Level.WRITE)
        return found, False
    ws, _ = Workspace.objects.get_or_create(name=workspace)
    try:
        # A savepoint, so a concurrent creator winning the unique key leaves this
        # transaction usable for the lookup below.
        with transaction.atomic():
            created = Project.objects.create(workspace=ws, name=project, created_by=principal.user)
    except IntegrityError:
        found = Project.objects.select_related("workspace").get(workspace=ws, name=project)
        project_check(principal, found, need=Level.WRITE)
        return found, False
    activity_record(
        project=created,
        kind=Activity.Kind.PROJECT_CREATED,
        actor=principal.display_name,
        summary=f"project {workspace}/{project} created",
    )
    return created, True


def _session_taken(session_id: str) -> Conflict:
    return Conflict(
        f"session id {session_id[:80]!r} belongs to another caller; each agent session "
        "registers its own id",
        code=Code.SESSION_TAKEN,
    )


@dataclass(frozen=True)
class SessionStart:
    project: Project
    session: AgentSession
    project_created: bool
    # False when this principal had registered the id before (a repeat, a resume).
    session_created: bool


def session_id_parse(session_id: str) -> str:
    """A harness's session id, stripped: 1-200 characters, else 400 ``invalid_session_id``."""
    session_id = session_id.strip()
    if not session_id or len(session_id) > 200:
        raise BadRequest("session_id must be 1-200 characters", code=Code.INVALID_SESSION_ID)
    return session_id


@transaction.atomic
def session_start(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    session_id: str,
    agent: str | None = None,
) -> SessionStart:
    """Register a lifecycle-hook session in a project, creating the project if new.

    Idempotent for the same ``session_id`` and principal: a repeat refreshes
    ``last_seen_at`` (and moves the session if the harness now reports another project).
    Either way the session now holds the shared slot. A session id another principal
    registered is refused (409 ``session_taken``) before anything is written.
    """
    session_id = session_id_parse(session_id)
    # Locked, so two callers racing for a new id cannot both pass the owner check.
    existing = AgentSession.objects.select_for_update().filter(session_id=session_id).first()
    if existing is not None and existing.principal_key not in ("", principal.key):
        raise _session_taken(session_id)
    target, created = project_get_or_create(
        principal=principal, workspace=workspace, project=project
    )
    now = timezone.now()
    kind = agent_normalize(agent)
    try:
        # A savepoint: a concurrent first registration of the same id wins the unique key.
        with transaction.atomic():
            session, session_created = AgentSession.objects.get_or_create(
                session_id=session_id,
                defaults={
                    "project": target,
                    "agent": kind,
                    "principal_key": principal.key,
                    "started_at": now,
                    "last_seen_at": now,
                },
            )
    except IntegrityError:
        session, session_created = AgentSession.objects.get(session_id=session_id), False
    if not session_created:
        if session.principal_key not in ("", principal.key):
            # Lost a race for a new id to another caller: roll the project back too.
            raise _session_taken(session_id)
        session.project = target
        session.last_seen_at = now
        session.principal_key = principal.key
        if kind != AGENT_OTHER:
            session.agent = kind
        session.save(update_fields=["project", "last_seen_at", "agent", "principal_key"])
    if session_created:
        activity_record(
            project=target,
            kind=Activity.Kind.SESSION_STARTED,
            actor=f"{principal.display_name} ({kind})",
            summary=f"{kind} session started",
        )
    return SessionStart(
        project=target, session=session, project_created=created, session_created=session_created
    )


def server_boot_record() -> ServerBoot:
    """Mark a server start: the shared slot forgets sessions published before it."""
    return ServerBoot.objects.create()


def api_token_issue(*, user: User, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for ``user``; return it and its key, which is never shown again."""
    key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user, name=name[:100], key_hash=token_hash(key), prefix=key[:12]
    )
    return token, key


def api_token_revoke(*, token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


def grant_set(*, user: User, project: Project, level: str | None) -> Grant | None:
    """Give ``user`` ``level`` (read or write) on ``project``, or take it away (None)."""
    if level is None:
        Grant.objects.filter(user=user, project=project).delete()
        return None
    grant, _ = Grant.objects.update_or_create(user=user, project=project, defaults={"level": level})
    return grant


def project_mode_set(*, project: Project, mode: str) -> None:
    """Make ``project`` open or restricted (docs/operating.md#authentication)."""
    project.access_mode = mode
    project.save(update_fields=["access_mode"])


def user_create(*, username: str, superuser: bool = False, password: str = "") -> User:
    """A Django user; without a password one that cannot sign in (tokens still work)."""
    user = User(username=username, is_superuser=superuser, is_staff=superuser)
    if password:
        user.set_password(password)
    else:
        user.set_unusable_password()
    user.save()
    return user
