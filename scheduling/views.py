"""Pages for the queue."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.dateparse import parse_datetime

from portal.http import AuthenticatedRequest
from scheduling.queue_view import queue_entries


@login_required
def queue_page(request: AuthenticatedRequest) -> HttpResponse:
    entries = queue_entries(request.user)
    for entry in entries:
        entry["estimate"] = parse_datetime(entry["estimated_start"]) if entry["estimated_start"] else None
    return render(request, "scheduling/queue.html", {"entries": entries})
