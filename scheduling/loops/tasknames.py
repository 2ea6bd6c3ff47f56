"""The names of the scheduling tasks, said once.

Settings (routes, beat schedule), the tasks themselves, the control loops and ``scheduling.services`` (the
web side's door) import these; apps enqueue by name (``portal.queue.enqueue``) so none imports a task.
Plain strings, no imports: settings load this module before Django is set up.
"""

RUN_CYCLE = "scheduling.run_cycle"
PROVISION = "scheduling.provision_workspace"
PROVISION_MANY = "scheduling.provision_workspaces"  # one scheduling cycle's admissions, in batches
TEARDOWN = "scheduling.teardown_workspace"
RECONCILE = "scheduling.reconcile"
COLLECT_TELEMETRY = "scheduling.collect_telemetry"
COMPACT_TELEMETRY = "scheduling.compact_telemetry"
WARN_RUNTIME = "scheduling.warn_runtime"
REPARTITION_MIG = "scheduling.repartition_mig"
SCALE_JOB = "scheduling.scale_job"  # an elastic training job's Job to the size its row says

# The reconcile loop runs on a queue of its own (the control queue), the scheduling cycle on another (the
# scheduler queue), which a worker of one pool process consumes (CELERY_TASK_ROUTES in portal/settings.py).
CONTROL = (RECONCILE,)
SCHEDULER = (RUN_CYCLE,)
