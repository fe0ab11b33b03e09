"""The gunicorn worker ``ai-memory serve`` runs: gthread, plus a way to close a connection
and a time limit on a stalled client.

gunicorn decides keep-alive itself and drops a ``Connection`` header set by the
application (it is hop-by-hop), so a WSGI application cannot say "this connection ends
here". The 413 of ``RequestSizeLimitMiddleware`` needs to when it could not drain the
rest of an oversized body: announcing keep-alive and then closing is what made clients'
next pooled request fail (issue 15).

So every request's environ carries a callable under ``CLOSE_CONNECTION``. Called before
the response starts, it makes gunicorn send ``Connection: close`` and, once the response
is written, close the connection gracefully (FIN first, then a short linger that reads
what the client still sends). Under any other server the key is absent and the
application's answer is unchanged.

gthread reads a request and writes its answer on a blocking socket with no time limit,
so a client that stops halfway through its request (a suspended process, a laptop that
lost its network, or one that means to) holds a worker thread for good; on SQLite a
worker has one thread, and a handful of such clients stopped every worker (tests/
test_slow_clients.py). Every socket operation on a served connection now ends after
``AI_MEMORY_CLIENT_TIMEOUT`` seconds without progress, and the connection is closed;
and a new connection that has sent nothing yet waits in the poller, not in a thread.

Every worker process polls the one listening socket, and whichever wakes first takes a
new connection; a client keeps its connection, so its requests stay with that worker.
Eight clients came to rest on four single-threaded workers as 7 + 1 or 4 + 2 + 2, and the
requests of a worker holding more connections wait behind each other while another
worker idles. A worker that already holds connections now leaves a new one to the others
for a moment per connection it holds (``ACCEPT_DEFER_PER_CONNECTION_SECONDS``), so the
one holding fewest takes it: the p99 of sends and pops at 8 clients fell by a sixth
(docs/hot-path.md).

A request waits for a free thread after it arrives, and in a database stall every thread
is held for the request's whole database budget: counted from the thread, the requests
queued behind a full pool waited a budget, then had one of their own. Every request's
environ now carries, under ``ARRIVED_AT``, when this worker had it (its connection
accepted, or readable again), and in a stall the budget counts from then
(``aimemory_site.db_deadline``).

A call that waits (a pop or a status with ``wait_seconds``, a session wait) parks for up
to a minute (docs/reference.md#waiting-and-waking), and 500 of them must not stop the
others. ``--threads`` is therefore the number of requests a process *runs* at once: each
request takes one of that many slots to run the application, and a parked call gives its
slot back while it parks (``lib.wakeups.parking_hooks``) and takes one again to look. The
thread pool has ``PARKING_THREADS`` more threads than slots, for parked calls and for
requests still arriving: a request that has not arrived whole has its head and body (up
to the 1 MiB limit) read before it takes a slot, so clients that trickle their requests
in hold a thread each but no slot, and a SQLite worker's one slot keeps serving. A
request that has arrived whole (nearly all of them) is handed to a thread only once a
slot is free for it, and keeps the slot until its answer is written, as plain gthread
does (``_Slots``): a thread started for a request that must wait still takes the GIL
from the one running, and on SQLite that one may hold the database's write lock, which
cost sends and pops a tenth of their rate at 8 clients
(docs/hot-path.md#serving-parked-calls). A parked call's connection does not
count against the worker in the accept balance below. Every request's environ carries,
under ``lib.wakeups.CLIENT_GONE``, a callable that peeks at its socket, so that a parked
call whose client has gone claims nothing; one thread per process watches the sockets of
the parked calls and wakes a call whose client hangs up (``_ClientWatcher``), so no parked
call wakes just to ask. On SIGTERM every parked call answers at once as if its time
were up (``wakeups.wake_shutdown``), then the worker exits as gthread does. Each worker
installs the cross-process wake transport (``lib.wake_transport``) for its database when
it loads the application.

gunicorn answers a request it cannot parse (a request line over its limit: 414; a header
it cannot read: 400) itself, before the application sees it, with a page of HTML. On the
machine routes every error is JSON, so there this worker gives the same status with the
JSON body Django's answers have (a JSON-RPC error on ``/mcp``); elsewhere gunicorn's page
stays. When not even the path can be read, the answer is JSON: a program sent it.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import logging
import os
import re
import select
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterable
from concurrent import futures
from time import monotonic
from typing import Any
from urllib.parse import unquote

from django.conf import settings
from django.db import connections
from gunicorn import util
from gunicorn.http.body import MAX_READ_STEP
from gunicorn.http.errors import ParseException
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser
from gunicorn.workers import gthread
from gunicorn.workers.gthread import ThreadWorker as GthreadWorker

from aimemory_site.db_deadline import ARRIVED_AT
from aimemory_site.errors_views import MACHINE_PREFIXES, machine_error_body
from aimemory_site.lib import wakeups
from aimemory_site.lib.db_spares import connections_let_go, spares_count
from aimemory_site.lib.errors import AppError, Code
from aimemory_site.lib.wake_transport import transport_install

#: WSGI environ key of the zero-argument callable that closes the connection after this
#: response (a server-specific extension, named like ``gunicorn.socket``).
CLOSE_CONNECTION = "aimemory.close_connection"

logger = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


# gunicorn ships no type information, so its worker class is Any to mypy.
class ThreadWorker(GthreadWorker):  # type: ignore[misc]
    """gunicorn's gthread worker, offering the application ``CLOSE_CONNECTION`` and
    ``CLIENT_GONE``, with a time limit on stalled clients and ``--threads`` slots to run
    requests in, which parked calls give back."""

    wsgi: WsgiApp  # set by gunicorn's load_wsgi
    # While in the future, this worker leaves new connections to the other workers.
    _accept_deferred_until = 0.0
    # When accepting resumed after a deferral: the connection it waited out, if no other
    # worker took it meanwhile, is this worker's to take now.
    _accept_resumed_at = float("-inf")
    # When the worker last told the master it is alive (``notify``).
    _beat_at = float("-inf")

    def init_process(self) -> None:
        # Before gthread's, which makes the thread pool, and loads the application.
        self._slots = _Slots(self.cfg.threads, self._dispatch)
        self._parked = 0  # connections whose call is parked now
        self._parked_lock = threading.Lock()
        super().init_process()

    def get_thread_pool(self) -> _ThreadPool:
        return _ThreadPool(self.cfg.threads + PARKING_THREADS, warm=_holds_a_connection)

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = offering_close(
            stamping_arrival(self._running_in_a_slot(offering_client_gone(self.wsgi)))
        )
        self.client_timeout = float(settings.AI_MEMORY_CLIENT_TIMEOUT)
        self.max_body_bytes = int(settings.AI_MEMORY_MAX_REQUEST_BYTES)
        self.log.error_log.addFilter(_StalledClientRecord(settings.AI_MEMORY_CLIENT_TIMEOUT))
        transport_install()

    def _running_in_a_slot(self, application: WsgiApp) -> WsgiApp:
        """Wrap ``application`` so it runs in one of the process's ``--threads`` slots,
        which a parked call gives back while it parks. The answer is written after the
        slot is freed (a Django response is complete when the application returns)."""
        slots = self._slots

        holders: set[int] = set()  # threads that keep their database connection
        holders_lock = threading.Lock()
        keep: int = self.cfg.threads + CONNECTION_KEEPERS_BEYOND_SLOTS

        def room(spares: int) -> bool:
            # The connections kept, by threads and as spares, stay within ``keep``.
            with holders_lock:
                return len(holders) + spares < keep

        def release() -> None:
            # A parked call holds no connection: its thread's go to the spares, for the
            # next thread that needs one (lib.db_spares), or are closed.
            with holders_lock:
                holders.discard(threading.get_ident())
            connections_let_go(room)
            with self._parked_lock:
                self._parked += 1
            slots.release()

        def reacquire() -> None:
            with self._parked_lock:
                self._parked -= 1
            slots.acquire()

        def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            held = getattr(_serving, "in_slot", False)  # taken by ``handle`` already
            if not held:
                slots.acquire()
            try:
                with wakeups.parking_hooks(release, reacquire):
                    return application(environ, start_response)
            finally:
                _connections_kept_or_let_go(holders, holders_lock, keep, room)
                if not held:
                    slots.release()

        return wsgi

    def handle_exit(self, sig: int, frame: Any) -> None:
        """SIGTERM: stop as gthread does, and first answer every parked call as if its
        time were up, so none holds the stop up (docs/reference.md#waiting-and-waking)."""
        wakeups.wake_shutdown()
        super().handle_exit(sig, frame)

    def handle_quit(self, sig: int, frame: Any) -> None:
        # SIGINT, SIGQUIT: the process exits now, and Python's exit joins the pool's
        # threads, which must not be parked for another minute.
        wakeups.wake_shutdown()
        super().handle_quit(sig, frame)

    def notify(self) -> None:
        # gthread beats at every turn of its main loop, several turns a request, and each
        # beat is a utime() of the heartbeat file: 50 µs of the floor's 650 at one
        # client (docs/hot-path.md#levers-kept). The master only checks that the last
        # beat is younger than --timeout (30 s), so one a second says as much.
        now = monotonic()
        if now - self._beat_at >= min(HEARTBEAT_EVERY_SECONDS, self.timeout / 2):
            self._beat_at = now
            super().notify()

    def run(self) -> None:
        try:
            super().run()
        finally:
            # However the worker stops (its parent gone, a restart), no call stays parked.
            wakeups.wake_shutdown()

    def accept(self, listener: Any) -> None:
        """Take a new connection, or first leave it to a worker that holds fewer.

        Called by the poller when the listening socket is readable, in every worker at
        once. A worker holding ``nr_conns`` connections stops listening for
        ``nr_conns`` times ``ACCEPT_DEFER_PER_CONNECTION_SECONDS`` (at most
        ``ACCEPT_DEFER_MAX_SECONDS``), without blocking its poller; if the connection
        is still waiting when it listens again, it takes it.
        """
        now = monotonic()
        waited_out = now - self._accept_resumed_at <= ACCEPT_RESUME_GRACE_SECONDS
        # One connection per deferral: clients connect in bursts, and the next of a
        # burst is again for the worker holding fewest.
        self._accept_resumed_at = float("-inf")
        # A parked call's connection costs the worker nothing until it wakes.
        held = self.nr_conns - self._parked
        if held > 0 and not waited_out:
            wait = min(ACCEPT_DEFER_MAX_SECONDS, held * ACCEPT_DEFER_PER_CONNECTION_SECONDS)
            self._accept_deferred_until = now + wait
            self.set_accept_enabled(False)
            return
        super().accept(listener)

    def set_accept_enabled(self, enabled: bool) -> None:
        # gthread's main loop asks for listening again at every turn while the worker has
        # room for more connections; a deferral holds it off until it ends.
        if enabled and not self._accepting and self._accept_deferred_until:
            now = monotonic()
            if now < self._accept_deferred_until:
                return
            self._accept_deferred_until = 0.0
            self._accept_resumed_at = now
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # Wake when a deferral ends, not a second later, even if nothing else happens.
        if self._accept_deferred_until:
            timeout = min(timeout, max(0.0, self._accept_deferred_until - monotonic()))
        super().wait_for_and_dispatch_events(timeout)

    def enqueue_req(self, conn: Any) -> None:
        # Every request comes through here, from the poller's thread, as soon as the
        # worker has it: a new connection, or one readable again (kept alive, deferred,
        # or holding the next request already). The wait for a thread starts now.
        conn.arrived_at = monotonic()
        # With a slot free, the thread looks at the request (``_serve``): looking here
        # would let go of the GIL, and the poller would wait to take it back from the
        # thread finishing the previous request.
        conn.holds_slot = True  # now, or once the slot it is queued for passes to it
        if not self._slots.take():
            if not request_arrived_whole(conn):
                conn.holds_slot = False
            elif not self._slots.take_or_queue(conn):
                return  # the thread that frees a slot hands it on
        self._dispatch(conn)

    def _dispatch(self, conn: Any) -> None:
        """Hand ``conn`` to a thread of the pool (with the slot that was taken or passed
        to it, if it ``holds_slot``)."""
        try:
            self.tpool.submit(self._serve, conn, self._finished_by_poller(conn))
        except RuntimeError:  # the pool is shut down: the worker is quitting
            conn.close()

    def _finished_by_poller(self, conn: Any) -> futures.Future[Any]:
        """The future of serving ``conn``'s request: once set, the poller's thread takes
        the connection back (``finish_request``), as for gthread's own futures."""
        served: futures.Future[Any] = futures.Future()
        served.add_done_callback(
            lambda done: self.method_queue.defer(self.finish_request, conn, done)
        )
        return served

    def _serve(self, conn: Any, served: futures.Future[Any]) -> None:
        """Serve ``conn``'s request in this thread, then, while it holds a slot, the
        requests queued for one: the slot and the thread pass on together, so no other
        thread has to wake and take the GIL for it."""
        while True:
            # Read first: once its future is set, the poller may queue the connection's
            # next request, which sets this anew.
            held = conn.holds_slot
            if held and not request_arrived_whole(conn):
                # Still arriving: read it without the slot, which goes to the next.
                held = conn.holds_slot = False
                self._slots.release()
            try:
                served.set_result(self.handle(conn))
            except BaseException as exc:  # gthread's futures carry it to finish_request
                served.set_exception(exc)
            if not held:
                return
            conn = self._slots.pass_on()
            if conn is None:
                return
            served = self._finished_by_poller(conn)

    def handle_request(self, req: Any, conn: Any) -> Any:
        _serving.arrived_at = conn.arrived_at
        try:
            # Read the whole request before it takes a slot: a client that trickles its
            # body in then holds a thread of the pool, not one of the slots.
            _body_read_ahead(req, conn.sock, self.max_body_bytes)
            return super().handle_request(req, conn)
        finally:
            _serving.arrived_at = None

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """Answer a request gunicorn could not parse or serve, in JSON on a machine route.

        gunicorn still chooses the status and logs the request; only the body changes.
        """
        path = _path_of(req, exc)
        if path is not None and not path.startswith(MACHINE_PREFIXES):
            super().handle_error(req, client, addr, exc)
            return
        written = _WrittenAnswer()
        super().handle_error(req, written, addr, exc)
        status_line = written.status_line()
        status = int(status_line.split(" ", 1)[0])
        body = json.dumps(machine_error_body(path or "", status, self._refusal(status)))
        head = (
            f"HTTP/1.1 {status_line}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        try:
            util.write_nonblock(client, (head + body).encode("latin-1"))
        except Exception:  # the client is gone, as gunicorn's own answer allows
            self.log.debug("Failed to send error message.")

    def _refusal(self, status: int) -> AppError | None:
        """What a status of gunicorn's own means to the client; None for the usual text
        of ``status`` (a 500 is a server error like any other)."""
        if status == 414:
            return AppError(
                "the request line (method, path and query) is longer than "
                f"{self.cfg.limit_request_line} bytes",
                code=Code.REQUEST_LINE_TOO_LONG,
            )
        if status == 431:
            return AppError(
                f"the request has more than {self.cfg.limit_request_fields} headers or one "
                f"longer than {self.cfg.limit_request_field_size} bytes",
                code=Code.HEADERS_TOO_LARGE,
            )
        return _GUNICORN_REFUSALS.get(status)

    def handle(self, conn: Any) -> Any:
        """Serve one request of ``conn`` (in a worker thread)."""
        if type(conn) is gthread.TConn:
            # gthread builds its connections itself (accept offers no hook for the
            # class); the subclass only adds the time limit to its socket.
            conn.__class__ = _TimedConnection
            conn.client_timeout = self.client_timeout
        if not conn.initialized and not conn.wait_for_data(FIRST_BYTES_WAIT_SECONDS):
            # Back to the poller, which hands it to a thread once its first bytes arrive.
            return gthread._DEFER
        if not getattr(conn, "holds_slot", False):
            # Read without a slot; the application takes one (``_running_in_a_slot``).
            return super().handle(conn)
        _serving.in_slot = True  # until ``_serve`` passes it on
        try:
            return super().handle(conn)
        finally:
            _serving.in_slot = False


class _Slots:
    """The ``--threads`` slots of a worker process, in which requests run.

    The poller hands a request to a thread with a slot it takes (``take``), or, when
    none is free and the request arrived whole, queues it (``take_or_queue``) with no
    thread yet. A thread that frees its slot serves the next queued request itself
    (``pass_on``), so no other thread has to wake. Threads that need a slot while they
    run (a request read before it had one, a parked call back to look) wait in
    ``acquire``, and go first: they hold their request already."""

    def __init__(self, count: int, dispatch: Callable[[Any], None]) -> None:
        self._free = count
        self._changed = threading.Condition()
        self._threads_waiting = 0
        self._queued: deque[Any] = deque()  # connections, with no thread yet
        self._dispatch = dispatch

    def take(self) -> bool:
        """Take a slot if one is free and no one waits for one."""
        with self._changed:
            return self._taken()

    def take_or_queue(self, conn: Any) -> bool:
        """Take a slot for ``conn`` if one is free now (True), else queue it until one
        is, when the slot's thread serves it or ``release`` hands it on (False)."""
        with self._changed:
            if self._taken():
                return True
            self._queued.append(conn)
            return False

    def _taken(self) -> bool:
        # Called with the condition's lock held.
        if self._free and not self._threads_waiting and not self._queued:
            self._free -= 1
            return True
        return False

    def acquire(self) -> None:
        with self._changed:
            self._threads_waiting += 1
            try:
                while not self._free:
                    self._changed.wait()
            finally:
                self._threads_waiting -= 1
            self._free -= 1

    def release(self) -> None:
        conn = self.pass_on()
        if conn is not None:
            self._dispatch(conn)

    def pass_on(self) -> Any:
        """Free a slot held, or pass it to the queued connection returned (then the
        caller must serve it)."""
        with self._changed:
            if self._threads_waiting or not self._queued:
                self._free += 1
                self._changed.notify()
                return None
            return self._queued.popleft()


class _ThreadPool:
    """The worker's threads, for gthread's ``tpool``: a task goes to the warm thread that
    became idle last, and a new thread starts only when none is idle (up to
    ``max_threads``; then tasks wait in turn). A thread is warm when ``warm()``, asked
    as it goes idle, says so (the worker: it keeps a database connection); a cold one
    goes below every warm one.

    ``concurrent.futures``' pool hands a task to whichever idle thread its queue wakes,
    the one idle longest: the requests of one client then ran on two threads in turn,
    each with a database connection of its own, and on SQLite each connection found its
    page cache emptied by the other's last write (a pop at one client read its pages
    from the file 42 times, not 9; docs/hot-path.md#serving-parked-calls). Nothing here
    makes a future: the worker's own carry each request's outcome (``_serve``).

    After 500 parked calls had answered, the threads idle last were theirs, which had
    let their connections go, and the threads that keep one were below them: each send
    then connected to the database and closed again, and sends ran at 0.6 of their rate
    until the server restarted. Cold threads now go to the bottom."""

    def __init__(self, max_threads: int, warm: Callable[[], bool] = lambda: True) -> None:
        self._max_threads = max_threads
        self._warm = warm
        self._lock = threading.Lock()
        self._idle: deque[_PoolThread] = deque()  # the warm one idle last on the right
        self._threads = 0
        self._waiting: deque[Callable[[], object]] = deque()  # tasks with no thread yet
        self._shut_down = False

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        task = functools.partial(fn, *args)
        with self._lock:
            if self._shut_down:
                raise RuntimeError("the worker's thread pool is shut down")
            if self._idle:
                self._idle.pop().hand(task)
                return
            if self._threads >= self._max_threads:
                self._waiting.append(task)
                return
            self._threads += 1
        # Daemon threads: gthread's stop has waited for the requests in flight (up to
        # the graceful timeout) before the process exits, and an idle thread must not
        # hold the exit up however the worker ends.
        threading.Thread(target=self._run, args=(task,), name="worker-pool", daemon=True).start()

    def shutdown(self, wait: bool = True) -> None:
        """End every idle thread now, and each busy one once its task is done and no task
        is waiting (``wait`` is gthread's argument; this never waits)."""
        with self._lock:
            self._shut_down = True
            idle, self._idle = list(self._idle), deque()
        for thread in idle:
            thread.hand(None)

    def _run(self, task: Callable[[], object] | None) -> None:
        me = _PoolThread()
        try:
            while task is not None:
                try:
                    task()
                except BaseException:  # a task's own errors are its future's: a bug
                    logger.exception("a task of the worker's thread pool failed")
                task = self._next(me)
        finally:
            with self._lock:
                self._threads -= 1

    def _next(self, me: _PoolThread) -> Callable[[], object] | None:
        """The task this thread runs next, waiting idle for one if none is queued; None
        once the pool has shut down."""
        warm = self._warm()
        with self._lock:
            if self._waiting:
                return self._waiting.popleft()
            if self._shut_down:
                return None
            if warm:
                self._idle.append(me)
            else:
                self._idle.appendleft(me)
        return me.task_wait()


class _PoolThread:
    """An idle thread of ``_ThreadPool``, which a task is handed to."""

    def __init__(self) -> None:
        self._given = threading.Lock()  # held while there is nothing to run
        self._given.acquire()
        self._task: Callable[[], object] | None = None

    def hand(self, task: Callable[[], object] | None) -> None:
        """Give the thread ``task`` (None: end)."""
        self._task = task
        self._given.release()

    def task_wait(self) -> Callable[[], object] | None:
        self._given.acquire()
        return self._task


#: How often at most a worker beats its heartbeat (``ThreadWorker.notify``) while busy.
HEARTBEAT_EVERY_SECONDS = 1.0

#: Threads of a worker's pool, beyond its slots, that keep their database connection
#: between requests: those that wait for a slot take turns with the slots' own, and a
#: reconnect per request (on SQLite with its PRAGMAs) would cost the hot path. PostgreSQL
#: then holds at most (slots + this) connections a process, 12 with the default 4 slots.
CONNECTION_KEEPERS_BEYOND_SLOTS = 8
#: Threads of a worker's pool beyond its ``--threads`` slots: for calls parked waiting
#: (docs/reference.md#waiting-and-waking) and requests still being read. A thread costs
#: its stack's touched pages (tens of KiB); gthread starts them only as they are needed.
PARKING_THREADS = 512

#: How long a thread waits for the first bytes of a new connection before handing it back
#: to the poller. gthread waits 5 s, holding the thread: a connection opened ahead of need
#: (browsers keep spare ones) then stalled a single-threaded SQLite worker for that long.
#: A client sends its request right after connecting; this covers that gap.
FIRST_BYTES_WAIT_SECONDS = 0.02

#: How much of a connection's received bytes ``request_arrived_whole`` looks at: a request
#: longer than this (a large page write) is read before it takes its slot.
ARRIVED_WHOLE_PEEK_BYTES = 64 * 1024

#: How long a worker leaves a new connection to the others, per connection it holds
#: already, and at most. A worker busy with a request has its poller wait for the GIL,
#: up to Python's switch interval (5 ms), before it can take a connection; 2 ms per
#: connection still left eight clients as 3 + 2 + 2 + 1, 5 ms as 2 + 2 + 2 + 2. A new
#: connection waits at most 20 ms, and only while every worker holds some.
ACCEPT_DEFER_PER_CONNECTION_SECONDS = 0.005
ACCEPT_DEFER_MAX_SECONDS = 0.02
#: After a deferral the worker listens again and takes a connection that is still
#: waiting: the poller reports it within this long of listening again.
ACCEPT_RESUME_GRACE_SECONDS = 0.005


class _TimedConnection(gthread.TConn):  # type: ignore[misc]  # gunicorn is untyped
    """A gthread connection whose socket operations time out.

    ``handle`` makes the socket blocking before every request and then calls ``init``,
    so the limit is set here, after gunicorn's own set-up, for every request on the
    connection. A timed-out read or write raises ``TimeoutError`` where it blocked, and
    gthread closes the connection (a read in the application's body read answers the
    request as an unreadable body first)."""

    client_timeout: float

    def init(self) -> None:
        super().init()
        self.sock.settimeout(self.client_timeout)
        if type(self.parser) is RequestParser:
            self.parser.mesg_class = _PathKeepingRequest


class _StalledClientRecord(logging.Filter):
    """gthread logs a client socket's timeout as an error of the server, with its
    traceback; a client that stopped sending is the client's doing: one line at INFO."""

    def __init__(self, timeout: int) -> None:
        super().__init__()
        self.timeout = timeout

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], TimeoutError):
            record.msg = "closed a connection that stalled for %s s (AI_MEMORY_CLIENT_TIMEOUT)"
            record.args = (self.timeout,)
            record.exc_info = record.exc_text = None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


