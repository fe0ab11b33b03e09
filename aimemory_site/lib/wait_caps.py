"""How many calls are parked, per host and per caller, and the caps on them
(docs/serving.md#caps); and which process of the host wakes a claimer for a publication
(docs/serving.md#one-wake-per-message).

A parked call costs the host a connection and some memory, so ``AI_MEMORY_MAX_WAITS``
bounds the host and ``AI_MEMORY_MAX_WAITS_PER_CALLER`` each caller: a call that would pass
either is refused before it parks (``TooManyWaits``), and nothing else is refused for it.
The host cap is exact across the processes of the host: the counts live in memory shared
by every process forked after ``WaitCounts`` was made (``ai-memory serve`` makes it in
gunicorn's master), guarded by a POSIX record lock on a file only they hold, which the
kernel releases if a holder dies. Without a serving master (tests, a debugger) the counts
are made on first use and are the process's own.

The counts are kept in two open-addressing tables in that memory, keyed by a 64-bit
digest: callers (how many waits each holds) and places (how many waits hold a place
that only one may hold, e.g. one session's wait: a newer wait of the same session takes
its older one's place, and counts once while both are there). Removal shifts entries
back, so the tables need no tombstones and never fill with the dead.

The same memory holds the host's claimer wakes: a publication reaches every process with
a call parked on its topic, and one message can be claimed once, so the first process
to ask wakes its claimer and the others do not (``claimer_wake_take``).

This module imports no Django: gunicorn's master imports it before any worker patches
the standard library.
"""

from __future__ import annotations

import fcntl
import hashlib
import mmap
import os
import struct
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: The defaults of ``AI_MEMORY_MAX_WAITS`` and ``AI_MEMORY_MAX_WAITS_PER_CALLER``.
MAX_WAITS_DEFAULT = 10_000
MAX_WAITS_PER_CALLER_DEFAULT = 200
#: What a refused caller is told to wait before it tries again (``Retry-After``).
RETRY_AFTER_SECONDS = 5

_ENTRY = struct.Struct("<QI4x")  # key digest (0: empty), count
_HEADER = struct.Struct("<I")  # waits parked on the host
#: Slots of the claimer wakes (``WaitCounts.claimer_wake_take``), a topic's by its digest.
#: Two topics that share a slot cost at most a wake too many, never a wake too few.
CLAIMER_WAKE_SLOTS = 4096
_MARK = struct.Struct("<Q")  # the (topic, publication) whose claimer was woken last


class CapReached(Exception):
    """A wait would pass a cap; ``which`` is ``"host"`` or ``"caller"``."""

    def __init__(self, which: str) -> None:
        super().__init__(which)
        self.which = which


def limits_from_environment(environ: dict[str, str] | os._Environ[str]) -> tuple[int, int]:
    """``AI_MEMORY_MAX_WAITS`` and ``AI_MEMORY_MAX_WAITS_PER_CALLER`` (whole numbers >= 0;
    0 refuses every wait). Raises ``ValueError`` with a message naming a bad one."""
    host = _whole(environ, "AI_MEMORY_MAX_WAITS", MAX_WAITS_DEFAULT)
    caller = _whole(environ, "AI_MEMORY_MAX_WAITS_PER_CALLER", MAX_WAITS_PER_CALLER_DEFAULT)
    return host, caller


def _whole(environ: dict[str, str] | os._Environ[str], name: str, default: int) -> int:
    raw = environ.get(name, "").strip().replace("_", "").replace(",", "")
    if not raw:
        return default
    if not raw.isdigit():
        raise ValueError(f"{name} must be a whole number of calls, got {raw[:40]!r}")
    return int(raw)


def _digest(text: str) -> int:
    key = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
    return key or 1  # 0 marks an empty entry


class _Table:
    """An open-addressing table of (digest, count) entries at ``offset`` in ``memory``."""

    def __init__(self, memory: mmap.mmap, offset: int, size: int) -> None:
        self.memory = memory
        self.offset = offset
        self.size = size

    def _at(self, index: int) -> tuple[int, int]:
        key, count = _ENTRY.unpack_from(self.memory, self.offset + index * _ENTRY.size)
        return key, count

    def _put(self, index: int, key: int, count: int) -> None:
        _ENTRY.pack_into(self.memory, self.offset + index * _ENTRY.size, key, count)

    def _find(self, key: int) -> tuple[int, int]:
        """The index of ``key``'s entry, or of the empty one where it would go; its count."""
        index = key % self.size
        while True:
            found, count = self._at(index)
            if found == key or found == 0:
                return index, (count if found == key else 0)
            index = (index + 1) % self.size

    def count(self, key: int) -> int:
        return self._find(key)[1]

    def add(self, key: int, delta: int) -> int:
        """Add ``delta`` to ``key``'s count and return the new count; an entry whose
        count reaches 0 is removed."""
        index, count = self._find(key)
        count += delta
        if count > 0:
            self._put(index, key, count)
            return count
        self._remove(index)
        return 0

    def _remove(self, index: int) -> None:
        # Backward-shift deletion: later entries of the same run move into the hole, so a
        # look-up never meets a hole before the entry it seeks.
        self._put(index, 0, 0)
        hole = index
        probe = (index + 1) % self.size
        while True:
            key, count = self._at(probe)
            if key == 0:
                return
            home = key % self.size
            # The entry may move to the hole unless its home lies after the hole, within
            # the run up to where it sits now.
            if (probe - home) % self.size >= (probe - hole) % self.size:
                self._put(hole, key, count)
                self._put(probe, 0, 0)
                hole = probe
            probe = (probe + 1) % self.size


