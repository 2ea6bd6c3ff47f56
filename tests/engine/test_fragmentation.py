import numpy as np
import pytest

from scheduling.engine.fragmentation import (
    FragIndex,
    TypicalShapes,
    fragmentation_ratio,
    shapes_from_counts,
    typical_shapes,
)
from scheduling.engine.policies.base import candidates, place
from scheduling.engine.policies.fgd import frag_increase
from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import ClusterState
from tests.engine.helpers import cluster, cpu_only, share, whole


def _typical() -> TypicalShapes:
    # Half the pods want 0.5 GPU with 4 cores, a quarter a whole GPU with 8 cores, a quarter no GPU.
    pods = [share(500, cpu=4000)] * 2 + [whole(1, cpu=8000)] + [cpu_only(2000)]
    return typical_shapes(pods)


def _direct(state: ClusterState, i: int, t: TypicalShapes) -> float:
    """FGD's node fragmentation written out the slow way, as the paper defines it."""
    free = state.gpu_free[i, : state.gpu_count[i]]
    out = 0.0
    for cpu, milli, count, w in zip(t.cpu, t.milli, t.count, t.weight, strict=True):
        fits = milli > 0 and state.cpu_free[i] >= cpu and (free >= milli).sum() >= count
        out += float(w * (free[free < milli].sum() if fits else free.sum()))
    return out


def test_typical_shapes_weights_and_coverage():
    t = _typical()
    assert t.weight.tolist() == pytest.approx([0.5, 0.25, 0.25])
    assert t.milli.tolist() == [500, 1000, 0]
    top = typical_shapes([share(500)] * 90 + [share(300)] * 6 + [share(100)] * 4, coverage=0.95)
    assert top.milli.tolist() == [500, 300]  # 90% is short of 95%, so the next shape joins, then stop
    assert top.weight.tolist() == pytest.approx([90 / 96, 6 / 96])
    assert len(shapes_from_counts({}, 0.95)) == 0


def test_node_fragmentation_by_hand():
    st = cluster([4], cpu=32_000)
    st.apply(share(700), Placement(0, (0,)))  # GPU 0: 300 free
    st.apply(share(200), Placement(0, (1,)))  # GPU 1: 800 free
    idx = FragIndex(_typical())
    idx.sync(st)
    # Free: 300, 800, 1000, 1000 = 3100. 0.5-GPU shape fits; strands GPU 0's 300. Whole GPU fits; strands
    # 300 + 800. CPU-only shape strands everything.
    assert idx.frag[0] == pytest.approx(0.5 * 300 + 0.25 * 1100 + 0.25 * 3100)
    st.apply(cpu_only(26_000), Placement(0))  # 6 cores left: the 8-core whole-GPU shape no longer fits
    idx.sync(st)
    assert idx.frag[0] == pytest.approx(0.5 * 300 + 0.25 * 3100 + 0.25 * 3100)
    assert fragmentation_ratio(st, idx) == pytest.approx(100 * idx.frag[0] / 3100)


def test_incremental_increase_matches_recomputation():
    rng = np.random.default_rng(3)
    t = _typical()
    st = cluster([8, 4, 2, 1], cpu=40_000)
    idx = FragIndex(t)
    shapes = [share(m, cpu=c) for m in (100, 250, 500, 700) for c in (1000, 6000)] + [
        whole(1),
        whole(2),
        cpu_only(3000),
    ]
    for _ in range(40):
        pod = shapes[rng.integers(len(shapes))]
        cand = candidates(st, pod)
        if not len(cand):
            continue
        idx.sync(st)
        inc = frag_increase(idx, st, pod, cand)
        for j in range(len(cand)):
            node = int(cand.node[j])
            trial = st.copy()
            trial.apply(pod, place(st, pod, node, int(cand.gpu[j])))
            assert inc[j] == pytest.approx(_direct(trial, node, t) - _direct(st, node, t))
        k = int(rng.integers(len(cand)))
        st.apply(pod, place(st, pod, int(cand.node[k]), int(cand.gpu[k])))
    idx.sync(st)
    assert idx.frag == pytest.approx([_direct(st, i, t) for i in range(st.n_nodes)])


def test_memory_aware_shapes():
    pods = [PodShape(1000, 50_000, 1, 1000)]
    t = typical_shapes(pods, with_memory=True)
    st = cluster([2], mem=60_000)
    idx = FragIndex(t)
    idx.sync(st)
    assert idx.frag[0] == 0.0
    st.apply(cpu_only(1000, mem=20_000), Placement(0))
    idx.sync(st)
    assert idx.frag[0] == 2000.0  # 40 GiB left: the 50 GiB shape fits nowhere, both GPUs are stranded
