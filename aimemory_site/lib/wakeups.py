"""Wake-ups: how a parked call learns that a commit concerns it
(docs/serving.md#the-loop; docs/reference.md#waiting-and-waking).

A call that waits (a pop, a status or a session wait with ``wait_seconds``) takes a place
under the caps (``lib.wait_caps``), subscribes to *topics* before it looks, so nothing
committed between its look and its park is missed, then parks until a topic it holds is
published, its time is up, its client goes or the process shuts down. A write publishes
its topics once its transaction has committed. A wake says only "look again", never what
changed: the look decides, and before every look after a park the caller's right to look
is decided again (``recheck``), so a revoked token or a removed grant ends the wait with
the answer a new call would get.

Most waiters of a topic are all woken by a publication (status and session waits). A
*claimer* (a pop) is not: a publication of an inbox wakes one claimer parked on it in
the host, the one parked longest in the first process that takes the wake
(``lib.wait_caps``), since one message can be claimed once. A claimer woken that does
not look (its client went, its time ran out, its right to look was lost) hands the wake
to the next one of its process, or, with none there, to the other processes.

This module is the registry of one process. ``wake_publish`` hands a publication to the
process's transport as well (``transport_set``), which carries it to the other processes
of the host and to other hosts; what they receive they hand to ``wake_deliver``. Under
``ai-memory serve`` every parked call is a greenlet of the gevent worker, and the
``threading`` primitives here are gevent's (docs/serving.md).

Topics are strings made by the functions below, so a publisher and a waiter cannot spell
one differently.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from time import monotonic
from typing import Protocol, TypeVar, runtime_checkable

from aimemory_site.lib import wait_caps
from aimemory_site.lib.db_spares import connections_let_go
from aimemory_site.lib.errors import BadRequest, Code, TooManyWaits
from aimemory_site.lib.limits import WAIT_SECONDS_MAX, wait_seconds_clamp, whole_number

T = TypeVar("T")

# A parked call whose client cannot be watched wakes this often to ask whether its
# client is still there.
CLIENT_CHECK_SECONDS = 1.0

#: WSGI environ key of the zero-argument callable that says whether the request's client
#: has gone (closed its connection). Set by ``ai-memory serve`` (``aimemory_site.serving``),
#: where it is a ``WatchableClient``; absent under other servers, where a parked call
#: cannot tell and waits its time.
CLIENT_GONE = "aimemory.client_gone"


@runtime_checkable
class WatchableClient(Protocol):
    """A ``client_gone`` that can also be watched: ``watch(wake)`` has ``wake()`` called
    (from another thread) once the client goes, and returns the function that stops
    watching, or None when this client cannot be watched now. A call parked with a
    watch sleeps until a wake or its time; otherwise its ``client_gone`` is asked every
    ``CLIENT_CHECK_SECONDS``."""

    def __call__(self) -> bool: ...

    def watch(self, wake: Callable[[], object]) -> Callable[[], object] | None: ...


def wait_seconds_parse(value: object) -> int:
    """A call's ``wait_seconds``: an integer, clamped to 0..``WAIT_SECONDS_MAX``; absent
    is 0 (answer at once). Anything else is 400 ``invalid_wait_seconds``."""
    if value is None:
        return 0
    seconds = whole_number(value)
    if seconds is None:
        raise BadRequest(
            f"wait_seconds must be an integer number of seconds (0-{WAIT_SECONDS_MAX}), "
            f"got {str(value)[:60]!r}",
            code=Code.INVALID_WAIT_SECONDS,
        )
    return wait_seconds_clamp(seconds)


def inbox_topic(project_id: object) -> str:
    """Published when a message may have become claimable in a project's inbox."""
    return f"inbox:{project_id}"


def message_topic(message_id: object) -> str:
    """Published when a message leaves ``pending`` (claimed or cancelled)."""
    return f"message:{message_id}"


def message_topic_sql(message_id_sql: str) -> str:
    """``message_topic`` in PostgreSQL's SQL, of a uuid expression (whose text is the
    UUID's, as Python writes it)."""
    return f"'message:' || ({message_id_sql})::text"


def session_topic(session_id: str) -> str:
    """Published when a newer session wait supersedes a parked one of the same session."""
    return f"session:{session_id}"


