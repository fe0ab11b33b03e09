"""Bearer authentication shared by the JSON API, the hook route and MCP (DESIGN.md 8)."""

from __future__ import annotations

import functools
import hashlib
import hmac
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from aimemory_site.lib.errors import Code, Unauthorized
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.sql import model_from_row, select_columns
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


def _live_token(key_hash: str) -> ApiToken | None:
    """The unrevoked token with ``key_hash``, with its user, in one plain statement: it
    runs on every authenticated call, where compiling the queryset cost more than the
    query."""
    with connection.cursor() as cursor:
        cursor.execute(_live_token_sql(connection.vendor), [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    user, rest = model_from_row(User, row)
    token, _ = model_from_row(ApiToken, rest)
    token.user = user
    return token


@functools.cache
def _live_token_sql(vendor: str) -> str:
    return (
        f"SELECT {select_columns(User, 'u')}, {select_columns(ApiToken, 't')} "
        f"FROM {ApiToken._meta.db_table} t JOIN {User._meta.db_table} u ON u.id = t.user_id "
        "WHERE t.key_hash = %s AND t.revoked_at IS NULL LIMIT 1"
    )


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
    token = _live_token(token_hash(key))
    if token is None or not token.user.is_active:
        if not auth_enabled():
            return Principal.anonymous()
        raise _unauthorized("invalid or revoked token")
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return Principal.for_user(token.user)
