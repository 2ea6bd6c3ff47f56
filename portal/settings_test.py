"""Settings for pytest and mypy: the ``test`` defaults, everything else from the environment."""

import os

os.environ.setdefault("PORTAL_ENV", "test")

from portal.settings import *  # noqa: F403

# Throttles stay active, at rates no test run reaches: counters live in the cache (Redis in CI), outlive a
# test, and user ids repeat between tests. tests/portal/test_bad_input.py lowers the rate to see a 429.
REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {"user": "1000000/hour", "anon": "1000000/hour"},
}

# pytest-xdist runs tests in several processes against one Redis: each keeps its cache keys (locks, marks,
# throttles) to itself. Its full-stack worker inherits the variable, so it shares its parent's prefix.
CACHES["default"]["KEY_PREFIX"] = os.environ.get("PYTEST_XDIST_WORKER", "")  # noqa: F405
