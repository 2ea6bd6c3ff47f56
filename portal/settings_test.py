"""Settings for pytest and mypy: the ``test`` defaults, everything else from the environment."""

import os

os.environ.setdefault("PORTAL_ENV", "test")

from portal.settings import *  # noqa: F403
