"""UUID version 7 ids (RFC 9562): time-ordered, so id order follows creation order."""

from __future__ import annotations

import os
import threading
import time
import uuid

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def uuid7() -> uuid.UUID:
    """Return a new UUID v7, monotonic within this process.

    Within one millisecond the 12-bit ``rand_a`` field is a counter seeded at random, so
    two ids made in the same millisecond still sort in creation order (RFC 9562, method 1).
    """
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms = ms
            _counter = int.from_bytes(os.urandom(2), "big") & 0x07FF
        else:
            _counter += 1
            if _counter > 0x0FFF:  # counter spent: borrow the next millisecond
                _last_ms += 1
                _counter = 0
            ms = _last_ms
        counter = _counter
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand_b
    return uuid.UUID(int=value)
