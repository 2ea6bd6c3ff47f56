import pytest

from scheduling.engine.fragmentation import shape_key
from scheduling.engine.policies.router import Router
from scheduling.engine.policies.simple import FirstFit
from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import EXCLUSIVE, TIME_SLICED, build_state
from scheduling.engine.timeslice import TimeSlicePlacer
from scheduling.engine.workload import OnlineWorkload
from tests.engine.helpers import share

REPLICA = PodShape(1000, 1024, 1, 250, replica=True)


def test_replicas_per_gpu_are_respected_and_packed():
    st = build_state(["x", "t"], ["G2", "T4"], [2, 2], [64_000] * 2, [65_536] * 2, modes=[EXCLUSIVE, TIME_SLICED],
                     replicas=[0, 3])  # fmt: skip
    placer = TimeSlicePlacer()
    got = []
    for _ in range(7):
        p = placer.choose(st, REPLICA)
        if p is None:
            break
        st.apply(REPLICA, p)
        got.append(p)
    assert got == [Placement(1, (0,))] * 3 + [Placement(1, (1,))] * 3  # 2 GPUs x 3 replicas, then none
    assert st.ts_free[1].tolist() == [0, 0]
    with pytest.raises(ValueError):
        st.apply(REPLICA, Placement(1, (0,)))
    assert placer.choose(st, share(100)) is None  # not a replica request


def test_router_sends_each_kind_to_its_placer():
    st = build_state(["x", "t"], ["G2", "T4"], [1, 1], [64_000] * 2, [65_536] * 2, modes=[EXCLUSIVE, TIME_SLICED],
                     replicas=[0, 2])  # fmt: skip
    r = Router(FirstFit())
    assert r.choose(st, REPLICA) == Placement(1, (0,))
    assert r.choose(st, share(300)) == Placement(0, (0,))
    assert r.choose(st, PodShape(1000, 1024, 1, 100, mig_profile="1g.10gb")) is None  # no MIG node


def test_online_workload_learns_and_forgets():
    model = OnlineWorkload(half_life=10, refresh=8)
    for _ in range(50):
        model.observe(share(500))
    assert model.typical().milli.tolist() == [500]
    versions = model.version
    for _ in range(60):
        model.observe(share(300))
    t = model.typical()
    assert model.version > versions
    assert t.milli.tolist()[0] == 300  # the recent shape dominates after a few half-lives
    assert shape_key(share(300)) in {(int(c), int(m), int(g), int(n), None) for c, m, g, n in
                                      zip(t.cpu, t.memory, t.milli, t.count, strict=True)}  # fmt: skip
