"""Stored objects' JSON, encoded once however many watchers and lists send them.

Every watcher of a kind (each worker process of the portal has its own) and every list used to encode the
same object again; at a few thousand pod changes a minute that was the largest single cost of serving the
API. The store never changes an object in place once it holds it (a write stores a new dict and gives it a
new resourceVersion), so an object's encoding is right for as long as the object lives. The most recent
encodings are kept by the object's identity and resourceVersion, with the object itself, so that its id
cannot be taken by another object while its encoding is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

import orjson

JSON = dict[str, Any]


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON, as every response of the server is written: orjson, as the portal's client decodes
    it, ten times faster than the standard library's encoder (which was an eighth of the server's CPU
    time under the queue benchmark)."""
    return orjson.dumps(payload)


class Encodings:
    """The encodings of the ``size`` objects encoded last; see the module docstring."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._kept: dict[int, tuple[JSON, str, bytes]] = {}
        self._lock = threading.Lock()

    def object(self, obj: JSON) -> bytes:
        version = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        with self._lock:
            kept = self._kept.get(id(obj))
        if kept is not None and kept[0] is obj and kept[1] == version:
            return kept[2]
        body = dumps(obj)
        if version:  # a stored object; what has no version (a built answer) is not kept
            with self._lock:
                self._kept.pop(id(obj), None)
                self._kept[id(obj)] = (obj, version, body)
                if len(self._kept) > self.size:
                    del self._kept[next(iter(self._kept))]  # the oldest kept
        return body

    def event(self, kind: str, obj: JSON) -> bytes:
        """One line of a watch stream: ``{"type":kind,"object":obj}``."""
        return b'{"type":' + dumps(kind) + b',"object":' + self.object(obj) + b"}\n"

    def listing(self, head: JSON, items: Iterable[JSON]) -> bytes:
        """A list answer: ``head`` (kind, apiVersion, metadata) with ``"items"`` after it."""
        return dumps(head)[:-1] + b',"items":[' + b",".join(map(self.object, items)) + b"]}"
