"""One environment-driven settings module (DESIGN.md section 3).

Every variable is optional: with none set, the server runs anonymously on SQLite under
``./var``. Settings are read here only; app code reads ``django.conf.settings``.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
import django_stubs_ext
from django.core.exceptions import ImproperlyConfigured

from aimemory_site.lib.binding import is_loopback

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
    raw = os.environ.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, "").strip() or default


DATA_DIR = Path(env_str("AI_MEMORY_DATA_DIR", "./var")).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """Use SECRET_KEY if given, else a generated key kept in the data dir across restarts."""
    given = env_str("SECRET_KEY")
    if given:
        return given
    key_file = DATA_DIR / "secret_key"
    try:
        return key_file.read_text().strip()
    except FileNotFoundError:
        key = secrets.token_urlsafe(50)
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
# ai-memory's own settings (DESIGN.md section 3).
AI_MEMORY_BIND = env_str("AI_MEMORY_BIND", "127.0.0.1:8000")


# On a loopback bind only loopback names are served, so a page on a rebound DNS name
# cannot reach a local server from a browser; a public bind serves any host by default.
_DEFAULT_HOSTS = "localhost,127.0.0.1,[::1]" if is_loopback(AI_MEMORY_BIND) else "*"
ALLOWED_HOSTS = [
    h.strip() for h in env_str("ALLOWED_HOSTS", _DEFAULT_HOSTS).split(",") if h.strip()
]

AI_MEMORY_ROOT_TOKEN = env_str("AI_MEMORY_ROOT_TOKEN")
AI_MEMORY_ROOT_USERNAME = env_str("AI_MEMORY_ROOT_USERNAME")
AI_MEMORY_ALLOW_ANONYMOUS = env_bool("AI_MEMORY_ALLOW_ANONYMOUS")
AI_MEMORY_DEFAULT_WORKSPACE = env_str("AI_MEMORY_DEFAULT_WORKSPACE", "default")
AI_MEMORY_DEFAULT_PROJECT = env_str("AI_MEMORY_DEFAULT_PROJECT", "default")
AI_MEMORY_CONFIG = env_str("AI_MEMORY_CONFIG")
AI_MEMORY_ADMISSION_WEBHOOKS_JSON = env_str("AI_MEMORY_ADMISSION_WEBHOOKS_JSON")

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
    # Only for its bundled Swagger UI: /api/v1/docs then needs no CDN.
    "ninja",
    "projects",
    "messaging",
    "webui",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "aimemory_site.middleware.RequestSizeLimitMiddleware",
    # Origin, media type and text checks of every request, before any view parses it.
    "aimemory_site.middleware.RequestGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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
    url = env_str("DATABASE_URL", f"sqlite:///{DATA_DIR / 'ai-memory.sqlite3'}")
    # Persistent connections: opening one (and, on SQLite, its PRAGMAs) per request
    # costs more than most requests themselves.
    db: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60))
    if db["ENGINE"] == "django.db.backends.sqlite3":
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
    db["CONN_HEALTH_CHECKS"] = True
    return db


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [STATIC_SOURCE_DIR]
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise expects it before the first collectstatic
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

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("AI_MEMORY_LOG_LEVEL", "INFO")},
}
