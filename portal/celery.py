"""The Celery application shared by workers, beat and the web process (which only enqueues).

Broker semantics (late acknowledgement, prefetch 1, visibility timeout) are set in ``portal.settings``
under the ``CELERY_`` namespace, with the reasons beside them.
"""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES  # type: ignore[attr-defined]

# The demo's broker folder, with atomic writes (portal/broker.py says why).
TRANSPORT_ALIASES["filesystem"] = "portal.broker:Transport"

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