#: The answers of gunicorn's that mean one thing whatever raised them. The others:
#: ``ThreadWorker._refusal``.
_GUNICORN_REFUSALS = {
    400: AppError(
        "the request is not valid HTTP/1.1: its request line or a header could not be parsed"
    ),
    417: AppError("the only Expect this server takes is 100-continue"),
    501: AppError("unsupported Transfer-Encoding: send the body with Content-Length or chunked"),
}

#: How much of a request's start ``_PathKeepingRequest`` keeps: enough for the path's
#: first segments, which are all that choose the kind of answer.
_START_KEPT_BYTES = 256

#: The attribute of a parse error that holds the request's path (None if unreadable).
_PATH_ATTRIBUTE = "aimemory_request_path"


class _PathKeepingRequest(Request):  # type: ignore[misc]  # gunicorn is untyped
    """gunicorn's request, which tells a parse error the request's path.

    A request that fails to parse leaves no request behind for ``handle_error``, and the
    fast parser reads the request line and the headers in one go: the path is taken
    from the first bytes read, as far as they can be read.
    """

    _start = b""

    def __init__(self, *args: Any) -> None:
        try:
            super().__init__(*args)
        except ParseException as exc:
            path = self.path if self.path is not None else _path_in(self._start)
            setattr(exc, _PATH_ATTRIBUTE, path)
            raise

    def read_into(self, unreader: Any, buf: bytearray, stop: bool = False) -> None:
        super().read_into(unreader, buf, stop)
        if self.path is None and len(self._start) < _START_KEPT_BYTES:
            self._start = bytes(buf[:_START_KEPT_BYTES])


