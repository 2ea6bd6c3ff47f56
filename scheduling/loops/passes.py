"""What the loops tell ``/metrics`` (``portal/metrics``): each pass's seconds and end, and the failed
Kubernetes API calls counted since the last pass, written to the database so that every process's work
adds up, whichever one Prometheus scrapes.

A pass runs under its loop's single-flight lock, so the read-modify-write of its row never races another
pass of the same loop; the row is still locked, for a loop run without one.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DatabaseError, transaction
from django.db.models import F
from django.db.transaction import TransactionManagementError
from django.utils import timezone

from scheduling.kube.calls import take_api_errors
from scheduling.models import KubeApiErrorCount, LoopStat

log = logging.getLogger(__name__)

# Upper bounds (seconds) of the pass-duration histogram: a cycle takes 0.05 s idle and seconds at scale.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def add_pass(loop: str, seconds: float, *, failed: bool = False) -> None:
    """Count one pass of ``loop`` that took ``seconds``."""
    index = bisect.bisect_left(BUCKETS, seconds)  # the first bound >= seconds; len(BUCKETS) means +Inf only
    with transaction.atomic():
        row, _ = LoopStat.objects.select_for_update().get_or_create(loop=loop)
        counts = list(row.buckets) + [0] * (len(BUCKETS) - len(row.buckets))
        for i in range(index, len(BUCKETS)):
            counts[i] += 1
        row.buckets = counts
        row.passes += 1
        row.failures += int(failed)
        row.seconds_total += seconds
        if not failed:
            row.last_finished_at = timezone.now()
        row.save()


def flush_api_errors() -> None:
    """Add this process's failed Kubernetes API calls to the database's totals."""
    for status, count in take_api_errors().items():
        updated = KubeApiErrorCount.objects.filter(status=status).update(count=F("count") + count)
        if not updated:
            _, created = KubeApiErrorCount.objects.get_or_create(status=status, defaults={"count": count})
            if not created:  # another process made the row between the two statements
                KubeApiErrorCount.objects.filter(status=status).update(count=F("count") + count)


@contextmanager
def timed(loop: str) -> Iterator[None]:
    """Time the pass inside; a pass that raises counts as a failure and does not move the last success."""
    started = time.monotonic()
    try:
        yield
    except BaseException:
        try:
            add_pass(loop, time.monotonic() - started, failed=True)
            flush_api_errors()
        except (DatabaseError, TransactionManagementError):  # the failure may have been the database's
            log.warning("could not record the failed %s pass", loop, exc_info=True)
        raise
    add_pass(loop, time.monotonic() - started)
    flush_api_errors()
