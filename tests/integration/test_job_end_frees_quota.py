"""In the full stack, a training job's end frees its quota for the next request as soon as its pods have
succeeded: the worker's pod watch asks for a scheduling cycle, which writes the end and admits into the room.
Here the reconcile pass and beat's cycle are a minute apart, so neither of them can have done it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.catalogue import install_images, install_offerings, set_quota
from tests.conftest import Org
from tests.integration.test_training_job import request_job, state_of
from tests.stack_fixtures import Worker, wait_for
from workspaces.models import Workspace

# The worker process must see what the test writes: every test commits for real.
pytestmark = pytest.mark.django_db(transaction=True)


def _reason(workspace: Workspace) -> str:
    workspace.refresh_from_db()
    return workspace.reason


def test_the_next_request_is_admitted_when_the_jobs_pod_succeeds(
    org: Org, dedicated_worker: Callable[..., Worker]
) -> None:
    install_offerings()
    install_images()
    set_quota(org.alpha, "H100-80GB-HBM3", 1)
    # Jobs run 4 s (40 simulated seconds at the cluster's x10); the loops' own timers are out of reach.
    dedicated_worker(RECONCILE_INTERVAL_SECONDS="60", SCHEDULING_INTERVAL_SECONDS="60")
    first = request_job(org, "first", workers=1)
    wait_for(lambda: state_of(first) in ("admitted", "provisioning", "running"), timeout=20, what="the first to start")
    following = request_job(org, "following", workers=1)
    wait_for(lambda: "Waiting for team quota" in _reason(following), timeout=20, what="the second to wait for quota")

    wait_for(lambda: state_of(following) != "queued", timeout=30, what="the second to be admitted")

    first.refresh_from_db()
    assert first.state == "succeeded"
    end = first.events.get(to_state="succeeded")
    assert (end.source, end.reason) == ("scheduler", "Finished successfully.")
    assert first.finished_at is not None and following.admitted_at is not None
    assert (following.admitted_at - first.finished_at).total_seconds() < 5