class Waiter:
    """One parked call's subscription: the topics it holds, whether it is a claimer, and
    the event that wakes it."""

    __slots__ = ("_event", "claimer", "owed", "topics")

    def __init__(self, topics: frozenset[str], claimer: bool = False) -> None:
        self.topics = topics
        self.claimer = claimer
        # A claimer's wakes by publications whose look has not begun: each is handed to
        # the next claimer if it never looks. A wake by its client's leaving or by the
        # end of its time is no publication's, and is not handed on.
        self.owed = 0
        self._event = threading.Event()

    def wake(self) -> bool:
        """Wake it; False if a wake was pending already."""
        if self._event.is_set():
            return False
        self._event.set()
        return True

    @property
    def woken(self) -> bool:
        """Whether a wake is pending (not yet taken by ``wait``)."""
        return self._event.is_set()

    def wait(self, timeout: float) -> bool:
        """Park for at most ``timeout`` seconds; True when woken (or shutting down).

        The wake is taken, so the next wait parks again until the next one."""
        woken = self._event.wait(max(0.0, timeout))
        self._event.clear()
        return woken


class _Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Per topic, its waiters in the order they subscribed (a dict keeps it).
        self._by_topic: dict[str, dict[Waiter, None]] = {}
        self.shutting_down = False

    def add(self, waiter: Waiter) -> None:
        with self._lock:
            for topic in waiter.topics:
                self._by_topic.setdefault(topic, {})[waiter] = None
            if self.shutting_down:
                waiter.wake()

    def remove(self, waiter: Waiter) -> bool:
        """Remove ``waiter``; False if it was not there."""
        found = False
        with self._lock:
            for topic in waiter.topics:
                waiters = self._by_topic.get(topic)
                if waiters is not None and waiter in waiters:
                    found = True
                    del waiters[waiter]
                    if not waiters:
                        del self._by_topic[topic]
        return found

    def deliver(
        self,
        topics: Iterable[str],
        *,
        claimers_only: bool = False,
        publication: int | None = None,
    ) -> int:
        """Wake every waiter of ``topics`` but claimers (none with ``claimers_only``),
        and per topic the claimer that has waited longest of those with no wake
        pending, if this process takes the ``publication``'s claimer wake of the host
        (``wait_caps``; always without one); returns how many were woken."""
        woken = 0
        with self._lock:
            for topic in topics:
                claimer_asked = False
                for waiter in self._by_topic.get(topic, ()):
                    if not waiter.claimer:
                        woken += 0 if claimers_only else waiter.wake()
                    elif not claimer_asked and not waiter.woken:
                        claimer_asked = True
                        if publication is None or wait_caps.counts().claimer_wake_take(
                            topic, publication
                        ):
                            waiter.owed += 1
                            woken += waiter.wake()
        return woken

    def looked(self, waiter: Waiter, spent: int) -> None:
        """``waiter``'s look has spent ``spent`` of the publication wakes it held when the
        look began (``HeldWait.look``); those that came during the look it still owes."""
        with self._lock:
            waiter.owed -= spent

    def wake_all(self) -> int:
        with self._lock:
            everyone = {w for waiters in self._by_topic.values() for w in waiters}
        for waiter in everyone:
            waiter.wake()
        return len(everyone)

    def shut_down(self) -> None:
        with self._lock:
            self.shutting_down = True
            everyone = {w for waiters in self._by_topic.values() for w in waiters}
        for waiter in everyone:
            waiter.wake()

    def parked_count(self) -> int:
        with self._lock:
            return len({w for waiters in self._by_topic.values() for w in waiters})


_registry = _Registry()
_transport: Callable[[frozenset[str], int | None], None] | None = None
_listen: Callable[[frozenset[str]], None] | None = None
_unlisten: Callable[[frozenset[str]], None] | None = None
_unheard_sql: Callable[[str], str] | None = None


def transport_set(
    send: Callable[[frozenset[str], int | None], None] | None,
    *,
    listen: Callable[[frozenset[str]], None] | None = None,
    unlisten: Callable[[frozenset[str]], None] | None = None,
    unheard_sql: Callable[[str], str] | None = None,
) -> None:
    """Install the function that carries a publication (its topics, and the number
    ``publication_draw`` drew for it, or None) to the other processes and hosts, which
    hand both to ``wake_deliver``; it must not block for long and must not raise.
    Without one, wakes stay in-process.

    ``listen``, when given, is called with a subscription's topics before its first look
    and returns once the transport delivers this process the publications of those topics
    committed from then on (it starts the process's receiver on first use), and
    ``unlisten`` with the same topics after that subscription has ended. ``unheard_sql``,
    when given, is ``wake_unheard_sql``'s for this transport."""
    global _transport, _listen, _unlisten, _unheard_sql
    _transport = send
    _listen = listen
    _unlisten = unlisten
    _unheard_sql = unheard_sql


