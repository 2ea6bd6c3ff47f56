import numpy as np
import pytest

from scheduling.benchmarks.replay import RunResult, replay
from scheduling.engine.policies.simple import FirstFit
from tests.engine.helpers import cluster, share, whole


def _result(arrived: list[float], allocated: list[float]) -> RunResult:
    a = np.asarray(arrived, dtype=float)
    return RunResult(a, np.asarray(allocated, dtype=float), a.copy(), np.zeros(len(a)), len(a), len(a))


def test_unallocated_averages_events_rounding_to_the_point():
    r = _result([98.0, 99.4, 99.5, 100.2, 100.49, 100.5, 101.0], [90, 91, 92, 93, 94, 95, 96])
    # 99.5, 100.2 and 100.49 round to 100 (half up); 100.5 rounds to 101.
    assert r.unallocated_at(100) == pytest.approx(100 - (92 + 93 + 94) / 3)


def test_unallocated_falls_back_to_first_event_past_the_point():
    r = _result([50.0, 98.0, 103.0], [50.0, 90.0, 95.0])
    assert r.unallocated_at(100) == pytest.approx(5.0)


def test_replay_records_arrived_and_allocation_by_hand():
    # One node, 2 GPUs = 2000 milli. Offered: 1 GPU, 0.6, 0.6 (does not fit: 0.4 left), 0.4, 1 GPU (drop).
    st = cluster([2])
    pods = [whole(1), share(600), share(600), share(400), whole(1)]
    r = replay(st, pods, FirstFit())
    assert r.arrived.tolist() == pytest.approx([50.0, 80.0, 110.0, 130.0, 180.0])
    assert r.allocated.tolist() == pytest.approx([50.0, 80.0, 80.0, 100.0, 100.0])
    assert r.placed == 3 and r.offered == 5
    assert r.unallocated_at(100) == pytest.approx(100 - 80.0)  # no event rounds to 100: the first past it
    assert r.accepted_at(130) == pytest.approx(100.0 * 100 / 130)
    assert set(r.curve(75, 130)) == set(range(75, 131))


def test_replay_snapshots_are_copies():
    st = cluster([1])
    r = replay(st, [share(500), share(500)], FirstFit(), snapshot_at=[50])
    assert r.snapshots[50].gpu_free[0, 0] == 500
    assert st.gpu_free[0, 0] == 0
