"""Waiting for the other sessions on the test database before a test's teardown empties it."""

from __future__ import annotations

import time

from django.core.management.base import CommandError
from django.db import connection
from django.test import TransactionTestCase


def others_done(timeout_s: float = 30.0) -> None:
    """Wait until no other session on this database is running a statement or holds a transaction open.
    A statement goes on after its client is gone (a killed worker's, a live server thread's last one),
    holding its locks, and the teardown's TRUNCATE would deadlock with it. PostgreSQL only."""
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout_s
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'"
            )
            if not cursor.fetchone()[0]:
                return
            time.sleep(0.2)


_DEADLOCK = "40P01"  # PostgreSQL's SQLSTATE for "deadlock detected"


def _deadlocked(error: BaseException) -> bool:
    cause: BaseException | None = error
    while cause is not None:
        if getattr(cause, "sqlstate", None) == _DEADLOCK:
            return True
        cause = cause.__cause__
    return False


def flush_through_deadlocks(attempts: int = 4) -> None:
    """Make a transactional test's teardown flush try again when PostgreSQL picks it as a deadlock's victim.
    The session's Celery worker (the full-stack tests') goes on with its one-second loops on the test
    database during the tests that follow on the same process; a loop's transaction can hold one table
    while it waits for another that the flush's TRUNCATE has already locked. Waiting for it to finish
    cannot help (the next pass starts a second later); trying again can, as the loop's pass is short."""
    original = TransactionTestCase._fixture_teardown  # type: ignore[attr-defined] # private, not in the stubs

    def _fixture_teardown(self: TransactionTestCase) -> None:
        for attempt in range(attempts):
            try:
                original(self)
                return
            except CommandError as error:
                if attempt == attempts - 1 or not _deadlocked(error):
                    raise
                time.sleep(0.2)

    TransactionTestCase._fixture_teardown = _fixture_teardown  # type: ignore[attr-defined]
