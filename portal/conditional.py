"""Conditional GET for what clients ask for again and again (self-refreshing lists, polled API answers).

A view names what its answer depends on (its rows' columns, the viewer, the newest telemetry, the clock to
``CONDITIONAL_GET_SECONDS``) and gets an ETag for it; a client that sends that ETag back in
``If-None-Match`` gets 304 Not Modified without the answer being built. Those facts take a few narrow
queries, where building the answer takes model instances, per-row figures and rendering.

The tag is weak (``W/``): equal tags mean the same content, not the same bytes (a page's CSRF tokens are
masked afresh each time). ``Cache-Control: private, no-cache`` lets the browser keep the answer but makes it
ask again every time, so browsers' own fetches revalidate with no change to the pages' scripts.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import get_conditional_response, patch_cache_control, patch_vary_headers


def clock_step(salt: int = 0) -> int:
    """The current step of ``CONDITIONAL_GET_SECONDS``: what answers show that follows the clock alone (ages,
    time left, stale telemetry) may lag by up to that. ``salt`` (the viewer) shifts where steps begin, so
    that every open page does not miss at the same instant."""
    period = settings.CONDITIONAL_GET_SECONDS
    return int((time.time() + _shift(salt)) // period)


def step_began(salt: int = 0) -> datetime:
    """When the current step of :func:`clock_step` began: figures that grow with the clock (a running
    workspace's cost) are shown as of then, so that they change once a step rather than at every sighting."""
    return datetime.fromtimestamp(clock_step(salt) * settings.CONDITIONAL_GET_SECONDS - _shift(salt), tz=UTC)


def _shift(salt: int) -> int:
    return (salt * 7919) % settings.CONDITIONAL_GET_SECONDS


def digest(*facts: Any) -> str:
    """A short digest of ``facts`` (values with a stable ``repr``)."""
    return hashlib.blake2b(repr(facts).encode(), digest_size=16).hexdigest()


def etag(*facts: Any) -> str:
    """A weak ETag for an answer that depends on exactly ``facts``."""
    return f'W/"{digest(*facts)}"'


def answer(request: HttpRequest, tag: str, build: Callable[[], HttpResponseBase]) -> HttpResponseBase:
    """304 when the client already holds the answer tagged ``tag``; otherwise ``build()``'s, tagged."""
    not_modified = get_conditional_response(request, etag=tag)
    response = build() if not_modified is None else not_modified
    if response.status_code not in (200, 304):
        return response
    response["ETag"] = tag
    patch_cache_control(response, private=True, no_cache=True)
    # The same address answers each viewer differently: caches must key on who is asking.
    patch_vary_headers(response, ("Cookie", "Authorization"))
    return response