def _path_in(start: bytes) -> str | None:
    """The path of the request line that ``start`` begins (the path may be cut short);
    None if it holds none."""
    line = start.removeprefix(b"\r\n").split(b"\r\n", 1)[0]
    target = line.partition(b" ")[2].split(b" ", 1)[0].decode("latin-1")
    if "://" in target:  # the absolute form: http://host/path
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    if not target.startswith("/"):
        return None
    return unquote(target.split("?", 1)[0].split("#", 1)[0])


def _path_of(req: Any, exc: BaseException) -> str | None:
    """The path of the request that failed with ``exc``; None if it cannot be read."""
    path = getattr(req, "path", None)
    if path is not None:
        return unquote(path)
    found: str | None = getattr(exc, _PATH_ATTRIBUTE, None)
    return found


class _WrittenAnswer:
    """Stands for the client's socket while gunicorn writes its error answer, to learn
    the status it chose."""

    def __init__(self) -> None:
        self.written = bytearray()

    def gettimeout(self) -> float:
        return 0.0  # non-blocking: gunicorn writes without changing the socket's mode

    def sendall(self, data: bytes) -> None:
        self.written += data

    def status_line(self) -> str:
        """``414 URI Too Long``: the status line of the answer, after the HTTP version."""
        first = bytes(self.written).split(b"\r\n", 1)[0].decode("latin-1")
        return first.split(" ", 1)[1]


