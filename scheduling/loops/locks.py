"""One scheduling cycle at a time, across processes.

PostgreSQL: a session advisory lock (released on unlock or when the connection dies, so a crashed worker
never leaves it held). Other databases (the SQLite demo): a cache lock with an expiry.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from django.core.cache import cache
from django.db import connection


def _key(name: str) -> int:
    return zlib.crc32(name.encode())


@contextmanager
def single_flight(name: str, *, expire_seconds: int = 120) -> Iterator[bool]:
    """Yield True if this caller holds the lock named ``name``; False if someone else does."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [_key(name)])
            acquired = bool(cursor.fetchone()[0])
        try:
            yield acquired
        finally:
            if acquired:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [_key(name)])
        return
    cache_key = f"lock:{name}"
    acquired = cache.add(cache_key, "1", timeout=expire_seconds)
    try:
        yield acquired
    finally:
        if acquired:
            cache.delete(cache_key)
