"""Request rate limits: ``AI_MEMORY_RATE_LIMIT`` (docs/reference.md#limits-and-faults).

The rule: at most N requests per caller in each fixed window of a second, a minute or an
hour (aligned to the Unix epoch). A caller is its bearer token when that token
authenticates (the root token, or a user's unrevoked token), else its client address: a
request with an unknown or revoked bearer, or any request to an anonymous server, counts
against its address. So random bearers neither dodge an address's limit nor add a row
each to the counters. Fixed windows, not sliding ones, so that counting is one row per
caller and window and one statement per request; the price is that a caller may send up
to 2N requests across a window boundary.

The counters are rows of ``RateWindow`` in the database, so every worker process and
every host serving the same database share them. Windows are counted on the clock of the
host that serves the request; hosts are expected to keep their clocks in sync (NTP).
"""

from __future__ import annotations

import math
import re
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from aimemory_site.lib.errors import RateLimited
from projects.auth import bearer_of, is_root_token, live_token_exists_sql, token_hash
from projects.models import RateWindow

_PERIODS = {"second": 1, "minute": 60, "hour": 3600}
_SETTING = re.compile(r"(?P<requests>\d+)\s*/\s*(?P<period>second|minute|hour)", re.IGNORECASE)


@dataclass(frozen=True)
class RateLimit:
    """At most ``requests`` requests per caller in each window of ``period`` seconds."""

    requests: int
    period_s: int
    period_name: str


def rate_limit_parse(text: str) -> RateLimit | None:
    """``"N/minute"`` (or ``N/second``, ``N/hour``) as a RateLimit; empty text is None: off.

    Raises ValueError for anything else, ``0/minute`` included (a server that refuses
    every request is a mistake, not a setting).
    """
    text = text.strip()
    if not text:
        return None
    match = _SETTING.fullmatch(text)
    if match is None or int(match["requests"]) < 1:
        raise ValueError(
            f"AI_MEMORY_RATE_LIMIT must be N/second, N/minute or N/hour with N >= 1, got {text!r}"
        )
    period_name = match["period"].lower()
    return RateLimit(int(match["requests"]), _PERIODS[period_name], period_name)


def rate_limit_configured() -> RateLimit | None:
    """The server's limit (``settings.AI_MEMORY_RATE_LIMIT``), or None when it is off.

    Raises ImproperlyConfigured for a value ``rate_limit_parse`` refuses; the system check
    ``projects.E001`` reports the same value before the server starts.
    """
    try:
        return rate_limit_parse(settings.AI_MEMORY_RATE_LIMIT)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None


@dataclass(frozen=True)
class RateCaller:
    """The counter a request counts against: ``key``, or ``"t:" + token_hash`` instead
    when ``token_hash`` is set and its token authenticates, which the counting statement
    itself decides (no round trip of its own before the view authenticates)."""

    key: str
    token_hash: str | None = None


def rate_limit_caller(authorization: str | None, address: str) -> RateCaller:
    """Who a request with this ``Authorization`` header from ``address`` counts as.

    A bearer is kept as its keyed hash (``token_hash``: for a user token, the very
    ``ApiToken.key_hash``), never as sent. Behind a proxy every caller counted by address
    arrives from the proxy's address and shares one counter.
    """
    by_address = f"a:{address}"
    bearer = bearer_of(authorization)
    if not bearer:
        return RateCaller(by_address)
    if is_root_token(bearer):
        return RateCaller(f"t:{token_hash(bearer)}")
    return RateCaller(by_address, token_hash=token_hash(bearer))


# Raw SQL because the ORM has no atomic increment-or-create: get_or_create followed by
# an F() update is two statements, and two workers counting the first request of a window
# at once would both try the insert. One upsert counts on both backends (SQLite >= 3.35,
# PostgreSQL >= 9.5) with the conflict settled by the unique constraint on (key,
# window_start), and RETURNING hands back the count this request made. With a bearer to
# check, the counter's key is chosen in the same statement (SQLite needs a WHERE on an
# upsert's SELECT to parse it).
_COUNT_SQL = (
    f'INSERT INTO {RateWindow._meta.db_table} ("key", window_start, "count") '
    "SELECT {key}, %s, 1 WHERE 1 = 1 "
    f'ON CONFLICT ("key", window_start) DO UPDATE SET "count" = '
    f'{RateWindow._meta.db_table}."count" + 1 '
    'RETURNING "count"'
)
_COUNT_KEY_SQL = _COUNT_SQL.format(key="%s")
_COUNT_BEARER_SQL = _COUNT_SQL.format(
    key=f"CASE WHEN {live_token_exists_sql()} THEN %s ELSE %s END"
)
# Fixed windows need only the current one: every earlier row of every caller is dead.
_PURGE_SQL = f"DELETE FROM {RateWindow._meta.db_table} WHERE window_start < %s"


def _write() -> AbstractContextManager[object]:
    # On SQLite a transaction queues on the writer lock file like every other writer
    # (aimemory_site.backends.sqlite3) instead of polling in SQLite's busy handler. On
    # PostgreSQL the statement commits by itself; BEGIN and COMMIT would only add round
    # trips to every request.
    return transaction.atomic() if connection.vendor == "sqlite" else nullcontext()


def rate_limit_refusal(
    limit: RateLimit, caller: RateCaller, *, now: float | None = None
) -> RateLimited | None:
    """Count one request of ``caller`` at ``now`` (default: the clock); the refusal to
    answer when it is over the limit, else None.

    Refused requests count too (the count only decides, it is not a quota to hand back).
    The first request of a window deletes every earlier window, so the table holds about
    one row per caller active in the current window. Raises DatabaseError when the
    database is unavailable; nothing is counted then.
    """
    if now is None:
        now = time.time()
    window_start = int(now // limit.period_s) * limit.period_s
    with _write(), connection.cursor() as cursor:
        if caller.token_hash is None:
            cursor.execute(_COUNT_KEY_SQL, [caller.key, window_start])
        else:
            token_key = f"t:{caller.token_hash}"
            cursor.execute(
                _COUNT_BEARER_SQL, [caller.token_hash, token_key, caller.key, window_start]
            )
        row = cursor.fetchone()
        assert row is not None  # RETURNING of an upsert always yields its row
        count: int = row[0]
        if count == 1:
            cursor.execute(_PURGE_SQL, [window_start])
    if count <= limit.requests:
        return None
    retry_after_s = max(1, math.ceil(window_start + limit.period_s - now))
    return RateLimited(
        f"rate limit exceeded: at most {limit.requests} requests per {limit.period_name}; "
        f"retry in {retry_after_s} s",
        retry_after_s=retry_after_s,
    )