#: The arrival time of the request the current thread serves (``ThreadWorker``).
_serving = threading.local()


def stamping_arrival(application: WsgiApp) -> WsgiApp:
    """Wrap ``application`` so its environ holds, under ``ARRIVED_AT``, the
    ``time.monotonic()`` at which the worker had the request."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        arrived_at = getattr(_serving, "arrived_at", None)
        if arrived_at is not None:
            environ[ARRIVED_AT] = arrived_at
        return application(environ, start_response)

    return wsgi


def offering_close(application: WsgiApp) -> WsgiApp:
    """Wrap ``application`` so its environ holds the response's ``force_close``.

    gunicorn hands the application its ``Response.start_response`` bound method;
    ``force_close`` on that response is what gunicorn itself calls when a worker is about
    to restart: it sets ``Connection: close`` and ends the connection after the answer.
    tests/test_request_bodies.py checks this end to end, so a gunicorn that stops
    offering it fails there rather than silently announcing keep-alive again.
    """

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
        if callable(force_close):
            environ[CLOSE_CONNECTION] = force_close
        return application(environ, start_response)

    return wsgi


def _holds_a_connection() -> bool:
    """Whether this thread keeps an open database connection."""
    return any(c.connection is not None for c in connections.all(initialized_only=True))


def _connections_kept_or_let_go(
    holders: set[int], lock: threading.Lock, keep: int, room: Callable[[int], bool]
) -> None:
    """After a request: let this thread keep its database connections (persistent, as
    ``CONN_MAX_AGE`` asks) if it is one of the ``keep`` threads that do, else let go of
    them (to the spares while there is ``room``, else closed).

    The pool has ``PARKING_THREADS`` more threads than slots, and any idle one may take
    the next request: were each to keep the connection it opened, a process would come to
    hold one per thread that ever ran a request, hundreds, past PostgreSQL's
    ``max_connections``. So at most ``keep`` connections are kept, by threads and as
    spares together."""
    ident = threading.get_ident()
    # Counted before the lock: ``room`` takes it inside the spares' own.
    spares = spares_count()
    with lock:
        if ident in holders:
            return
        if not _holds_a_connection():
            return
        if len(holders) + spares < keep:
            holders.add(ident)
            return
    connections_let_go(room)


def offering_client_gone(application: WsgiApp) -> WsgiApp:
    """Wrap ``application`` so its environ holds, under ``wakeups.CLIENT_GONE``, whether
    the request's client has closed its connection (a ``_WatchedClient``)."""

    def wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        sock = environ.get("gunicorn.socket")
        if sock is not None:
            environ[wakeups.CLIENT_GONE] = _WatchedClient(sock)
        return application(environ, start_response)

    return wsgi


