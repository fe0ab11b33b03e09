"""Every environment variable the project reads, in one list.

The settings' reading helpers refuse a name that is not declared here, so a variable
cannot be read without being listed; ``make docs`` writes this list into
``docs/reference.md``. The CLI reads its own variables without importing this module (a
hook starts it at every agent session, and it imports no server code), so its names are
declared here too and ``tests/test_docs.py`` checks that every name the code spells is.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reader(enum.StrEnum):
    """Which program reads a variable."""

    SERVER = "server"  # the settings: `ai-memory serve`, `ai-memory manage`, manage.py
    MANAGE = "manage"  # one management command
    CLI = "cli"  # the client commands and hooks


@dataclass(frozen=True)
class EnvironmentVariable:
    name: str
    reader: Reader
    meaning: str
    default: str


ENVIRONMENT: tuple[EnvironmentVariable, ...] = (
    EnvironmentVariable(
        "DATABASE_URL",
        Reader.SERVER,
        "the database, in dj-database-url form, e.g. `postgres://user@host:5432/aimemory`",
        "`sqlite:///$AI_MEMORY_DATA_DIR/ai-memory.sqlite3`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_DATA_DIR",
        Reader.SERVER,
        "where the SQLite file, the generated secret key and the collected static files live",
        "`./var`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_BIND",
        Reader.SERVER,
        "the address `ai-memory serve` binds (its `--bind` sets it)",
        "`127.0.0.1:8000`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_ROOT_TOKEN",
        Reader.SERVER,
        "the root bearer token; setting it turns authentication on",
        "unset: anonymous",
    ),
    EnvironmentVariable(
        "AI_MEMORY_ROOT_USERNAME",
        Reader.SERVER,
        "the name stamped as `from_owner_user` on root's messages; a user of this name "
        "counts as root for operator decisions",
        "empty",
    ),
    EnvironmentVariable(
        "AI_MEMORY_ALLOW_ANONYMOUS",
        Reader.SERVER,
        "`1` lets an anonymous server bind a non-loopback address",
        "off",
    ),
    EnvironmentVariable(
        "AI_MEMORY_DEFAULT_WORKSPACE",
        Reader.SERVER,
        "the workspace of the `default` scope, used when a call gives nothing to go on",
        "`default`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_DEFAULT_PROJECT",
        Reader.SERVER,
        "the project of the `default` scope",
        "`default`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_CONFIG",
        Reader.SERVER,
        "a TOML file: `[sanitize] extra_patterns` and `allowlist` extend the secret "
        "scrubber; `[[admission_webhooks]]` lists the admission webhooks",
        "unset",
    ),
    EnvironmentVariable(
        "AI_MEMORY_ADMISSION_WEBHOOKS_JSON",
        Reader.SERVER,
        "the admission webhooks as a JSON list, instead of the TOML table (not both)",
        "unset",
    ),
    EnvironmentVariable(
        "AI_MEMORY_HANDOFF_TTL_DAYS",
        Reader.SERVER,
        "days a handoff waits for the next session of its project",
        "`7`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_MESSAGE_TTL",
        Reader.SERVER,
        "how long a message sent without `expires_in_seconds` waits before it expires: "
        "seconds, or `90s`, `45m`, `2h`, `7d`; 1 minute to 30 days",
        "unset: messages never expire",
    ),
    EnvironmentVariable(
        "AI_MEMORY_RETENTION_DAYS",
        Reader.SERVER,
        "days after which the server deletes claimed, cancelled and expired messages and "
        "claimed and expired handoffs, in the background (`ai-memory manage purge_messages` "
        "does it at once); pending messages and pages are never deleted",
        "unset: keep everything",
    ),
    EnvironmentVariable(
        "AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS",
        Reader.SERVER,
        "`1` lets anyone answer operator decisions on the web answer page of an anonymous "
        "server (never a `requires_root` question)",
        "off: the page is read-only",
    ),
    EnvironmentVariable(
        "AI_MEMORY_PUBLIC_URL",
        Reader.SERVER,
        "the address people reach this server at (`https://memory.example.com`): answer "
        "links and the answer page's URL in notifications and in `memory_decision_answer` "
        "need it; `issue_token` names it in its MCP example",
        "unset: notifications carry no links",
    ),
    EnvironmentVariable(
        "AI_MEMORY_NOTIFY_URLS",
        Reader.SERVER,
        "server-wide notification targets: Apprise URLs (`ntfy://`, `mailto://`, "
        "`json://`, ...) separated by spaces or commas; they get every question with the "
        "answer page's URL, never answer links",
        "unset: only the users' own targets",
    ),
    EnvironmentVariable(
        "AI_MEMORY_WAKE_DEBOUNCE",
        Reader.SERVER,
        "seconds between two wakes of one wake webhook: mail arriving within them makes one "
        "wake, at their end",
        "`60`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS",
        Reader.SERVER,
        "`1` lets a wake webhook's URL be `http://` on a loopback address (`127.0.0.0/8`, "
        "`::1`, `localhost`), for tests and a receiver on the same host",
        "off: `https://` only",
    ),
    EnvironmentVariable(
        "AI_MEMORY_ALLOWED_ORIGINS",
        Reader.SERVER,
        "browser origins besides the server's own that may call `/api/`, `/mcp` and "
        "`/handoff`, comma-separated; a malformed entry stops the server",
        "none",
    ),
    EnvironmentVariable(
        "AI_MEMORY_RATE_LIMIT",
        Reader.SERVER,
        "`N/minute` (or `N/second`, `N/hour`) per bearer token that authenticates, per "
        "client address otherwise, on `/api/`, `/mcp` and `/handoff`; over it 429 "
        "`rate_limited` with `Retry-After`",
        "unset: no limit",
    ),
    EnvironmentVariable(
        "AI_MEMORY_MAX_WAITS",
        Reader.SERVER,
        "calls parked waiting (`wait_seconds`: pops, status and session waits) the host holds "
        "at once; past it a call that would wait gets 429 `too_many_waits` with `Retry-After`",
        "`10000`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_MAX_WAITS_PER_CALLER",
        Reader.SERVER,
        "parked calls one caller holds at once (a user with all their tokens, root, or on an "
        "anonymous server an address); past it 429 `too_many_waits`",
        "`200`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_CLIENT_TIMEOUT",
        Reader.SERVER,
        "seconds a connection may pause in the middle of its request (or of reading its "
        "answer) before the server closes it; a body that stops arriving gets 408 "
        "`request_timeout`",
        "`10`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_LOG_LEVEL",
        Reader.SERVER,
        "the level of the server's log on stderr",
        "`INFO`",
    ),
    EnvironmentVariable(
        "SECRET_KEY",
        Reader.SERVER,
        "Django's secret key; API token hashes and web sign-ins are keyed with it, so "
        "every host of one database needs the same",
        "generated once into the data dir",
    ),
    EnvironmentVariable("DEBUG", Reader.SERVER, "Django's debug mode", "off"),
    EnvironmentVariable(
        "ALLOWED_HOSTS",
        Reader.SERVER,
        "the host names served, comma-separated; on a loopback bind the default keeps a "
        "page on a rebound DNS name from reaching a local server",
        "the loopback names on a loopback bind, `*` otherwise",
    ),
    EnvironmentVariable(
        "SESSION_COOKIE_SECURE",
        Reader.SERVER,
        "Django's own: the session cookie only over https",
        "on for a public bind, off on loopback",
    ),
    EnvironmentVariable(
        "CSRF_COOKIE_SECURE",
        Reader.SERVER,
        "Django's own: the CSRF cookie only over https",
        "on for a public bind, off on loopback",
    ),
    EnvironmentVariable(
        "SECURE_SSL_REDIRECT",
        Reader.SERVER,
        "Django's own: redirect the web pages to https (never `/api/`, `/mcp`, `/handoff`, "
        "`/healthz`)",
        "on for a public bind, off on loopback",
    ),
    EnvironmentVariable(
        "SECURE_HSTS_SECONDS",
        Reader.SERVER,
        "Django's own: the HSTS max-age",
        "a year for a public bind, `0` on loopback",
    ),
    EnvironmentVariable(
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        Reader.SERVER,
        "Django's own: HSTS for subdomains too",
        "on for a public bind, off on loopback",
    ),
    EnvironmentVariable(
        "SECURE_HSTS_PRELOAD",
        Reader.SERVER,
        "Django's own: ask for the browsers' HSTS preload list",
        "off",
    ),
    EnvironmentVariable(
        "AI_MEMORY_USER_PASSWORD",
        Reader.MANAGE,
        "the password `ai-memory manage create_user` gives the new user",
        "unset: a password that cannot sign in",
    ),
    EnvironmentVariable(
        "AI_MEMORY_SERVER_URL",
        Reader.CLI,
        "the server's base URL (not its `/mcp` endpoint) the CLI and hooks call",
        "`http://127.0.0.1:8000`",
    ),
    EnvironmentVariable(
        "AI_MEMORY_AUTH_TOKEN",
        Reader.CLI,
        "the bearer token the CLI and hooks send",
        "none",
    ),
    EnvironmentVariable(
        "AI_MEMORY_IGNORE_MARKER",
        Reader.CLI,
        "`1` makes the CLI ignore `.ai-memory.toml` files when it finds the current project",
        "off",
    ),
    EnvironmentVariable(
        "AI_MEMORY_HOST_CWD",
        Reader.CLI,
        "the directory on the host when the CLI runs in a container: its name is the "
        "default project",
        "unset",
    ),
    EnvironmentVariable(
        "AI_MEMORY_CODEX_BIN",
        Reader.CLI,
        "the `codex` executable (a path or a command name) the waiter of "
        "`ai-memory hook wait --client codex` runs `codex queue` with",
        "`codex` on `PATH`",
    ),
    EnvironmentVariable(
        "XDG_STATE_HOME",
        Reader.CLI,
        "where the hooks remember the sessions they announced "
        "(`ai-memory/announced-sessions/` under it), the waiters of `hook wait` their pid "
        "files (`ai-memory/waiters/`), and Codex's waiters their log "
        "(`ai-memory/codex-waiter.log`)",
        "`~/.local/state`",
    ),
)

DECLARED_NAMES = frozenset(variable.name for variable in ENVIRONMENT)


def declared(name: str) -> str:
    """``name``, after checking that it is listed in ``ENVIRONMENT``.

    Raises ``LookupError`` for an undeclared name: a programming error, caught the first
    time the settings are imported.
    """
    if name not in DECLARED_NAMES:
        raise LookupError(f"{name} is not declared in aimemory_site.lib.environment")
    return name
