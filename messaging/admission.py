"""Admission webhooks for messaging: deciding before, observing after (docs/operating.md#admission-webhooks).

Which hooks exist is ``messaging.admission_config``'s business. Deciders are called in
config order before the operation, and the first that answers non-2xx, times out or
cannot be reached refuses it (``AdmissionRefused``), so nothing is written. Observers are
posted after the commit, only when the operation happened, from a daemon thread, so they
never delay the response; at most ``MAX_ASYNC_ADMISSION_IN_FLIGHT`` deliveries run at once
and the rest are dropped and logged. Observer failures are logged and otherwise ignored:
this is a best-effort signal, not a durable queue.

The JSON body names the op, the scope (the recipient's for a send, the caller's own
project for pop and cancel) and the actor, never a message body, subject or id.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Final

from django.db import transaction

from aimemory_site.lib.errors import Code, Forbidden
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.webhook_post import webhook_post
from messaging.admission_config import (
    MESSAGE_CANCEL,
    MESSAGE_POP,
    MESSAGE_SEND,
    AdmissionWebhook,
    admission_webhooks_configured,
)
from projects.models import AgentSession, Project
from projects.services import session_agent

logger = logging.getLogger(__name__)

# The verb each op's refusal text uses: "message <verb> refused by admission: <reason>".
_VERBS: Final[dict[str, str]] = {MESSAGE_SEND: "send", MESSAGE_POP: "pop", MESSAGE_CANCEL: "cancel"}

MAX_ASYNC_ADMISSION_IN_FLIGHT = 256

# Observer deliveries running now (each holds one slot until its POST ends). Module state
# because the bound is per process, across requests.
_in_flight = threading.BoundedSemaphore(MAX_ASYNC_ADMISSION_IN_FLIGHT)


class AdmissionRefused(Forbidden):
    code = Code.ADMISSION_REFUSED


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
                "agent": session_agent(session),
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


def _post(hook: AdmissionWebhook, op: str, body: bytes) -> str | None:
    """POST ``body`` to ``hook``; None for a 2xx answer, else what went wrong, in words
    (``webhook_post``: no redirect followed, the answer's size and time bounded)."""
    return webhook_post(
        hook.url,
        body,
        headers={"Content-Type": "application/json", "X-Memory-Op": op},
        timeout=hook.timeout_ms / 1000,
        timed_out=f"timed out after {hook.timeout_ms} ms",
    )
