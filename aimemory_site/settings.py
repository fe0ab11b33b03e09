"""One environment-driven settings module (docs/reference.md#environment-variables).

Every variable is optional: with none set, the server runs anonymously on SQLite under
``./var``. Settings are read here only; app code reads ``django.conf.settings``.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from aimemory_site.lib.binding import is_loopback
from aimemory_site.lib.durations import duration_seconds, expiry_in_range, expiry_range_text
from aimemory_site.lib.environment import declared
from aimemory_site.lib.limits import HANDOFF_TTL_DAYS_DEFAULT
from aimemory_site.lib.origin import allowed_origins_parse
from aimemory_site.lib.server_location import (
    SECRET_KEY_FILE_NAME,
    data_dir,
    database_url,
    is_sqlite,
)
from aimemory_site.lib.wait_caps import limits_from_environment

# Lets admin classes be written ModelAdmin[Model] for mypy at runtime too.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
# Templates and static files sit at the top of a checkout; the wheel carries them inside
# the package (pyproject.toml maps them there), so an installed server finds them too.
_PACKAGE_DIR = Path(__file__).resolve().parent


def _shipped_dir(name: str) -> Path:
    packaged = _PACKAGE_DIR / name
    return packaged if packaged.is_dir() else BASE_DIR / name


TEMPLATES_DIR = _shipped_dir("templates")
STATIC_SOURCE_DIR = _shipped_dir("static")


def env_bool(name: str, default: bool = False) -> bool:
    """Read a boolean variable strictly: anything but a known spelling is an error."""
    raw = os.environ.get(declared(name), "").strip().lower()
    if raw == "":
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(declared(name), "").strip() or default


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(declared(name), "").strip()
    if raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number, got {raw!r}") from None


# Made when something is first kept there (the generated key below, or by `ai-memory
# serve` and `ai-memory manage migrate`), not on every import: `ai-memory manage` run in
# the wrong directory refuses without leaving an empty `var/` behind.
DATA_DIR = data_dir()


def _secret_key() -> str:
    """Use SECRET_KEY if given, else a generated key kept in the data dir across restarts."""
    given = env_str("SECRET_KEY")
    if given:
        return given
    key_file = DATA_DIR / SECRET_KEY_FILE_NAME
    try:
        return key_file.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(50)
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        # O_EXCL: when several processes start at once, the first writer wins and the
        # others read its key.
        try:
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return key_file.read_text().strip()
        with os.fdopen(fd, "w") as f:
            f.write(key)
        return key


SECRET_KEY = _secret_key()
DEBUG = env_bool("DEBUG")
# ai-memory's own settings (docs/reference.md#environment-variables).
AI_MEMORY_BIND = env_str("AI_MEMORY_BIND", "127.0.0.1:8000")


# On a loopback bind only loopback names are served, so a page on a rebound DNS name
# cannot reach a local server from a browser; a public bind serves any host by default.
_DEFAULT_HOSTS = "localhost,127.0.0.1,[::1]" if is_loopback(AI_MEMORY_BIND) else "*"
ALLOWED_HOSTS = [
    h.strip() for h in env_str("ALLOWED_HOSTS", _DEFAULT_HOSTS).split(",") if h.strip()
]

# Browser origins besides the server's own (its scheme and validated Host) that may call
# /api/, /mcp and /handoff: a web UI of the operator's on another port or host.
AI_MEMORY_ALLOWED_ORIGINS = allowed_origins_parse(env_str("AI_MEMORY_ALLOWED_ORIGINS"))

AI_MEMORY_ROOT_TOKEN = env_str("AI_MEMORY_ROOT_TOKEN")
AI_MEMORY_ROOT_USERNAME = env_str("AI_MEMORY_ROOT_USERNAME")
AI_MEMORY_ALLOW_ANONYMOUS = env_bool("AI_MEMORY_ALLOW_ANONYMOUS")
AI_MEMORY_DEFAULT_WORKSPACE = env_str("AI_MEMORY_DEFAULT_WORKSPACE", "default")
AI_MEMORY_DEFAULT_PROJECT = env_str("AI_MEMORY_DEFAULT_PROJECT", "default")
AI_MEMORY_CONFIG = env_str("AI_MEMORY_CONFIG")
AI_MEMORY_ADMISSION_WEBHOOKS_JSON = env_str("AI_MEMORY_ADMISSION_WEBHOOKS_JSON")
# How long a handoff waits for the next session of its project (docs/reference.md#the-on-start-block).
AI_MEMORY_HANDOFF_TTL_DAYS = env_int("AI_MEMORY_HANDOFF_TTL_DAYS", HANDOFF_TTL_DAYS_DEFAULT)


def _message_ttl() -> int | None:
    """``AI_MEMORY_MESSAGE_TTL`` in seconds, or None (never expire); a value the send
    would refuse as ``expires_in_seconds`` stops the server instead."""
    raw = env_str("AI_MEMORY_MESSAGE_TTL")
    if raw == "":
        return None
    try:
        seconds = duration_seconds(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"AI_MEMORY_MESSAGE_TTL: {exc}") from None
    if not expiry_in_range(seconds):
        raise ImproperlyConfigured(
            f"AI_MEMORY_MESSAGE_TTL must be {expiry_range_text()}, got {raw!r}"
        )
    return seconds


# The expiry of a send that names none (docs/reference.md#messages); None: never.
AI_MEMORY_MESSAGE_TTL = _message_ttl()
# Days finished messages and handoffs are kept; None: forever (docs/reference.md#messages).
AI_MEMORY_RETENTION_DAYS: int | None = (
    env_int("AI_MEMORY_RETENTION_DAYS", 0) if env_str("AI_MEMORY_RETENTION_DAYS") else None
)
if AI_MEMORY_RETENTION_DAYS is not None and AI_MEMORY_RETENTION_DAYS < 0:
    raise ImproperlyConfigured(
        f"AI_MEMORY_RETENTION_DAYS must be 0 or more days, got {AI_MEMORY_RETENTION_DAYS}"
    )
# On an anonymous server the decision answer page is read-only unless this is set
# (docs/reference.md#operator-decisions); a requires_root question is never answerable anonymously.
AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS = env_bool("AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS")
# The address people reach this server at (https://memory.example.com): answer links and
# the answer page's URL in notifications need it (docs/reference.md#decisions-reach-the-person).
AI_MEMORY_PUBLIC_URL = env_str("AI_MEMORY_PUBLIC_URL").rstrip("/")
# Server-wide notification targets, Apprise URLs (docs/reference.md#notifications).
AI_MEMORY_NOTIFY_URLS = env_str("AI_MEMORY_NOTIFY_URLS")
# Seconds between two wakes of one wake webhook (docs/reference.md#wake-webhooks).
AI_MEMORY_WAKE_DEBOUNCE = env_int("AI_MEMORY_WAKE_DEBOUNCE", 60)
if AI_MEMORY_WAKE_DEBOUNCE < 1:
    raise ImproperlyConfigured(
        f"AI_MEMORY_WAKE_DEBOUNCE must be at least 1 second, got {AI_MEMORY_WAKE_DEBOUNCE}"
    )
# Loopback http:// wake webhook URLs, for tests and a receiver on the same host.
AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS = env_bool("AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS")
# "N/minute" per token (per address when anonymous); unset = off (docs/reference.md#limits-and-faults).
AI_MEMORY_RATE_LIMIT = env_str("AI_MEMORY_RATE_LIMIT")
# Seconds a served connection may go without a byte of its request arriving (or of its
# answer leaving) before it is closed: a stalled client holds a worker for at most this.
AI_MEMORY_CLIENT_TIMEOUT = env_int("AI_MEMORY_CLIENT_TIMEOUT", 10)
if AI_MEMORY_CLIENT_TIMEOUT < 1:
    raise ImproperlyConfigured(
        f"AI_MEMORY_CLIENT_TIMEOUT must be at least 1 second, got {AI_MEMORY_CLIENT_TIMEOUT}"
    )

# Calls parked waiting (wait_seconds), per host and per caller (docs/serving.md#caps);
# read where they are counted (lib.wait_caps), checked here so a bad value stops the start.
try:
    AI_MEMORY_MAX_WAITS, AI_MEMORY_MAX_WAITS_PER_CALLER = limits_from_environment(os.environ)
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None

# Bodies over 1 MiB are refused with 413 before any parsing (see middleware).
AI_MEMORY_MAX_REQUEST_BYTES = 1024 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = AI_MEMORY_MAX_REQUEST_BYTES

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # Login throttling for the web and admin sign-in forms (docs/reference.md#limits-and-faults).
    "axes",
    # Only for its bundled Swagger UI: /api/v1/docs then needs no CDN.
    "ninja",
    "projects",
    "messaging",
    "webui",
    # Background work (docs/operating.md#background-work): the Tasks API and its database
    # queue, which `ai-memory serve` works through in a process of its own. After
    # messaging, whose db_worker command takes the place of the backend's.
    "django_tasks",
    "django_tasks_db",
]

# One queue in the database; a task runs after the commit that enqueued it.
TASKS = {
    "default": {
        "BACKEND": "django_tasks_db.DatabaseBackend",
        "QUEUES": ["default"],
    }
}

MIDDLEWARE = [
    # First: every database wait of the request, in every middleware and view, shares one
    # time budget, so a stalled database answers 503 in time (aimemory_site.db_deadline).
    "aimemory_site.db_deadline.DatabaseDeadlineMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Every error of /api/, /mcp, /handoff and /healthz as JSON, database outages as 503.
    "aimemory_site.middleware.MachineErrorMiddleware",
    # Before whitenoise, so static files (SVGs included) carry the policy too.
    "webui.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "aimemory_site.middleware.RequestSizeLimitMiddleware",
    # Origin, media type and text checks of every request, before any view parses it.
    "aimemory_site.middleware.RequestGuardMiddleware",
    # A machine route's request waits for its database connection before its view: a
    # burst waits in line rather than starting all at once.
    "aimemory_site.middleware.DatabaseTurnMiddleware",
    # AI_MEMORY_RATE_LIMIT: after the size limit and the request guard, so a request they
    # refuse is not counted; before sessions, auth and every view, so a refused request
    # costs one statement and changes nothing; inside MachineErrorMiddleware, whose JSON
    # answers it needs nothing from (its 429 is JSON already).
    "aimemory_site.rate_limit_middleware.RateLimitMiddleware",
    # Inside MachineErrorMiddleware, whose 503 answers a database error of its question.
    "aimemory_site.middleware.UnconfirmedCallerMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as axes requires: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "aimemory_site.urls"
WSGI_APPLICATION = "aimemory_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [TEMPLATES_DIR],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database() -> dict[str, Any]:
    # Persistent connections: opening one (and, on SQLite, its PRAGMAs) per request
    # costs more than most requests themselves.
    db: dict[str, Any] = dict(dj_database_url.parse(database_url(), conn_max_age=60))
    if is_sqlite(db):
        # Django's backend, with writers queued on a lock file (see the module).
        db["ENGINE"] = "aimemory_site.backends.sqlite3"
        db["OPTIONS"] = {
            # BEGIN IMMEDIATE takes the write lock up front, so a read-then-write
            # transaction (the inbox bound, the claim) queues on the busy timeout
            # instead of failing with "database is locked" on the lock upgrade.
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
        # A file, not Django's in-memory default: live-server tests need every
        # request thread on its own connection to exercise real concurrency.
        db["TEST"] = {"NAME": str(DATA_DIR / "test-ai-memory.sqlite3")}
    elif db["ENGINE"] == "django.db.backends.postgresql":
        # Django's backend, whose waits on the server end with the request's budget
        # (aimemory_site.db_deadline): a stalled server gets a 503, not a hang.
        db["ENGINE"] = "aimemory_site.backends.postgresql"
        # Outside a request too, a connect to a server that does not answer gives up
        # after 3 s (a request connects within what is left of its budget).
        db.setdefault("OPTIONS", {}).setdefault("connect_timeout", 3)
        # Client-side binding, Django's default, pinned: a send's inbox lock and insert
        # travel as one query string of two statements, which only the simple query
        # protocol carries (messaging.statements.Send).
        db["OPTIONS"]["server_side_binding"] = False
    db["CONN_HEALTH_CHECKS"] = True
    return db


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

AUTHENTICATION_BACKENDS = [
    # First: a locked-out username and address is refused before any password is checked.
    # Bearer tokens never pass through authenticate(), so agents are not throttled here.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Five wrong passwords for one username from one address lock that pair out for 15
# minutes. The pair, not the address alone, so that users behind one NAT or proxy do not
# lock each other out (axes reads REMOTE_ADDR: behind a proxy every client shares its
# address, and the lock is then in effect per username).
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
# A successful sign-in forgets earlier typos, so they do not add up over a day.
AXES_RESET_ON_SUCCESS = True
# Our own page (docs/reference.md#limits-and-faults), answered with axes' default status 429.
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Not its "AXES: BEGIN ..." line at every start of every process and command.
AXES_VERBOSE = False

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [STATIC_SOURCE_DIR]
STATIC_ROOT = DATA_DIR / "static"
if DATA_DIR.is_dir():  # whitenoise expects it before the first collectstatic
    STATIC_ROOT.mkdir(exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/web/"
LOGOUT_REDIRECT_URL = "/web/"

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Messages live in the session (the database), not in a signed cookie: the admin shows a
# newly issued token key as a message, and a cookie would carry the key to the browser's
# cookie store and to every request until it is read.
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

# Transport security (docs/reference.md#limits-and-faults). A loopback bind is plain local http, where
# Secure cookies would never be sent back; a public bind is meant to sit behind a
# TLS-terminating proxy, so it gets everything `check --deploy` asks for. Each setting can
# be overridden by the environment variable of Django's own name, e.g. SESSION_COOKIE_SECURE=1
# and CSRF_COOKIE_SECURE=1 for a loopback bind behind a local TLS proxy, or
# SECURE_SSL_REDIRECT=0 for a public bind that is served without TLS.
_PUBLIC_BIND = not is_loopback(AI_MEMORY_BIND)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", _PUBLIC_BIND)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", _PUBLIC_BIND)
# The proxy says which scheme the client used. Without this, a request that arrived over
# TLS looks like http: the SSL redirect would loop and CSRF would refuse the https Origin.
# A client reaching the server directly could claim https with the header; it gains
# nothing but skipping its own redirect.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", _PUBLIC_BIND)
# Only pages for people are redirected: load balancers probe health over plain http, and
# an agent's client must get its answer, not a redirect (urllib turns a redirected POST
# into a GET and drops the body). Machine callers authenticate with bearers, not cookies.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^api/", r"^mcp/?$", r"^handoff$", r"^\.well-known/"]
# HSTS is sent only on https responses, so it does nothing on a plain-http install.
# includeSubDomains: hosts under the server's name get no plain-http door either.
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600 if _PUBLIC_BIND else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", _PUBLIC_BIND)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SILENCED_SYSTEM_CHECKS = [
    # HSTS preload (W021): entering the browsers' preload list is a decision for whoever
    # owns the whole domain, it covers every subdomain and takes months to undo; an app
    # cannot make it for them. SECURE_HSTS_PRELOAD=1 opts in.
    "security.W021",
]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("AI_MEMORY_LOG_LEVEL", "INFO")},
}
