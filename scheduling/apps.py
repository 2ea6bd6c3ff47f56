from typing import Any

from django.apps import AppConfig


def _flush_api_errors(**_: Any) -> None:
    from scheduling.loops.passes import flush_api_errors  # models are ready by the time a task ends

    flush_api_errors()


class SchedulingConfig(AppConfig):
    name = "scheduling"

    def ready(self) -> None:
        from celery.signals import task_postrun

        # Every task's failed Kubernetes calls reach /metrics, not only the timed loops' (provisioning...).
        task_postrun.connect(_flush_api_errors, weak=False, dispatch_uid="scheduling-flush-api-errors")
