"""Limit/offset pagination with a ceiling on ``limit``.

Without one, ``?limit=10**30`` reached the database as LIMIT (PostgreSQL: "bigint out of range", a 500).
An offset past the end already answers an empty page without a query (DRF checks it against the count)."""

from __future__ import annotations

from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 1000


class ClampedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT
