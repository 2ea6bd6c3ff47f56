"""A single-flight lock (``scheduling/loops/locks.py``) held by another database session, as another process's
cycle or benchmark run holds it. PostgreSQL only: elsewhere the lock lives in the cache."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from django.db import connection

from scheduling.loops import locks


@contextmanager
def held_elsewhere(name: str) -> Iterator[None]:
    db = connection.settings_dict
    other = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"], autocommit=True)
    try:
        other.execute("SELECT pg_advisory_lock(%s)", [locks._key(name)])
        yield
    finally:
        other.close()
