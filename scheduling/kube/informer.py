"""A process-local, watch-driven cache of one kind's objects (an "informer", as client-go has one).

An :class:`Informer` lists the kind once, then a daemon thread watches it from the list's resourceVersion
and applies every event to its objects. A consumer asks for what changed since it last asked
(:meth:`Informer.drain`) instead of listing everything again; the first drain, and the first after a
relist, say ``relisted``: the consumer then rebuilds from :meth:`Informer.snapshot`.

The thread never dies of an API failure:

- a stream the server ends (its ``timeoutSeconds``, a dropped connection) is watched again from the last
  resourceVersion seen; BOOKMARK events move that resourceVersion on without an object;
- a resourceVersion the server no longer holds (410 Gone, reason Expired, as an ERROR event or as the
  answer to the watch request) is answered by a relist: every object replaced, the consumer told;
- other failures are logged and retried after a pause that doubles from 0.5 s up to 10 s.

Objects are the decoded JSON dicts of the events, shared with consumers and never changed in place:
treat them as read-only. One consumer drains an informer (a second would take the first's changes).

:func:`informer_for` keeps one started informer per (API server, kind) in the process. A forked child
(Celery's prefork pool) inherits the registry but none of its threads: the registry notices the new
process id and starts afresh there, without touching the parent's streams (their sockets are shared).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduling.kube.calls import JSON, Kube, KubeError, TransientKubeError, WatchStream

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, name); ("", name) for cluster-scoped kinds such as Node
Listener = Callable[[JSON | None, JSON | None], None]  # (the object before an event, after it; None: absent)

BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 10.0
WATCH_TIMEOUT_S = 300  # the server ends each watch after this long; it is then resumed at once


@dataclass(frozen=True)
class Changes:
    """What changed since the previous drain. ``changed`` holds each key's latest state (None: deleted).
    With ``relisted``, the informer's objects were replaced wholesale (its first list, or a relist after
    410 Gone): rebuild from :meth:`Informer.snapshot` rather than applying ``changed``."""

    relisted: bool
    changed: dict[Key, JSON | None] = field(default_factory=dict)


class _Expired(Exception):
    """The watch's resourceVersion is older than the server's history: list again."""


def key_of(obj: JSON) -> Key:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class Informer:
    """The current objects of one kind, kept up to date by a watch; see the module docstring."""

    def __init__(self, kube: Kube, kind: str, *, watch_timeout_s: int = WATCH_TIMEOUT_S) -> None:
        self.kube = kube
        self.kind = kind
        self.watch_timeout_s = watch_timeout_s
        self.relists = 0  # lists after the first one
        self.watches = 0  # watch streams opened
        self._lock = threading.Lock()
        self._objects: dict[Key, JSON] = {}
        self._changed: dict[Key, JSON | None] = {}
        self._relisted = False
        self._resource_version = ""
        self._listed = False  # whether the next step is a watch rather than a (re)list
        self._progressed = False  # whether a watch delivered an event since the last list
        self._synced = threading.Event()
        self._stopping = threading.Event()
        self._stream: WatchStream | None = None  # the open stream, for stop() to close
        self._thread: threading.Thread | None = None
        self._listeners: list[Listener] = []

    # -- for consumers ------------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        with self._lock:
            return self._resource_version

    @property
    def started(self) -> bool:
        return self._thread is not None

    @property
    def synced(self) -> bool:
        """Whether the first list has been applied."""
        return self._synced.is_set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def wait_synced(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the first list; whether it came."""
        return self._synced.wait(timeout)

    def snapshot(self) -> dict[Key, JSON]:
        """The current objects by key (a new dict; the objects themselves are shared, read-only)."""
        with self._lock:
            return dict(self._objects)

    def listen(self, listener: Listener) -> None:
        """Call ``listener(before, after)`` on the watch's thread after each event that adds, changes or
        deletes an object (not for a relist's objects): for a consumer that must react at once rather than
        at its next drain. It must be quick and must not raise (it would cost the watch a relist)."""
        self._listeners.append(listener)

    def drain(self) -> Changes:
        """What changed since the previous drain (see :class:`Changes`), and start collecting afresh."""
        with self._lock:
            changes = Changes(self._relisted, self._changed)
            self._relisted, self._changed = False, {}
        return changes

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> Informer:
        if self._thread is not None:
            raise RuntimeError(f"the {self.kind} informer was started already")
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.kind}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the thread: close its stream (a list under way ends within the request timeout), join it."""
        self._stopping.set()
        with self._lock:
            stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("the %s informer's thread did not stop within %.0f s", self.kind, timeout)

    # -- the thread ---------------------------------------------------------------------------------

    def _run(self) -> None:
        delay = BACKOFF_MIN_S
        while not self._stopping.is_set():
            try:
                progressed = self._step()
            except _Expired:
                log.info("the %s watch expired at resourceVersion %s; listing again", self.kind, self.resource_version)
                self._listed = False
                # At once, unless no watch got anywhere since the last list: no tight list-410 loop.
                progressed = self._progressed
            except Exception as exc:
                if self._stopping.is_set():
                    break
                # KubeError: the API's failure; anything else is a bug, logged in full, never fatal.
                log.warning(
                    "the %s informer failed (retrying in %.1f s): %s",
                    self.kind,
                    delay,
                    exc,
                    exc_info=not isinstance(exc, KubeError),
                )
                progressed = False
            if progressed:
                delay = BACKOFF_MIN_S
            else:
                self._stopping.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)

    def _step(self) -> bool:
        """List if it must, else watch until the stream ends; whether either got anywhere."""
        if not self._listed:
            self._relist()
            return True
        return self._watch()

    def _relist(self) -> None:
        objects, resource_version = self.kube.list_with_version(self.kind, None)
        with self._lock:
            self._objects = {key_of(obj): obj for obj in objects}
            self._changed = {}
            self._relisted = True
            self._resource_version = resource_version
            if self._synced.is_set():
                self.relists += 1
        self._listed = True
        self._progressed = False
        self._synced.set()

    def _watch(self) -> bool:
        try:
            stream = self.kube.watch(self.kind, self.resource_version, timeout_seconds=self.watch_timeout_s)
        except KubeError as exc:
            if exc.status == 410:
                raise _Expired from exc
            raise
        with self._lock:
            if self._stopping.is_set():
                stream.close()
                return False
            self._stream = stream
            self.watches += 1
        progressed = False
        try:
            for event in stream:
                self._apply(event)
                progressed = self._progressed = True
        finally:
            with self._lock:
                if self._stream is stream:
                    self._stream = None
            stream.close()
        return progressed

    def _apply(self, event: JSON) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code, reason = obj.get("code"), str(obj.get("reason") or "")
            if code == 410 or reason in ("Expired", "Gone"):
                raise _Expired
            raise TransientKubeError(str(obj.get("message") or obj), status=code, reason=reason)
        resource_version = str(obj.get("metadata", {}).get("resourceVersion") or "")
        before: JSON | None = None
        after: JSON | None = None
        with self._lock:
            if kind in ("ADDED", "MODIFIED"):
                key = key_of(obj)
                before = self._objects.get(key)
                self._objects[key] = self._changed[key] = after = obj
            elif kind == "DELETED":
                key = key_of(obj)
                before = self._objects.pop(key, None)
                self._changed[key] = None
            elif kind != "BOOKMARK":
                log.warning("the %s watch sent an event of unknown type %r", self.kind, kind)
                return
            if resource_version:
                self._resource_version = resource_version
        if kind != "BOOKMARK":
            for listener in self._listeners:
                listener(before, after)


# -- one informer per (API server, kind) in this process ---------------------------------------------------

_informers: dict[tuple[str, str], Informer] = {}
_informers_pid = os.getpid()
_informers_lock = threading.Lock()


def informer_for(kube: Kube, kind: str) -> Informer:
    """This process's started informer of ``kind`` on ``kube``'s cluster (one is started on first use;
    call :meth:`Informer.wait_synced` before relying on it). In a forked child, a fresh one."""
    global _informers_pid
    key = (str(kube.api_client.configuration.host), kind)
    with _informers_lock:
        if os.getpid() != _informers_pid:
            # A fork: the parent's informers have no thread here, and their sockets are the parent's.
            _informers.clear()
            _informers_pid = os.getpid()
        informer = _informers.get(key)
        if informer is None or not informer.alive:
            informer = _informers[key] = Informer(kube, kind).start()
        return informer


def stop_all() -> None:
    """Stop every informer this process started (tests, shutdown)."""
    with _informers_lock:
        informers = list(_informers.values()) if os.getpid() == _informers_pid else []
        _informers.clear()
    for informer in informers:
        informer.stop()