def wake_unheard_sql(topic_sql: str) -> str | None:
    """An SQL condition a write may put in its own statement, true when no call of any
    process or host can be waiting on the topic that the SQL expression ``topic_sql``
    makes, or None when this process's transport cannot tell. A write whose condition
    held need not publish the topic: whatever begins to wait on it looks after the
    write's commit. One that did not hold, or has no condition, publishes as usual."""
    unheard = _unheard_sql
    return None if unheard is None else unheard(topic_sql)


def publication_draw() -> int:
    """A number for one publication, drawn anew each time, by which every process of the
    host that receives it asks for its claimer wake (``wait_caps``)."""
    return int.from_bytes(os.urandom(8), "little") >> 1 or 1


def wake_publish(topics: Iterable[str]) -> None:
    """Wake the calls parked on ``topics``, here and (through the transport) elsewhere.

    Call it after the write's commit (``transaction.on_commit``, or after the statement
    on autocommit): a call woken before the commit would look, find nothing and park
    again, and the wake would be lost."""
    published = frozenset(topics)
    if not published:
        return
    publication = publication_draw()
    # Here first: a claimer of this process takes the host's claimer wake before the
    # transport reaches the others, and the transport's echo (PostgreSQL's) finds it
    # taken.
    _registry.deliver(published, publication=publication)
    transport = _transport
    if transport is not None:
        transport(published, publication)


def wake_deliver(topics: Iterable[str], publication: int | None = None) -> int:
    """Hand a publication received from the transport to this process's parked calls;
    returns how many were woken. Without a ``publication`` number, a claimer of this
    process is woken whatever the others do."""
    return _registry.deliver(topics, publication=publication)


def wake_all() -> int:
    """Send every call parked in this process back to look (the transport may have missed
    publications, e.g. while it reconnected to the database); returns how many."""
    return _registry.wake_all()


def wake_shutdown() -> None:
    """Answer every parked call now, as if its time were up, and every later wait at once
    (the process is stopping: SIGTERM)."""
    _registry.shut_down()


def shutting_down() -> bool:
    return _registry.shutting_down


def parked_count() -> int:
    """How many calls are parked in this process now."""
    return _registry.parked_count()


@contextmanager
def wake_subscription(topics: Iterable[str], *, claimer: bool = False) -> Iterator[Waiter]:
    """Subscribed to ``topics`` while open (``HeldWait``'s subscription, alone)."""
    held = HeldWait(frozenset(topics), claimer=claimer, deadline=monotonic())
    held.subscribe()
    try:
        yield held.waiter
    finally:
        held.end()


class HeldWait:
    """One call's wait, from its place under the caps and its subscription to its end:
    what ``wait_for`` holds while the call is parked, in the request (``park``) or, under
    ``ai-memory serve``, outside it (``ServedCall``). ``end`` lets go of both, once."""

    __slots__ = ("_place", "deadline", "over", "subscribed", "waiter")

    def __init__(self, topics: frozenset[str], *, deadline: float, claimer: bool = False) -> None:
        self.waiter = Waiter(topics, claimer)
        #: When the wait's time is up (a ``monotonic()`` moment).
        self.deadline = deadline
        #: Its time is up, its client gone or the process stopping: nothing more to look for.
        self.over = False
        self.subscribed = False
        self._place: tuple[str, str | None] | None = None

    def place_take(self, caller: str, place: str | None) -> None:
        """Take one of the host's parked calls for ``caller`` (``lib.wait_caps``), or
        raise ``TooManyWaits``."""
        counts = wait_caps.counts()
        try:
            counts.take(caller, place)
        except wait_caps.CapReached as reached:
            whose = "this server" if reached.which == "host" else "this caller"
            raise TooManyWaits(
                f"too many calls with wait_seconds are parked for {whose} "
                f"({counts.host_limit if reached.which == 'host' else counts.caller_limit}); "
                "nothing was done: retry later, or call without wait_seconds",
                retry_after_s=wait_caps.RETRY_AFTER_SECONDS,
            ) from None
        self._place = (caller, place)

    def subscribe(self) -> None:
        """Receive the publications of the waiter's topics from now on: the transport's
        (``listen``) and this process's."""
        listen = _listen
        if listen is not None:
            listen(self.waiter.topics)
        _registry.add(self.waiter)
        self.subscribed = True

    def park(self, client_gone: Callable[[], bool] | None) -> bool:
        """Park until woken (True: look again), or until the time is up, the process
        shuts down or ``client_gone`` says the client has gone (False, and ``over``).
        A parked call holds no database connection, transaction or lock: let go of
        them before (``connections_let_go``)."""
        if (
            self.deadline - monotonic() > 0
            and not shutting_down()
            and _park(self.waiter, self.deadline, client_gone)
        ):
            return True
        self.over = True
        return False

    def look(self, look: Callable[[], T | None]) -> T | None:
        """``look()``, after which the wakes held when it began are spent: all of them if
        it found nothing (every message they announced was committed before the look,
        and taken already), one if it found something (its message: the others' wakes
        are handed on with the wait's end). If it raises, all are handed on."""
        owed = self.waiter.owed
        answer = look()
        if owed:
            _registry.looked(self.waiter, owed if answer is None else 1)
        return answer

    def end(self) -> None:
        """Let go of the subscription and the place (again: nothing)."""
        waiter = self.waiter
        if waiter.topics and _registry.remove(waiter):
            if waiter.claimer and waiter.owed:
                # A wake it did not look for is the next claimer's: of this process, or
                # with none here, of the host's others (which wakes their other waiters
                # of the topic too, once). One it looked for is spent, whatever the look
                # claimed: a look that found nothing found the message claimed already,
                # and handing its wake on would send every parked pop to look in turn.
                transport = _transport
                for _ in range(waiter.owed):
                    if (
                        not _registry.deliver(waiter.topics, claimers_only=True)
                        and transport is not None
                    ):
                        transport(waiter.topics, publication_draw())
            unlisten = _unlisten if _listen is not None else None
            if unlisten is not None:
                unlisten(waiter.topics)
        place, self._place = self._place, None
        if place is not None:
            wait_caps.counts().give_back(*place)


