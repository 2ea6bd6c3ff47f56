"""In-portal alerts for operators and leads (docs/alerts.md): the conditions of the Prometheus alert rules
(``portal.metrics.rules``), evaluated from the database with the same ``ALERT_*`` thresholds, held for the
rules' ``for`` periods, and told through the notification channels.

- ``kinds``: the alerts, who hears of each, and each one's ``for`` and severity as the rules file has them (pure);
- ``conditions``: what is wrong now, from the figures read (pure): one observation per alert key;
- ``states``: the Prometheus-like state machine: pending, firing, resolved, and what to tell (pure);
- ``waits``: requests waiting within quota per GPU model and team (the gauge has them per model only);
- ``readings``: the figures, read through ``portal.metrics.gauges`` and ``events``;
- ``models``: ``OpsAlert`` (one per key: its state) and ``OpsAlertNotice`` (each firing and resolution, told once);
- ``record``: the beat task's work: one check at a time, states written, notices made once;
- ``access``, ``views``: who sees which alerts, and the ``/alerts/`` page.
"""
