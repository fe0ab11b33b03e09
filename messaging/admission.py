"""Admission webhooks for messaging (DESIGN.md section 9).

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

A hook with ``blocking`` and ``failure_policy = "reject"`` *decides*: deciders are called
in config order before the operation, and the first that answers non-2xx, times out or
cannot be reached refuses it (``AdmissionRefused``), so nothing is written. Every other
hook *observes*: it is posted after the commit, only when the operation happened, from a
daemon thread, so it never delays the response; at most ``MAX_ASYNC_ADMISSION_IN_FLIGHT``
deliveries run at once and the rest are dropped and logged. Observer failures are logged
and otherwise ignored: this is a best-effort signal, not a durable queue.

The JSON body names the op, the scope (the recipient's for a send, the caller's own
project for pop and cancel) and the actor, never a message body, subject or id.
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from aimemory_site.config_file import config_document, config_where
from aimemory_site.errors import Forbidden
from projects.access import Principal
from projects.models import AgentSession, Project

logger = logging.getLogger(__name__)

MESSAGE_SEND: Final = "message_send"
MESSAGE_POP: Final = "message_pop"
MESSAGE_CANCEL: Final = "message_cancel"
OPS: Final = (MESSAGE_SEND, MESSAGE_POP, MESSAGE_CANCEL)
# The verb each op's refusal text uses: "message <verb> refused by admission: <reason>".
_VERBS: Final = {MESSAGE_SEND: "send", MESSAGE_POP: "pop", MESSAGE_CANCEL: "cancel"}

MAX_ADMISSION_WEBHOOKS = 16
MAX_ASYNC_ADMISSION_IN_FLIGHT = 256
TIMEOUT_MS_DEFAULT = 2000
TIMEOUT_MS_MIN = 1
TIMEOUT_MS_MAX = 30_000
RESPONSE_MAX_BYTES = 1024 * 1024
_READ_CHUNK_BYTES = 64 * 1024
_KEYS: Final = frozenset(("name", "url", "events", "timeout_ms", "failure_policy", "blocking"))
_FAILURE_POLICIES: Final = ("ignore", "reject")

# Observer deliveries running now (each holds one slot until its POST ends). Module state
# because the bound is per process, across requests.
_in_flight = threading.BoundedSemaphore(MAX_ASYNC_ADMISSION_IN_FLIGHT)


class AdmissionRefused(Forbidden):
    code = "admission_refused"


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


def admission_payload(
    op: str, *, principal: Principal, project: Project, session: AgentSession | None
) -> dict[str, Any]:
    """The JSON a hook receives: op, scope and actor; never a message body, subject or id.

    ``project`` must have its workspace loaded (``project_access`` does), so building the
    payload runs no query.
    """
    return {
        # The wiki-page shape of the admission protocol, empty: messages are not pages.
        "page": {"path": "", "frontmatter": {}, "body": ""},
        "ctx": {
            "workspace": project.workspace.name,
            "project": project.name,
            "actor": {
                "agent": session.agent if session is not None else "other",
                "user": principal.owner_name,
                # No OAuth subject or client identity exists on this server's callers.
                "sub": None,
                "client": None,
                "session_id": session.session_id if session is not None else None,
            },
            "op": op,
        },
    }


def admission_decide(
    op: str, *, principal: Principal, project: Project, session: AgentSession | None
) -> None:
    """Call the deciding hooks of ``op`` in config order; raise on the first refusal.

    Must not run inside ``transaction.atomic``: a hook may take up to 30 s per call and
    must not hold database locks or a transaction open meanwhile. Raises
    ``AdmissionRefused`` (403) with ``message <verb> refused by admission: <reason>``.
    Without deciding hooks for ``op`` it returns at once.
    """
    deciders = [hook for hook in admission_webhooks_configured() if _decides(hook, op)]
    if not deciders:
        return
    body = _encode(admission_payload(op, principal=principal, project=project, session=session))
    for hook in deciders:
        failure = _post(hook, op, body)
        if failure is not None:
            raise AdmissionRefused(
                f"message {_VERBS[op]} refused by admission: webhook {hook.name!r} {failure}"
            )


def admission_observe(
    op: str, *, principal: Principal, project: Project, session: AgentSession | None
) -> None:
    """Post ``op`` to its observing hooks once the current transaction commits.

    Call it inside the ``transaction.atomic`` block that performs the operation, and only
    once the operation happened: a rollback discards the delivery, so observers never
    hear of a send that was not stored. Without observing hooks it does nothing at all.
    """
    observers = [hook for hook in admission_webhooks_configured() if _observes(hook, op)]
    if not observers:
        return
    # Encoded now, while the rows are at hand: the delivery threads never touch the ORM.
    body = _encode(admission_payload(op, principal=principal, project=project, session=session))
    transaction.on_commit(lambda: _observers_start(observers, op, body), robust=True)


def _decides(hook: AdmissionWebhook, op: str) -> bool:
    return op in hook.events and hook.deciding


def _observes(hook: AdmissionWebhook, op: str) -> bool:
    return op in hook.events and not hook.deciding


def _encode(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def _observers_start(observers: list[AdmissionWebhook], op: str, body: bytes) -> None:
    # Each delivery releases the very semaphore it acquired, even if the module's is swapped.
    slots = _in_flight
    for hook in observers:
        if not slots.acquire(blocking=False):
            # Dropped, never queued: waiting for a slot would delay the response.
            logger.log(
                logging.ERROR if hook.blocking else logging.WARNING,
                "admission observer %r dropped for %s: %d deliveries already in flight",
                hook.name,
                op,
                MAX_ASYNC_ADMISSION_IN_FLIGHT,
            )
            continue
        thread = threading.Thread(
            target=_observer_deliver,
            args=(hook, op, body, slots),
            name=f"admission-observer-{hook.name}",
            # A daemon thread: a slow hook must not hold up a worker's shutdown.
            daemon=True,
        )
        try:
            thread.start()
        except RuntimeError:
            slots.release()
            logger.exception("admission observer %r dropped for %s: no thread", hook.name, op)


def _observer_deliver(
    hook: AdmissionWebhook, op: str, body: bytes, slots: threading.BoundedSemaphore
) -> None:
    try:
        failure = _post(hook, op, body)
        if failure is not None:
            logger.warning("admission observer %r for %s: %s (ignored)", hook.name, op, failure)
    finally:
        slots.release()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A 3xx is an answer like any other non-2xx; following it would re-send as GET."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def _post(hook: AdmissionWebhook, op: str, body: bytes) -> str | None:
    """POST ``body`` to ``hook``; None for a 2xx answer, else what went wrong, in words.

    The timeout bounds the connect and each read, and the whole exchange is checked
    against it too; at most ``RESPONSE_MAX_BYTES`` of the answer are read (and dropped:
    only the status decides).
    """
    request = urllib.request.Request(
        hook.url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "X-Memory-Op": op},
    )
    timeout = hook.timeout_ms / 1000
    deadline = time.monotonic() + timeout
    timed_out = f"timed out after {hook.timeout_ms} ms"
    try:
        with _opener.open(request, timeout=timeout) as response:
            status: int = response.status
            read = 0
            while read < RESPONSE_MAX_BYTES:
                if time.monotonic() > deadline:
                    return timed_out
                chunk = response.read(min(_READ_CHUNK_BYTES, RESPONSE_MAX_BYTES - read))
                if not chunk:
                    break
                read += len(chunk)
    except urllib.error.HTTPError as exc:
        exc.close()
        return f"answered HTTP {exc.code}"
    except TimeoutError:
        return timed_out
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            return timed_out
        return f"is unreachable: {exc.reason}"
    except (OSError, http.client.HTTPException) as exc:
        # A connection reset mid-answer, or a malformed status line.
        return f"is unreachable: {exc}"
    if not 200 <= status < 300:
        return f"answered HTTP {status}"
    return None