class ParkOutside(BaseException):
    """Raised by ``wait_for`` to park its call outside the request, in the server that
    offered it (``ServedCall``). Only that server catches it: a ``BaseException``, so no
    ``except Exception`` of the application takes it for an error."""


class ServedCall:
    """``CLIENT_GONE`` under ``ai-memory serve``: the request's client (``client_gone``:
    gone or not, watchable) and the server's offer to park its call outside the request.

    A call that parks there unwinds the whole request (``ParkOutside``), leaving only its
    ``held`` wait, the request itself (kept by the server) and this; at each wake, and at
    the end of its time, the server runs the request again from its start, so each look
    is a new run that decides the caller, its grant and its project again, and reaches
    ``wait_for``, which finds its wait ``held`` and looks (docs/serving.md#the-loop).
    What must happen once per call, not per run, the call keeps here (``once_per_call``).
    """

    __slots__ = ("client", "held", "kept", "runs")

    def __init__(self, client: WatchableClient) -> None:
        self.client = client
        self.held: HeldWait | None = None
        self.kept: object = None
        self.runs = 1

    def __call__(self) -> bool:
        return self.client()

    def watch(self, wake: Callable[[], object]) -> Callable[[], object] | None:
        return self.client.watch(wake)

    def park(self) -> None:
        """Park the held wait until it is woken or over; the next run looks, or ends."""
        held = self.held
        assert held is not None, "wait_for parks a call only with its wait held"
        held.park(self.client)
        self.runs += 1

    def end(self) -> None:
        """Let go of a held wait that no run took up again (a run that failed before
        its ``wait_for``: a token revoked, a grant removed)."""
        held, self.held = self.held, None
        if held is not None:
            held.end()


def once_per_call(make: Callable[[], T], client_gone: Callable[[], bool] | None) -> T:
    """``make()`` in the call's first run, and what it made in each later run of the same
    call (``ServedCall``); ``make()`` alone wherever a call runs once. For what a waiting
    call does before its wait and must not do again when its request runs again after
    a park: a session wait making itself the session's newest, say."""
    if not isinstance(client_gone, ServedCall):
        return make()
    if client_gone.runs == 1:
        client_gone.kept = make()
    return client_gone.kept  # type: ignore[return-value]  # what make() returned


def run_again(client_gone: object) -> bool:
    """Whether this is a later run of a call that parked outside its request
    (``ServedCall``): not a new call of the client's."""
    return isinstance(client_gone, ServedCall) and client_gone.runs > 1


def _park(waiter: Waiter, deadline: float, client_gone: Callable[[], bool] | None) -> bool:
    """Park ``waiter`` until it is woken (True), or ``deadline`` (a ``monotonic()``
    moment) passes, the process shuts down or ``client_gone`` says the client has gone
    (False). A ``WatchableClient`` wakes the call when its client goes (the caller then
    asks it); any other is asked every ``CLIENT_CHECK_SECONDS``."""
    unwatch = None
    try:
        if isinstance(client_gone, WatchableClient):
            unwatch = client_gone.watch(waiter.wake)
        asked = client_gone if unwatch is None else None
        while True:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return False
            step = remaining if asked is None else min(remaining, CLIENT_CHECK_SECONDS)
            if waiter.wait(step):
                return not shutting_down()
            if shutting_down() or (asked is not None and asked()):
                return False
    finally:
        if unwatch is not None:
            unwatch()


