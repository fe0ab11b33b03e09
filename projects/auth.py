"""Bearer authentication shared by the JSON API, the hook route and MCP (DESIGN.md 8)."""

from __future__ import annotations

import hashlib
import hmac
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from aimemory_site.lib.errors import Code, Unauthorized
from aimemory_site.lib.principal import Principal
from projects.models import ApiToken

TOKEN_PREFIX = "aim_"
# last_used_at is refreshed at most this often, so authentication is not a write per call.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def token_hash(key: str) -> str:
    """The keyed hash stored for an API token key (HMAC-SHA256 under SECRET_KEY)."""
    return hmac.new(settings.SECRET_KEY.encode(), key.encode(), hashlib.sha256).hexdigest()


def auth_enabled() -> bool:
    """Authentication is on once a root token is set or any user token was ever issued.

    Revoked tokens count too: revoking the last token must not reopen the server.
    """
    if settings.AI_MEMORY_ROOT_TOKEN:
        return True
    # Asked on every anonymous request: a plain statement, not a compiled queryset.
    with connection.cursor() as cursor:
        cursor.execute(_ANY_TOKEN_SQL)
        return cursor.fetchone() is not None


_ANY_TOKEN_SQL = f"SELECT 1 FROM {ApiToken._meta.db_table} LIMIT 1"


def _unauthorized(detail: str) -> Unauthorized:
    return Unauthorized(detail, code=Code.UNAUTHORIZED)


def principal_from_authorization(header: str | None) -> Principal:
    """Authenticate an ``Authorization`` header value (or its absence).

    An anonymous server lets everyone in; with authentication on, a missing, unknown or
    revoked bearer raises Unauthorized.
    """
    key = ""
    if header:
        scheme, _, value = header.strip().partition(" ")
        if scheme.lower() == "bearer":
            key = value.strip()
    if not key:
        if not auth_enabled():
            return Principal.anonymous()
        raise _unauthorized("authentication required: send Authorization: Bearer <token>")
    root_token = settings.AI_MEMORY_ROOT_TOKEN
    if root_token and hmac.compare_digest(key.encode(), root_token.encode()):
        return Principal.root()
    token = (
        ApiToken.objects.select_related("user")
        .filter(key_hash=token_hash(key), revoked_at__isnull=True)
        .first()
    )
    if token is None or not token.user.is_active:
        if not auth_enabled():
            return Principal.anonymous()
        raise _unauthorized("invalid or revoked token")
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return Principal.for_user(token.user)
