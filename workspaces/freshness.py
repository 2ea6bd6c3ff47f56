"""What the self-refreshing workspace answers depend on, for their ETags (``portal/conditional.py``).

The list page's rows refresh every 2 s, and so do open workspace pages through the API; most of the time
nothing changed. A tag is made of every column of the rows shown (and the names they show of their team,
owner and offering), who is asking (their roles and led teams: the actions offered), the running ones'
newest telemetry and the teams' idle policies, and the clock's step. On PostgreSQL the rows are digested by
the database in one query (no row crosses to Python); elsewhere (the demo's SQLite) here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.models import Count, Max, QuerySet
from django.http import HttpRequest
from rest_framework.request import Request

from portal import conditional
from scheduling import services
from workspaces import access
from workspaces.models import Workspace

SHOWN_RELATED = ("team__slug", "team__name", "owner__username", "offering__slug", "offering__display_name")


@dataclass(frozen=True)
class Shown:
    """The rows an answer shows, as far as its tag goes."""

    digest: str  # of every column of every row, in order
    ids: list[int]
    running: list[int]


def _columns() -> list[str]:
    return [field.attname for field in Workspace._meta.concrete_fields] + list(SHOWN_RELATED)


def shown(queryset: QuerySet[Workspace]) -> Shown:
    """The digest and ids of the rows ``queryset`` yields (sliced as the answer shows them)."""
    columns = _columns()
    narrow = queryset.values_list(*columns)
    connection = connections[queryset.db]
    if connection.vendor == "postgresql":
        sql, params = narrow.query.sql_with_params()
        # The inner SQL is Django's own, its parameters passed apart.
        digest_sql = f"SELECT md5(string_agg(t::text, '|')), array_agg(t.id), array_agg(t.id) FILTER (WHERE t.state = %s) FROM ({sql}) t"  # noqa: S608, E501
        with connection.cursor() as cursor:
            cursor.execute(digest_sql, (Workspace.State.RUNNING, *params))
            digest, ids, running = cursor.fetchone()
        return Shown(digest or "", ids or [], running or [])
    rows = list(narrow)
    state = columns.index("state")
    return Shown(
        conditional.digest(rows),
        [row[0] for row in rows],
        [row[0] for row in rows if row[state] == Workspace.State.RUNNING],
    )


def viewer(request: HttpRequest | Request, led: set[int] | None = None) -> tuple[Any, ...]:
    """Who is asking, as far as what they are shown depends on it. The CSRF cookie too: a page answer
    carries forms whose tokens are valid for it alone."""
    user: Any = request.user
    led = access.teams_led_by(user) if led is None else led
    return user.pk, sorted(user.org_roles()), sorted(led), request.COOKIES.get(settings.CSRF_COOKIE_NAME)


def tag(
    request: HttpRequest | Request,
    rows: Shown,
    *more: Any,
    led: set[int] | None = None,
    activity_as_of: datetime | None = None,
) -> str:
    """The ETag of an answer showing ``rows`` to the viewer, and whatever ``more`` it depends on.
    ``activity_as_of``: the tag follows only the telemetry collected by then (:func:`as_of`)."""
    return conditional.etag(
        viewer(request, led),
        rows.digest,
        services.workspace_activity_version(rows.running, activity_as_of),
        conditional.clock_step(salt=request.user.pk or 0),
        *more,
    )


def as_of(request: HttpRequest | Request) -> datetime:
    """The start of the viewer's clock step. Lists show running workspaces' cost as of then, and their tags
    follow the telemetry collected by then: costs grow at every ledger pass (5 s) and telemetry lands every
    30 s, and either would otherwise change the tag of every list showing a running workspace that often,
    besides the step's own change (docs/conditional-get.md)."""
    return conditional.step_began(salt=request.user.pk or 0)


def detail_tag(request: HttpRequest | Request, workspace: Workspace) -> str:
    """The ETag of one workspace's answer: its columns and its events (which are only ever added)."""
    events = workspace.events.aggregate(count=Count("pk"), newest=Max("pk"))
    return tag(request, shown(Workspace.objects.filter(pk=workspace.pk)), events["count"], events["newest"])
