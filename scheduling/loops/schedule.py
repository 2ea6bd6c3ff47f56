"""What runs periodically, and how often.

- Celery beat's schedule (read by ``portal.settings``): the scheduling cycle every
  ``SCHEDULING_INTERVAL_SECONDS`` (also after every request and release), the reconcile pass every
  ``RECONCILE_INTERVAL_SECONDS`` (5 s each by default), telemetry collection every
  ``TELEMETRY_INTERVAL_SECONDS`` (30 s; ``loops/telemetry.py``), and every hour the compaction of old
  samples into hourly rows and their expiry (``loops/telemetry_retention.py``), and every minute the warning
  of workspaces near their runtime limit (``loops/runtime_warning.py``), and every
  ``BILLING_BUDGET_CHECK_SECONDS`` (300 s) the teams' budget thresholds (``portal/tasks.py``), and every
  ``ALERT_CHECK_SECONDS`` (60 s) the operators' and leads' alerts (``portal/alerts/record.py``), and every
  ``MIG_REPARTITION_INTERVAL_SECONDS`` (15 s) the MIG layouts that follow the queue
  (``loops/mig_repartition.py``; the pass does nothing unless ``MIG_REPARTITION_ENABLED``). Each entry
  expires if not started within two periods (telemetry within one), so a busy worker skips stale runs
  instead of queueing them in front of provisioning.
- Inside those: every cycle stops borrowers whose preemption notice ran out and ages the fair-share usage;
  every reconcile pass checks pods and jobs, and one pass every ``ORPHAN_SWEEP_SECONDS`` (60 s) also sweeps
  orphaned services, secrets and volumes (:func:`orphan_sweep_due`); every pass records the pods it saw
  running in the usage ledger, and one every ``BILLING_CAPACITY_SECONDS`` (60 s) the fleet
  (``loops/metering.py``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import cache

from scheduling.loops import tasknames


def beat_schedule(
    *,
    scheduling_interval: float,
    reconcile_interval: float,
    telemetry_interval: float,
    budget_interval: float = 300.0,
    alert_interval: float = 60.0,
    mig_interval: float = 15.0,
) -> dict[str, dict[str, Any]]:
    return {
        # Operators' and leads' alerts (portal/tasks.py): their ``for`` periods are minutes, so is this.
        "alert-check": {
            "task": "alerts.check",
            "schedule": alert_interval,
            "options": {"expires": alert_interval},
        },
        # Budget thresholds (portal/tasks.py): spend moves by the minute, a warning within minutes is on time.
        "budget-check": {
            "task": "billing.check_budgets",
            "schedule": budget_interval,
            "options": {"expires": budget_interval},
        },
        "telemetry": {
            "task": tasknames.COLLECT_TELEMETRY,
            "schedule": telemetry_interval,
            "options": {"expires": telemetry_interval},  # a late collection is skipped, never doubled
        },
        "telemetry-compaction": {
            "task": tasknames.COMPACT_TELEMETRY,
            "schedule": 3600.0,
            "options": {"expires": 3600.0},
        },
        "scheduling-cycle": {
            "task": tasknames.RUN_CYCLE,
            "schedule": scheduling_interval,
            "options": {"expires": 2 * scheduling_interval},
        },
        "reconcile": {
            "task": tasknames.RECONCILE,
            "schedule": reconcile_interval,
            "options": {"expires": 2 * reconcile_interval},
        },
        # A MIG change takes a few passes (drain, apply, watch); a late pass is skipped, never doubled.
        "mig-repartition": {
            "task": tasknames.REPARTITION_MIG,
            "schedule": mig_interval,
            "options": {"expires": mig_interval},
        },
        # Warnings are given minutes ahead (NOTIFY_RUNTIME_WARNING_MINUTES): once a minute is on time.
        "runtime-warning": {
            "task": tasknames.WARN_RUNTIME,
            "schedule": 60.0,
            "options": {"expires": 60.0},
        },
    }


def orphan_sweep_due() -> bool:
    """True once every ``ORPHAN_SWEEP_SECONDS`` across processes: kept home volumes and tokens grow with every
    workspace ever made, and listing them every few seconds dominated a pass on a busy portal."""
    return bool(cache.add("reconcile:sweep", True, timeout=settings.ORPHAN_SWEEP_SECONDS))


def release_orphan_sweep() -> None:
    """Give the sweep back after a pass that failed (e.g. during an API outage), so the next pass sweeps
    instead of waiting out the period."""
    cache.delete("reconcile:sweep")


def capacity_record_due() -> bool:
    """True once every ``BILLING_CAPACITY_SECONDS`` across processes: the reconcile pass then also lists nodes
    for the capacity ledger (the fleet changes seldom; pods are recorded every pass)."""
    return bool(cache.add("reconcile:capacity", True, timeout=settings.BILLING_CAPACITY_SECONDS))
