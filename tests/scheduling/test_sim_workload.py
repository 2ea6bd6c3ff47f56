"""A workspace may name the simulated cluster's workload profile in its environment (the demo's way to
show idle reclaim); the pod then carries it, and the simulated cluster plays it."""

from __future__ import annotations

import pytest

from scheduling.demand import SIM_PROFILE_ENV, sim_workload, spec_for
from scheduling.kube import manifests
from scheduling.kube.keys import SIM_BUSY_ANNOTATION, SIM_PROFILE_ANNOTATION
from tests.catalogue import install_offerings
from tests.conftest import Org
from tests.factories import make_workspace


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ("bursty-notebook", None)),
        ("idle-notebook", ("idle-notebook", None)),
        ("idle-notebook:60", ("idle-notebook", 60)),
        ("cpu-preprocessing", ("cpu-preprocessing", None)),
        ("IDLE", ("bursty-notebook", None)),  # not a profile name: the kind's default
        ("idle-notebook:-5", ("bursty-notebook", None)),
        ("idle-notebook:soon", ("bursty-notebook", None)),
    ],
)
def test_profile_from_the_environment(org: Org, value: str | None, expected: tuple[str, int | None]) -> None:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    env = {} if value is None else {SIM_PROFILE_ENV: value}
    workspace = make_workspace(org.alpha, org.member, offering, env=env)
    assert sim_workload(workspace) == expected


def test_the_notebook_pod_carries_the_profile(org: Org) -> None:
    offering = install_offerings()["a100-sxm4-80gb-1g-10gb"]
    workspace = make_workspace(org.alpha, org.member, offering, env={SIM_PROFILE_ENV: "idle-notebook:45"})
    pod = manifests.make_notebook_pod(spec_for(workspace), base_url="/")
    annotations = pod.metadata.annotations
    assert annotations[SIM_PROFILE_ANNOTATION] == "idle-notebook"
    assert annotations[SIM_BUSY_ANNOTATION] == "45"
