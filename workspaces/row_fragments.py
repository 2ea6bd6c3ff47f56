"""The list's rows as HTML: each row rendered once for what it shows, then taken from the cache.

Rendering 50 rows was most of what a changed list cost (the list refreshes every 2 s, and a running
workspace's cost or telemetry changes it every few refreshes), while most of its rows had not changed. A
row's key digests everything its template reads: every column of the workspace, the names it shows of its
team, owner and offering, its telemetry, cost and deadline, the actions its viewer may take, its ages as
text (they follow the clock), the template's own source and the time zone and language it is rendered in.
So a row is rendered again exactly when something it shows changed, and viewers who are offered the same
actions share it. The forms' CSRF token is the one thing of the viewer's own: rows are kept with a marker in
its place, filled in for each answer.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.core.cache import cache as shared_cache
from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.template.loader import get_template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import get_language
from redis.exceptions import RedisError

from workspaces.models import Workspace

log = logging.getLogger(__name__)

ROW_TEMPLATE = "workspaces/_row.html"
CSRF_MARKER = "<!--csrf-->"
KEEP_SECONDS = 600  # rows of finished workspaces stay the same for days; the cache's memory is bounded by this


def render_rows(request: HttpRequest, rows: Sequence[dict[str, Any]], now: datetime) -> SafeString:
    """The HTML of ``rows`` (each as the list view builds it: workspace, actions, ends_at, activity, cost)."""
    contexts = [_context(row, now) for row in rows]
    rendering = (_template_digest(), settings.TIME_ZONE, get_language())  # dates are shown in the zone
    keys = [_key(rendering, context) for context in contexts]
    try:
        kept: dict[str, str] = shared_cache.get_many(keys)
    except RedisError:  # the page does without the cache, not without its rows
        log.warning("could not read the list's rows from the cache", exc_info=True)
        kept = {}
    template = get_template(ROW_TEMPLATE)
    made = {key: template.render(context) for key, context in zip(keys, contexts, strict=True) if key not in kept}
    if made:
        try:
            shared_cache.set_many(made, KEEP_SECONDS)
        except RedisError:
            log.warning("could not keep the list's rows in the cache", exc_info=True)
    html = "".join(kept.get(key) or made[key] for key in keys)
    if CSRF_MARKER in html:
        token = format_html('<input type="hidden" name="csrfmiddlewaretoken" value="{}">', get_token(request))
        html = html.replace(CSRF_MARKER, token)
    return mark_safe(html)  # noqa: S308 - rendered by the template (escaped there) and the token by format_html


def _context(row: dict[str, Any], now: datetime) -> dict[str, Any]:
    ws: Workspace = row["workspace"]
    ends_at = row["ends_at"]
    return row | {
        "age": timesince(ws.created_at, now),
        "left": timeuntil(ends_at, now) if ends_at else "",
        "csrf_input": mark_safe(CSRF_MARKER),  # noqa: S308 - a constant
    }


def _key(rendering: tuple[str, ...], context: dict[str, Any]) -> str:
    ws: Workspace = context["workspace"]
    shown = (
        rendering,
        [getattr(ws, field.attname) for field in Workspace._meta.concrete_fields],
        ws.team.name,
        ws.owner.get_username(),
        ws.offering.display_name,
        sorted(context["actions"]),
        context["ends_at"],
        context["activity"],
        context["cost"],
        context["age"],
        context["left"],
    )
    return "wsrow:" + hashlib.blake2b(repr(shown).encode(), digest_size=16).hexdigest()


@cache
def _template_digest() -> str:
    """Of the row template's source, so that rows kept by an older release are not shown by a newer one."""
    source: str = get_template(ROW_TEMPLATE).template.source  # type: ignore[attr-defined]
    return hashlib.blake2b(source.encode(), digest_size=8).hexdigest()
