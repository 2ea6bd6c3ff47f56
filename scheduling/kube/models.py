"""The official client's model classes (``V1Job``, ``V1Container`` ...), each built with one shared configuration.

A model built without ``local_vars_configuration`` makes a fresh ``Configuration()``, whose constructor sets
the level of two loggers; every ``Logger.setLevel`` clears the cache of every logger in the process (hundreds
under Django and Celery). A training Job's manifest is about 30 models: those configurations were about 40%
of the worker's time for creating a workspace's objects (cProfile of a batch of 20). The models read their
configuration only for ``client_side_validation``, which the shared one leaves on, as the default is.

Use ``k8s.V1Job(...)`` where ``kubernetes.client.V1Job(...)`` would be written; types and ``isinstance``
checks stay with ``kubernetes.client``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from kubernetes import client

_CONFIGURATION = client.Configuration()


class _Models:
    def __getattr__(self, name: str) -> Any:
        model = getattr(client, name)
        if not (isinstance(model, type) and hasattr(model, "openapi_types")):
            raise AttributeError(f"kubernetes.client has no model {name!r}")
        built = partial(model, local_vars_configuration=_CONFIGURATION)
        setattr(self, name, built)  # looked up once per name
        return built


k8s = _Models()