class _WatchedClient:
    """``client_gone`` of one request's socket, which a parked call can also have
    watched (``wakeups.WatchableClient``): the process's ``_ClientWatcher`` wakes it when
    the client goes, so it need not wake every second to ask (500 parked calls asking
    cost PostgreSQL's sends a tenth of their rate).

    A client that hung up after sending more (a pipelined request) is not gone
    (``client_gone``) yet hangs up at every new watch; once it has, it is asked instead
    of watched, so its call does not look again and again."""

    __slots__ = ("hung_up", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.hung_up = False

    def __call__(self) -> bool:
        return client_gone(self.sock)

    def watch(self, wake: Callable[[], None]) -> Callable[[], None] | None:
        if self.hung_up:
            return None

        def hang_up() -> None:
            self.hung_up = True
            wake()

        return _ClientWatcher.of_this_process().watch(self.sock, hang_up)


class _ClientWatcher:
    """One epoll and one thread per process that call a parked call's ``wake`` when its
    client hangs up or the connection breaks (``EPOLLRDHUP``, ``EPOLLHUP``,
    ``EPOLLERR``). Edge-triggered: a client that sent more before it hung up (a
    pipelined request, so not gone, ``client_gone``) wakes its call once, not in a loop.
    The thread sleeps in the kernel until a client goes: watching costs nothing."""

    _current: _ClientWatcher | None = None
    _current_lock = threading.Lock()

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._epoll = select.epoll()
        self._lock = threading.Lock()
        self._wakes: dict[int, Callable[[], None]] = {}
        threading.Thread(target=self._run, name="client-watcher", daemon=True).start()

    @classmethod
    def of_this_process(cls) -> _ClientWatcher:
        """The watcher of this process, started on first use (a fork inherits no thread)."""
        with cls._current_lock:
            if cls._current is None or cls._current.pid != os.getpid():
                cls._current = cls()
            return cls._current

    def watch(self, sock: socket.socket, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` (from the watcher's thread) once the peer of ``sock`` goes,
        or at once if it has already gone; returns the function that stops watching,
        which must be called before the socket is closed."""
        fd = sock.fileno()
        with self._lock:
            self._wakes[fd] = wake
            # Registering reports a hang-up that came before it, too.
            try:
                self._epoll.register(fd, select.EPOLLRDHUP | select.EPOLLET)
            except FileExistsError:  # a call before left it watched: take it over
                self._epoll.modify(fd, select.EPOLLRDHUP | select.EPOLLET)

        def unwatch() -> None:
            with self._lock:
                if self._wakes.pop(fd, None) is not None:
                    with contextlib.suppress(OSError):
                        self._epoll.unregister(fd)

        return unwatch

    def _run(self) -> None:
        while True:
            events = self._epoll.poll()
            with self._lock:
                wakes = [self._wakes.get(fd) for fd, _ in events]
            for wake in wakes:
                if wake is not None:
                    wake()


def client_gone(sock: socket.socket) -> bool:
    """Whether the peer of ``sock`` has closed the connection (or it broke), without
    reading anything: a pending end of stream is readable and peeks as empty. A client
    that has sent more (its next request) is still there."""
    poller = select.poll()
    try:
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        # Readable, so the socket's own timeout never makes this wait.
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*([0-9]{1,10})[ \t]*\r", re.IGNORECASE)


_PEEK = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)  # an enum's ``|`` costs a microsecond


def request_arrived_whole(conn: Any) -> bool:
    """Whether ``conn``'s next request has arrived whole: its head and a body of the
    length it states are in the socket's receive buffer, looked at without reading it.

    False whenever that is not certain: a request longer than
    ``ARRIVED_WHOLE_PEEK_BYTES``, a chunked body, one waiting for ``100 Continue``, or
    bytes the parser already holds from an earlier read (a pipelined request)."""
    parser = getattr(conn, "parser", None)
    held = getattr(getattr(parser, "unreader", None), "buf", None)
    if held is not None and held.getbuffer().nbytes:
        return False
    try:
        data: bytes = conn.sock.recv(ARRIVED_WHOLE_PEEK_BYTES, _PEEK)
    except (OSError, ValueError):  # nothing there yet, or a socket that cannot peek
        return False
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return False
    head = data[: end + 2]
    if b"transfer-encoding" in head.lower():
        return False
    found = _CONTENT_LENGTH.search(head)
    length = int(found.group(1)) if found else 0
    return len(data) - (end + 4) >= length


class _Unreadable:
    """A body reader that raises what the read ahead met, where the application reads."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def read(self, size: int) -> bytes:
        raise self.exc


def _body_read_ahead(req: Any, sock: Any, limit: int) -> None:
    """Read ``req``'s body, up to ``limit`` + 1 bytes, into its buffer now.

    The application then reads it from memory, exactly as it would have from the socket:
    what a body over the limit still holds stays on the socket for its 413, and an error
    met here (a stall past ``AI_MEMORY_CLIENT_TIMEOUT``, a cut body, a bad chunk) is
    raised where the application reads past what arrived, so it answers as before."""
    body = getattr(req, "body", None)
    if body is None or not hasattr(body, "reader"):
        return
    if getattr(req, "_expected_100_continue", False):
        # What gunicorn would send as it builds the environ: the client waits for it.
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        req._expected_100_continue = False
    ahead = io.BytesIO()
    ahead.write(body.buf.getvalue())
    try:
        while ahead.tell() <= limit:
            data = body.reader.read(min(MAX_READ_STEP, limit + 1 - ahead.tell()))
            if not data:
                break
            ahead.write(data)
    except Exception as exc:
        body.failed = True  # the connection's state is unknown: gunicorn closes it
        body.reader = _Unreadable(exc)
    body.buf = ahead
