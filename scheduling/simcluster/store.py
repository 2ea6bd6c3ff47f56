"""The object store: every object by resource, namespace and name, one global resourceVersion counter,
a bounded history of changes for watch resumption, and per-watch queues.

Objects are JSON dicts and are never mutated once stored: an update stores a new dict. That lets readers
hand them out without copying while holding the lock only briefly.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


@dataclass(frozen=True)
class Change:
    rv: int
    resource: str
    type: str  # ADDED, MODIFIED or DELETED
    obj: JSON
    old: JSON | None  # the previous version, for MODIFIED and DELETED


Predicate = Callable[[JSON], bool]


WATCHER_BACKLOG = 50_000  # events a watch may fall behind by before it is cut off


@dataclass(eq=False)
class Watcher:
    resource: str
    namespace: str | None
    matches: Predicate
    # SimpleQueue: every change is put to every watch of its kind, under the store lock. Queue's put and get
    # (a lock, a condition, a notify, in Python) cost ~3 us a pair here, SimpleQueue's ~0.3 us.
    events: queue.SimpleQueue[tuple[str, JSON] | None] = field(default_factory=queue.SimpleQueue)
    closed: bool = False

    def offer(self, change: Change) -> None:
        """Translate a change into what this watcher sees: an object entering or leaving its selector is
        ADDED or DELETED for it, as the real watch cache reports."""
        if self.namespace is not None and change.obj["metadata"].get("namespace") != self.namespace:
            return
        now = self.matches(change.obj)
        before = change.old is not None and change.type == MODIFIED and self.matches(change.old)
        if change.type == MODIFIED:
            kind = MODIFIED if now and before else ADDED if now else DELETED if before else ""
        else:
            kind = change.type if now else ""
        if kind:
            self.put((kind, change.obj))

    def put(self, item: tuple[str, JSON] | None) -> None:
        if self.closed:
            return
        if self.events.qsize() >= WATCHER_BACKLOG:
            # A consumer this far behind is cut off, as the real server drops slow watchers.
            self.close()
            return
        self.events.put(item)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.events.put(None)


def key_of(obj: JSON) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace", ""), meta["name"]


class Store:
    def __init__(self, *, history: int = 20_000) -> None:
        self.lock = threading.RLock()
        self._rv = 1
        self._objects: dict[str, dict[str, dict[str, JSON]]] = {}
        self._pods_by_node: dict[str, dict[tuple[str, str], JSON]] = {}
        self._dependents: dict[str, set[tuple[str, str, str]]] = {}  # owner uid -> (resource, ns, name)
        self._history: deque[Change] = deque(maxlen=history)
        self._watchers: dict[str, set[Watcher]] = {}
        self._listeners: list[Callable[[Change], None]] = []

    # -- reads --------------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self._rv

    def get(self, resource: str, namespace: str, name: str) -> JSON | None:
        return self._objects.get(resource, {}).get(namespace, {}).get(name)

    def all(self, resource: str, namespace: str | None = None) -> list[JSON]:
        """Objects in key order (namespace, then name), as etcd returns them."""
        with self.lock:
            spaces = self._objects.get(resource, {})
            if namespace is not None:
                return [spaces[namespace][n] for n in sorted(spaces.get(namespace, {}))]
            return [spaces[ns][n] for ns in sorted(spaces) for n in sorted(spaces[ns])]

    def count(self, resource: str) -> int:
        return sum(len(names) for names in self._objects.get(resource, {}).values())

    def namespaces_with(self, resource: str) -> Iterator[str]:
        return iter(list(self._objects.get(resource, {})))

    def pods_on_node(self, node: str) -> list[JSON]:
        with self.lock:
            return list(self._pods_by_node.get(node, {}).values())

    # -- writes -------------------------------------------------------------------------------------

    def next_rv(self) -> int:
        """Reserve the resourceVersion the next write will carry."""
        return self._rv + 1

    def put(self, resource: str, obj: JSON, *, created: bool) -> JSON:
        """Store `obj` (its metadata.resourceVersion is set here) and announce the change."""
        with self.lock:
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            namespace, name = key_of(obj)
            names = self._objects.setdefault(resource, {}).setdefault(namespace, {})
            old = names.get(name)
            names[name] = obj
            if resource == "pods":
                self._index_pod(old, obj)
            self._index_owners(resource, old, obj)
            self._announce(Change(self._rv, resource, ADDED if created else MODIFIED, obj, old))
            return obj

    def remove(self, resource: str, namespace: str, name: str) -> JSON | None:
        with self.lock:
            names = self._objects.get(resource, {}).get(namespace, {})
            old = names.pop(name, None)
            if old is None:
                return None
            if not names:
                del self._objects[resource][namespace]
            self._rv += 1
            # The DELETED event carries the last state with a fresh resourceVersion, as the real one does.
            final = {**old, "metadata": {**old["metadata"], "resourceVersion": str(self._rv)}}
            if resource == "pods":
                self._index_pod(old, None)
            self._index_owners(resource, old, None)
            self._announce(Change(self._rv, resource, DELETED, final, old))
            return final

    def _index_pod(self, old: JSON | None, new: JSON | None) -> None:
        if old is not None:
            node = old["spec"].get("nodeName")
            if node:
                self._pods_by_node.get(node, {}).pop(key_of(old), None)
        if new is not None:
            node = new["spec"].get("nodeName")
            if node:
                self._pods_by_node.setdefault(node, {})[key_of(new)] = new

    def _index_owners(self, resource: str, old: JSON | None, new: JSON | None) -> None:
        for obj, add in ((old, False), (new, True)):
            if obj is None:
                continue
            key = (resource, *key_of(obj))
            for ref in obj["metadata"].get("ownerReferences", ()):
                if add:
                    self._dependents.setdefault(ref["uid"], set()).add(key)
                else:
                    dependents = self._dependents.get(ref["uid"])
                    if dependents is not None:
                        dependents.discard(key)
                        if not dependents:
                            del self._dependents[ref["uid"]]

    def dependents(self, owner_uid: str) -> list[tuple[str, str, str]]:
        """(resource, namespace, name) of every object listing `owner_uid` in its ownerReferences."""
        with self.lock:
            return sorted(self._dependents.get(owner_uid, ()))

    # -- change feed --------------------------------------------------------------------------------

    def _announce(self, change: Change) -> None:
        self._history.append(change)
        for watcher in self._watchers.get(change.resource, ()):
            watcher.offer(change)
        for listener in self._listeners:
            listener(change)

    def add_listener(self, listener: Callable[[Change], None]) -> None:
        """Call `listener` with every change, under the store lock (controllers use it to wake up)."""
        self._listeners.append(listener)

    def watch(self, resource: str, namespace: str | None, matches: Predicate, since: int | None) -> Watcher:
        """Register a watcher. With `since`, replay history after that resourceVersion first; raise
        `TooOld` when history no longer reaches back that far. Without it, replay the current state
        as ADDED events ("get state and start at most recent")."""
        with self.lock:
            watcher = Watcher(resource, namespace, matches)
            if since is None:
                for obj in self.all(resource, namespace):
                    if matches(obj):
                        watcher.put((ADDED, obj))
            else:
                oldest = self._history[0].rv if self._history else self._rv + 1
                if since < oldest - 1 and since < self._rv:
                    raise TooOld(since, oldest - 1)
                for change in self._history:
                    if change.rv > since and change.resource == resource:
                        watcher.offer(change)
            self._watchers.setdefault(resource, set()).add(watcher)
            return watcher

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            self._watchers.get(watcher.resource, set()).discard(watcher)

    def compact(self) -> int:
        """Forget the change history, as etcd compaction does: older resourceVersions can no longer be
        watched from. Returns the resourceVersion compacted to."""
        with self.lock:
            self._history.clear()
            return self._rv

    def drop_watches(self) -> int:
        with self.lock:
            dropped = 0
            for watchers in self._watchers.values():
                for watcher in list(watchers):
                    watcher.close()
                    dropped += 1
                watchers.clear()
            return dropped


class TooOld(Exception):
    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest
