"""Blocking calls that must not stop a whole gevent worker (docs/serving.md#the-worker).

Under ``ai-memory serve`` a process runs its requests as greenlets on one thread: a call
that blocks that thread in C (an ``fsync``, a blocking ``flock``) stops every request of
the process until it returns. Such a call runs in gevent's thread pool instead, where a
real thread blocks and the greenlet that asked waits for it like for any I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gevent import get_hub, monkey

T = TypeVar("T")


def off_the_loop(call: Callable[..., T], *args: object) -> T:
    """``call(*args)`` in gevent's thread pool where the process runs gevent's patched
    threading (the server's worker), inline anywhere else (tests' threads, commands).
    ``call`` must not touch greenlet-only state (gevent's locks, Django's connections)."""
    if monkey.is_module_patched("threading"):
        result: T = get_hub().threadpool.apply(call, args)
        return result
    return call(*args)