def wait_for(
    look: Callable[[], T | None],
    *,
    topics: Iterable[str],
    wait_seconds: float,
    caller: str,
    recheck: Callable[[], object] | None = None,
    claimer: bool = False,
    place: str | None = None,
    client_gone: Callable[[], bool] | None = None,
    until: float | None = None,
) -> T | None:
    """``look()`` now, and again after every wake on ``topics``, until it answers
    something other than None or ``wait_seconds`` have passed; returns its answer, or
    None at the timeout.

    The wait holds one of the host's parked calls for ``caller`` (``Principal.wait_key``)
    while it lasts, or raises ``TooManyWaits`` before the first look when a cap is
    reached (``place``: see ``lib.wait_caps.WaitCounts.take``). ``recheck``, when given,
    runs before every look after a park and before the answer at the timeout, and raises
    what a new call would get when the caller may no longer look
    (docs/serving.md#the-loop). A ``claimer`` (a pop) is woken alone among the claimers
    of a topic, and hands a wake it did not look for to the next.

    Under ``ai-memory serve`` (``client_gone`` is a ``ServedCall``) the call parks
    outside its request: this raises ``ParkOutside`` instead of parking, and the server
    runs the request again at the wake, which reaches this call again to look, or at
    the end of the wait, which returns None. Each later run has decided the caller's
    right afresh on its way here, so ``recheck`` is not needed there. Whatever the
    caller does before this call it does again in each run (``once_per_call`` for what
    must happen once).

    ``look`` runs with a fresh database connection after each park and must commit what
    it writes before it returns (it is never inside the caller's transaction: this must
    not be called inside ``transaction.atomic``). ``client_gone``, when given, is asked
    before each look after a park; once it says the client has gone, nothing more is
    looked at (a pop whose client left claims nothing). ``until`` (a ``monotonic()``
    moment) ends the wait earlier, e.g. when the awaited message expires. On shutdown the
    wait ends as if its time were up.
    """
    served = client_gone if isinstance(client_gone, ServedCall) else None
    held = served.held if served is not None else None
    if served is not None:
        served.held = None  # this run decides what becomes of it
    if held is None:
        deadline = monotonic() + max(0.0, wait_seconds)
        if until is not None:
            deadline = min(deadline, until)
        held = HeldWait(frozenset(topics), deadline=deadline, claimer=claimer)
    try:
        if not held.subscribed:  # the first look of the call
            held.place_take(caller, place)
            # Subscribing may wait for the transport (on PostgreSQL a LISTEN on the
            # process's listener): not while holding a connection others wait for.
            connections_let_go()
            held.subscribe()
            answer = look()
        elif held.over or (client_gone is not None and client_gone()):
            answer = None  # a later run at the end of the wait: it answers as it is
        else:  # a later run after a wake
            answer = held.look(look)
    except BaseException:
        held.end()
        raise
    if answer is not None or held.over or (client_gone is not None and client_gone()):
        held.end()
        return answer
    if served is not None:
        served.held = held
        raise ParkOutside
    try:
        answer = _waited(held, look, recheck, client_gone)
    finally:
        held.end()
    if answer is not None:
        return answer
    if recheck is None or (client_gone is not None and client_gone()):
        return None
    if claimer and shutting_down():
        # A pop's answer at shutdown is "nothing", which tells nothing: deciding its
        # right again would cost every parked pop a look at the database just as the
        # process must answer them all within 2 s.
        return None
    recheck()
    return None


def _waited(
    held: HeldWait,
    look: Callable[[], T | None],
    recheck: Callable[[], object] | None,
    client_gone: Callable[[], bool] | None,
) -> T | None:
    """``wait_for``'s parks and looks in the request: an answer, or None when the time is
    up, the process stops, or (then ``client_gone`` says so) the client left."""
    answer = None
    while answer is None:
        # A parked call holds no database connection, transaction or lock: what it still
        # holds goes to the spares (lib.db_spares) for the next request, and the look
        # after the wake takes a spare or connects. A caller inside a transaction (only
        # a test's, which wraps each test in one) keeps its connection.
        connections_let_go()
        # Only a publication (or its echo) sends the call back to the database.
        if not held.park(client_gone):
            break
        if client_gone is not None and client_gone():
            return None
        if recheck is not None:
            recheck()
        answer = held.look(look)
    return answer
