"""Which admission webhooks the operator configured (docs/operating.md#admission-webhooks).

Operators list webhooks as ``[[admission_webhooks]]`` in the TOML file named by the
``AI_MEMORY_CONFIG`` setting, or as the same objects in a JSON list in
``AI_MEMORY_ADMISSION_WEBHOOKS_JSON``. Setting both is refused as ambiguous::

    [[admission_webhooks]]
    name = "policy"
    url = "http://127.0.0.1:9000/admit"
    events = ["message_send"]       # any of message_send, message_pop, message_cancel
    timeout_ms = 2000               # clamped to 1..30000
    failure_policy = "reject"       # "ignore" (default) or "reject"
    blocking = true                 # default

A hook with ``blocking`` and ``failure_policy = "reject"`` *decides*; every other hook
*observes*. ``messaging.admission`` delivers to them.
"""

from __future__ import annotations

import functools
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from aimemory_site.lib.config_file import config_document, config_where

MESSAGE_SEND: Final = "message_send"
MESSAGE_POP: Final = "message_pop"
MESSAGE_CANCEL: Final = "message_cancel"
OPS: Final = (MESSAGE_SEND, MESSAGE_POP, MESSAGE_CANCEL)

MAX_ADMISSION_WEBHOOKS = 16
TIMEOUT_MS_DEFAULT = 2000
TIMEOUT_MS_MIN = 1
TIMEOUT_MS_MAX = 30_000
_KEYS: Final = frozenset(("name", "url", "events", "timeout_ms", "failure_policy", "blocking"))
_FAILURE_POLICIES: Final = ("ignore", "reject")


@dataclass(frozen=True)
class AdmissionWebhook:
    name: str
    url: str
    events: frozenset[str]
    timeout_ms: int = TIMEOUT_MS_DEFAULT
    failure_policy: str = "ignore"
    blocking: bool = True

    @property
    def deciding(self) -> bool:
        return self.blocking and self.failure_policy == "reject"


def admission_webhooks_configured() -> tuple[AdmissionWebhook, ...]:
    """The webhooks of ``AI_MEMORY_CONFIG`` or ``AI_MEMORY_ADMISSION_WEBHOOKS_JSON``.

    Parsed once per (config path, JSON text) and process; a changed file needs a restart.
    Raises ``ImproperlyConfigured`` for an unreadable file, bad TOML or JSON, a bad or
    unknown key, more than ``MAX_ADMISSION_WEBHOOKS`` hooks, or both sources at once.
    """
    return _webhooks_for(settings.AI_MEMORY_CONFIG, settings.AI_MEMORY_ADMISSION_WEBHOOKS_JSON)


@functools.lru_cache(maxsize=8)
def _webhooks_for(path: str, json_text: str) -> tuple[AdmissionWebhook, ...]:
    toml_entries = _toml_entries(path) if path else None
    if json_text.strip():
        if toml_entries is not None:
            raise ImproperlyConfigured(
                f"admission webhooks are set twice: in AI_MEMORY_CONFIG ({path}) "
                "[[admission_webhooks]] and in AI_MEMORY_ADMISSION_WEBHOOKS_JSON; keep one"
            )
        where = "AI_MEMORY_ADMISSION_WEBHOOKS_JSON"
        try:
            entries: Any = json.loads(json_text)
        except json.JSONDecodeError as exc:
            raise ImproperlyConfigured(f"{where}: not valid JSON: {exc}") from exc
        if not isinstance(entries, list):
            raise ImproperlyConfigured(f"{where}: must be a JSON list of webhook objects")
        return _webhooks_parse(entries, where)
    if toml_entries is None:
        return ()
    return _webhooks_parse(toml_entries, f"{config_where(path)}: [[admission_webhooks]]")


def _toml_entries(path: str) -> list[Any] | None:
    """The ``admission_webhooks`` array of the TOML file, or None when it has none."""
    where = config_where(path)
    document = config_document(path)
    if "admission_webhooks" not in document:
        return None
    entries = document["admission_webhooks"]
    if not isinstance(entries, list):
        raise ImproperlyConfigured(
            f"{where}: admission_webhooks must be an array of tables ([[admission_webhooks]])"
        )
    return entries


def _webhooks_parse(entries: list[Any], where: str) -> tuple[AdmissionWebhook, ...]:
    if len(entries) > MAX_ADMISSION_WEBHOOKS:
        raise ImproperlyConfigured(
            f"{where}: {len(entries)} webhooks; at most {MAX_ADMISSION_WEBHOOKS} are allowed"
        )
    webhooks = tuple(_webhook_parse(entry, f"{where}[{i}]") for i, entry in enumerate(entries))
    names = [hook.name for hook in webhooks]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        # Refusal reasons and logs name the hook, so two hooks must not share a name.
        raise ImproperlyConfigured(f"{where}: duplicate webhook name(s): {', '.join(duplicates)}")
    return webhooks


def _webhook_parse(entry: Any, where: str) -> AdmissionWebhook:
    """Validate one webhook object; anything unexpected is an error, never ignored."""
    if not isinstance(entry, dict):
        raise ImproperlyConfigured(f"{where}: must be a table/object")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        # A misspelt key (say "failure-policy") would otherwise turn a gate into an observer.
        raise ImproperlyConfigured(
            f"{where}: unknown key(s): {', '.join(unknown)}; expected {', '.join(sorted(_KEYS))}"
        )
    missing = [key for key in ("name", "url", "events") if key not in entry]
    if missing:
        raise ImproperlyConfigured(f"{where}: missing required key(s): {', '.join(missing)}")

    name = entry["name"]
    if not isinstance(name, str) or not name.strip():
        raise ImproperlyConfigured(f"{where}: name must be a non-empty string")
    url = entry["url"]
    parsed = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ImproperlyConfigured(f"{where}: url must be an http:// or https:// URL")
    events = entry["events"]
    if (
        not isinstance(events, list)
        or not events
        or not all(isinstance(event, str) and event in OPS for event in events)
    ):
        raise ImproperlyConfigured(
            f"{where}: events must be a non-empty list of {', '.join(OPS)}, got {events!r}"
        )
    timeout_ms = entry.get("timeout_ms", TIMEOUT_MS_DEFAULT)
    # bool is an int subclass; "timeout_ms = true" is a mistake, not one millisecond.
    if not isinstance(timeout_ms, int) or isinstance(timeout_ms, bool):
        raise ImproperlyConfigured(f"{where}: timeout_ms must be an integer (milliseconds)")
    failure_policy = entry.get("failure_policy", "ignore")
    if failure_policy not in _FAILURE_POLICIES:
        raise ImproperlyConfigured(
            f'{where}: failure_policy must be "ignore" or "reject", got {failure_policy!r}'
        )
    blocking = entry.get("blocking", True)
    if not isinstance(blocking, bool):
        raise ImproperlyConfigured(f"{where}: blocking must be true or false")
    return AdmissionWebhook(
        name=name,
        url=url,
        events=frozenset(events),
        timeout_ms=min(max(timeout_ms, TIMEOUT_MS_MIN), TIMEOUT_MS_MAX),
        failure_policy=failure_policy,
        blocking=blocking,
    )
