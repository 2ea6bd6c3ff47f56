"""Waiting for the other sessions on the test database before a test's teardown empties it."""

from __future__ import annotations

import time

from django.db import connection


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
