"""Bearer authentication shared by the JSON API, the hook route and MCP (docs/operating.md#authentication)."""

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
    return _any_token()


def _any_token() -> bool:
    # Asked on every anonymous request: a plain statement, not a compiled queryset.
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {ANY_TOKEN_SQL}")
        return bool(cursor.fetchone()[0])


#: True when any token was ever issued, for a statement that reads it on the way (an
#: anonymous caller is refused then; see ``OpenServerCheck``).
ANY_TOKEN_SQL = f"EXISTS (SELECT 1 FROM {ApiToken._meta.db_table})"

_ANONYMOUS_REFUSED = "authentication required: send Authorization: Bearer <token>"


class OpenServerCheck:
    """Whether a server without a root token lets an anonymous caller in: it does until
    the first user token is issued (``auth_enabled``).

    Asked once a request, as late as a round trip can be saved: the route's project
    look-up reads it in its own statement (``projects.access.projects_access`` calls
    ``settle``), and anything else that reads the caller first asks it alone
    (``Principal.confirmed``). A request that answers without either is answered 401 if
    the server is closed (``aimemory_site.middleware.UnconfirmedCallerMiddleware``).
    """

    __slots__ = ("_open",)

    def __init__(self) -> None:
        self._open: bool | None = None

    @property
    def answered(self) -> bool:
        return self._open is not None

    def confirm(self) -> None:
        if self._open is None:
            self.settle(_any_token())
        elif not self._open:
            raise _unauthorized(_ANONYMOUS_REFUSED)

    def settle(self, any_token: bool) -> None:
        self._open = not any_token
        if any_token:
            raise _unauthorized(_ANONYMOUS_REFUSED)


# A token that authenticates: unrevoked, of an active user, matched by its keyed hash
# (the one parameter). Aliases t (the token) and u (its user); authentication and the
# rate limit's choice of counter both use it, so the two never disagree on a bearer.
_LIVE_TOKEN_WHERE = "t.key_hash = %s AND t.revoked_at IS NULL AND u.is_active"


def live_token_exists_sql() -> str:
    """An SQL condition, true when the token of keyed hash ``%s`` (its one parameter)
    authenticates; for a statement that must decide it without a round trip of its own."""
    return (
        f"EXISTS (SELECT 1 FROM {ApiToken._meta.db_table} t JOIN {User._meta.db_table} u "
        f"ON u.id = t.user_id WHERE {_LIVE_TOKEN_WHERE})"
    )


def bearer_of(header: str | None) -> str:
    """The token of an ``Authorization: Bearer <token>`` header value; "" when there is
    none or the scheme is another."""
    if not header:
        return ""
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def is_root_token(key: str) -> bool:
    """Whether ``key`` is ``AI_MEMORY_ROOT_TOKEN`` (compared in constant time)."""
    root_token = settings.AI_MEMORY_ROOT_TOKEN
    return bool(root_token) and hmac.compare_digest(key.encode(), root_token.encode())


def _live_token(key_hash: str) -> ApiToken | None:
    """The token with ``key_hash`` if it authenticates, with its user, in one plain
    statement: it runs on every authenticated call, where compiling the queryset cost
    more than the query."""
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
        f"WHERE {_LIVE_TOKEN_WHERE} LIMIT 1"
    )


def _unauthorized(detail: str) -> Unauthorized:
    return Unauthorized(detail, code=Code.UNAUTHORIZED)


def principal_from_authorization(header: str | None, address: str = "") -> Principal:
    """Authenticate an ``Authorization`` header value (or its absence) of a caller at
    ``address``.

    An anonymous server lets everyone in; with authentication on, a missing, unknown or
    revoked bearer raises Unauthorized.
    """
    return principal_from_authorization_deferred(header, address).confirmed()


def principal_from_authorization_deferred(header: str | None, address: str = "") -> Principal:
    """``principal_from_authorization``, except that a caller without a bearer on a
    server without a root token comes back anonymous with the question whether the
    server is open still to ask (``OpenServerCheck``): the one surface that answers it
    on every path, the JSON API, saves a statement on the routes that can read it on the
    way."""
    key = bearer_of(header)
    if not key:
        if settings.AI_MEMORY_ROOT_TOKEN:
            raise _unauthorized(_ANONYMOUS_REFUSED)
        return Principal.anonymous(OpenServerCheck(), address=address)
    if is_root_token(key):
        return Principal.root()
    token = _live_token(token_hash(key))
    if token is None:
        if not auth_enabled():
            return Principal.anonymous(address=address)
        raise _unauthorized("invalid or revoked token")
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return Principal.for_user(token.user, token_hash=token.key_hash)


def principal_recheck(principal: Principal) -> Principal:
    """``principal`` as a new call with the same credentials would be let in now, for a
    call that waits (docs/serving.md#the-loop): raises Unauthorized once its token is
    revoked or its user made inactive, or, for an anonymous caller, once the server is
    no longer open. Root's token is the server's setting and cannot change."""
    if principal.token_hash is not None:
        token = _live_token(principal.token_hash)
        if token is None:
            raise _unauthorized("invalid or revoked token")
        return Principal.for_user(token.user, token_hash=token.key_hash)
    if principal.kind == "anonymous" and auth_enabled():
        raise _unauthorized(_ANONYMOUS_REFUSED)
    return principal
