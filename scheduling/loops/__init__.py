"""The control loops the Celery worker runs: the scheduling cycle (admission, placement), provisioning and
teardown of a workspace's objects, the reconcile loop (cluster truth -> database, drift repaired), reading
a workspace's state off its objects, the one-at-a-time locks, the task names and beat's schedule."""