class WaitCounts:
    """The parked calls of a host, counted against its two caps."""

    def __init__(self, host_limit: int, caller_limit: int) -> None:
        self.host_limit = host_limit
        self.caller_limit = caller_limit
        # Each table is at most half full: every entry holds a parked call.
        entries = 2 * max(host_limit, 1) + 1
        self._marks_at = _HEADER.size + 2 * entries * _ENTRY.size
        size = self._marks_at + CLAIMER_WAKE_SLOTS * _MARK.size
        self._memory = mmap.mmap(-1, size, flags=mmap.MAP_SHARED)
        self._callers = _Table(self._memory, _HEADER.size, entries)
        self._places = _Table(self._memory, _HEADER.size + entries * _ENTRY.size, entries)
        # An unlinked file: only this process and its children hold it.
        self._lock_file = tempfile.TemporaryFile()  # noqa: SIM115  # held for the counts' life
        self._thread_lock = threading.Lock()
        self._pid = os.getpid()

    def _renew_thread_lock(self) -> None:
        # A child forked while a thread of the parent held the lock must not inherit it.
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self._thread_lock = threading.Lock()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._renew_thread_lock()
        with self._thread_lock:
            fcntl.lockf(self._lock_file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.lockf(self._lock_file, fcntl.LOCK_UN)

    def parked(self) -> int:
        """Waits held on the host now."""
        with self._locked():
            return int(_HEADER.unpack_from(self._memory, 0)[0])

    def held_by(self, caller: str) -> int:
        with self._locked():
            return self._callers.count(_digest(caller))

    def take(self, caller: str, place: str | None = None) -> None:
        """Count one more wait of ``caller``, or raise ``CapReached`` and count nothing.
        A wait with a ``place`` that a wait holds already takes its place: it counts
        against no cap."""
        with self._locked():
            if place is not None and self._places.add(_digest(place), 1) > 1:
                return
            host = int(_HEADER.unpack_from(self._memory, 0)[0])
            who = _digest(caller)
            which = None
            if host >= self.host_limit:
                which = "host"
            elif self._callers.count(who) >= self.caller_limit:
                which = "caller"
            if which is not None:
                if place is not None:
                    self._places.add(_digest(place), -1)
                raise CapReached(which)
            _HEADER.pack_into(self._memory, 0, host + 1)
            self._callers.add(who, 1)

    def give_back(self, caller: str, place: str | None = None) -> None:
        """Count a wait of ``take`` no more."""
        with self._locked():
            if place is not None and self._places.add(_digest(place), -1) > 0:
                return
            host = int(_HEADER.unpack_from(self._memory, 0)[0])
            _HEADER.pack_into(self._memory, 0, max(0, host - 1))
            self._callers.add(_digest(caller), -1)

    def claimer_wake_take(self, topic: str, publication: int) -> bool:
        """Whether this process wakes a claimer of ``topic`` for ``publication`` (a number
        the publisher drew for it, the same in every process that receives it): True
        for the first process of the host that asks, False for every later one.

        Ask only with a claimer at hand to wake: a process that takes the wake and wakes
        no one loses it for the host. Each slot remembers the last (topic, publication)
        taken, so a later process asking for that one is refused; two topics sharing a
        slot can only make a later process find another pair there and wake its claimer
        as well."""
        key = _digest(topic)
        mark = (key + publication) % (1 << 64) or 1
        at = self._marks_at + (key % CLAIMER_WAKE_SLOTS) * _MARK.size
        with self._locked():
            if _MARK.unpack_from(self._memory, at)[0] == mark:
                return False
            _MARK.pack_into(self._memory, at, mark)
            return True


_counts: WaitCounts | None = None
_counts_lock = threading.Lock()


def counts_make(host_limit: int, caller_limit: int) -> WaitCounts:
    """Make the host's counts, before the serving processes are forked."""
    global _counts
    _counts = WaitCounts(host_limit, caller_limit)
    return _counts


def counts() -> WaitCounts:
    """The host's counts: those made by ``counts_make``, else this process's own, with the
    limits of its environment."""
    global _counts
    if _counts is None:
        with _counts_lock:
            if _counts is None:
                _counts = WaitCounts(*limits_from_environment(os.environ))
    return _counts
