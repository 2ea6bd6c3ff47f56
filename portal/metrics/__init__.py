"""The portal's Prometheus metrics (``/metrics``): computed from the database at scrape time, so that any
number of gunicorn and Celery processes, in any number of pods, give one consistent set of figures.

- ``gauges``: the queue, allocation, activity, capacity, borrowing, budgets, loops and the broker now.
- ``events``: counters and the admission-wait histogram from the workspaces' event log, counted
  incrementally (a watermark in the cache) and recounted from the log whenever the cache is lost.
- ``exposition``: the text format, and the token check of the view.
- ``rules``: the alert rules (Prometheus file and PrometheusRule) rendered from the threshold settings.
"""
