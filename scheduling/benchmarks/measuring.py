"""The benchmarks' instruments: a Kube that times its reads, a log of SQL statements by shape, the garbage
collector's pauses, and a Celery that counts tasks instead of sending them."""

from __future__ import annotations

import gc
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from portal.celery import app
from scheduling.kube.calls import Kube, Objects


class TimedKube(Kube):
    """The portal's Kube, timing each read by verb and kind (the cycle only reads the cluster)."""

    def __init__(self, base: Kube) -> None:
        super().__init__(base.api_client, base.timeout)
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.calls = 0

    @contextmanager
    def _timed(self, what: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[what] += time.perf_counter() - started
            self.calls += 1

    def list(self, kind: str, namespace: str | None, label_selector: str = "") -> Objects:
        with self._timed(f"list {kind}"):
            return super().list(kind, namespace, label_selector)

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        with self._timed(f"get {kind}"):
            return super().get(kind, namespace, name)

    def reset(self) -> None:
        self.seconds.clear()
        self.calls = 0


class GcPauses:
    """Time the garbage collector stopped this process for, and its full (oldest-generation) collections:
    their cost grows with every object the process keeps, not with the work at hand."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._started = 0.0

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started
            self.full += info["generation"] == 2

    @contextmanager
    def recording(self) -> Iterator[GcPauses]:
        gc.callbacks.append(self._note)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._note)


_LITERALS = re.compile(r"'(?:[^']|'')*'|\d+(?:\.\d+)?")  # also inside savepoint names (s123_x4)
_LISTS = re.compile(r"\((?:(?:\?|%s), )+(?:\?|%s)\)")


def statement_shape(sql: str) -> str:
    """The SQL with literals as ``?`` and IN-lists folded, so one query per row shows as one shape."""
    return _LISTS.sub("(...)", _LITERALS.sub("?", sql))


class QueryLog:
    """Counts and times every SQL statement and commit on this thread's connection.

    Statements through ``connection.execute_wrapper`` (precise to the microsecond, no debug cursor);
    commits do not pass through it, yet each admission is a transaction of its own, so its COMMIT (a
    round trip, an fsync) is timed by wrapping the connection's ``commit`` meanwhile.
    """

    def __init__(self) -> None:
        self.shapes: Counter[str] = Counter()
        self.seconds = 0.0

    def __call__(self, execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        with self._timed(statement_shape(sql)):
            return execute(sql, params, many, context)

    @contextmanager
    def _timed(self, shape: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds += time.perf_counter() - started
            self.shapes[shape] += 1

    @contextmanager
    def recording(self) -> Iterator[None]:
        commit = connection.commit

        def timed_commit() -> None:
            with self._timed("COMMIT"):
                commit()

        connection.commit = timed_commit  # type: ignore[method-assign] # undone below
        try:
            with connection.execute_wrapper(self):
                yield
        finally:
            del connection.commit

    @property
    def count(self) -> int:
        return sum(self.shapes.values())

    def repeated(self, top: int = 6) -> list[tuple[int, str]]:
        return [(n, shape[:300]) for shape, n in self.shapes.most_common(top) if n > 1]


@contextmanager
def unsent_tasks() -> Iterator[Counter[str]]:
    """Count the Celery tasks enqueued meanwhile instead of sending them: no worker ever provisions
    anything for the benchmark, whatever broker the settings name."""
    sent: Counter[str] = Counter()
    with _intercepted(lambda name, *args, **options: sent.update([name])):
        yield sent


@dataclass(frozen=True)
class SentTask:
    name: str
    args: tuple[Any, ...]
    options: dict[str, Any] = field(default_factory=dict)


@contextmanager
def unsent_task_calls() -> Iterator[list[SentTask]]:
    """:func:`unsent_tasks`, keeping each task's arguments and options (countdown, queue) in order."""
    calls: list[SentTask] = []

    def record(name: str, args: tuple[Any, ...] = (), *rest: Any, **options: Any) -> None:
        calls.append(SentTask(name, tuple(args), options))

    with _intercepted(record):
        yield calls


@contextmanager
def _intercepted(record: Callable[..., None]) -> Iterator[None]:
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = False  # eager tasks would run right here instead of reaching send_task
    app.send_task = record  # type: ignore[method-assign,assignment] # undone below
    try:
        yield
    finally:
        del app.send_task
        app.conf.task_always_eager = eager
