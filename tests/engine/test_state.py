import numpy as np
import pytest

from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import EXCLUSIVE, MIG, TIME_SLICED, build_state
from tests.engine.helpers import cluster, cpu_only, share, whole


def test_empty_cluster_arrays():
    st = cluster([8, 2, 1])
    assert st.gpu_free.shape == (3, 8)
    assert st.gpu_free[1].tolist() == [1000, 1000] + [0] * 6  # padding past the GPU count holds nothing
    assert st.full_free.tolist() == [8, 2, 1]
    assert st.total_gpus == 11


def test_apply_release_round_trip():
    st = cluster([2])
    pod = share(300, cpu=4000, mem=2048)
    before = st.copy()
    st.apply(pod, Placement(0, (1,)))
    assert st.gpu_free[0].tolist() == [1000, 700]
    assert st.full_free[0] == 1
    assert st.cpu_free[0] == 28_000 and st.mem_free[0] == 262_144 - 2048
    st.release(pod, Placement(0, (1,)))
    for name in ("gpu_free", "full_free", "cpu_free", "mem_free"):
        assert np.array_equal(getattr(st, name), getattr(before, name))


def test_copy_is_independent_and_stamps_change():
    st = cluster([2, 2])
    snap = st.copy()
    stamp = st.stamp.copy()
    st.apply(whole(1), Placement(1, (0,)))
    assert snap.gpu_free[1, 0] == 1000
    assert st.stamp[1] != stamp[1] and st.stamp[0] == stamp[0]


@pytest.mark.parametrize(
    ("pod", "placement"),
    [
        (share(600), Placement(0, (0,))),  # second 600 on a GPU with 400 left
        (whole(1, cpu=40_000), Placement(0, (1,))),  # more CPU than the node has
        (whole(2), Placement(0, (1,))),  # too few GPUs named
        (whole(1), Placement(0, (5,))),  # a GPU the node does not have
    ],
)
def test_apply_refuses_what_does_not_fit(pod, placement):
    st = cluster([2])
    st.apply(share(600), Placement(0, (0,)))
    with pytest.raises(ValueError):
        st.apply(pod, placement)


def test_fits_checks_cpu_memory_model_and_gpus():
    st = build_state(["a", "b"], ["T4", "G2"], [2, 8], [8000, 96_000], [16_384, 393_216])
    assert st.fits(cpu_only(9000)).tolist() == [False, True]
    assert st.fits(PodShape(1000, 20_000, 1, 500)).tolist() == [False, True]
    assert st.fits(PodShape(1000, 1000, 1, 500, gpu_models=frozenset({"T4"}))).tolist() == [True, False]
    assert st.fits(whole(4)).tolist() == [False, True]


def test_modes_keep_milli_code_away():
    st = build_state(
        ["x", "m", "t"], ["G2", "A100-SXM4-80GB", "T4"], [2, 2, 2], [8000] * 3, [16_384] * 3,
        modes=[EXCLUSIVE, MIG, TIME_SLICED], replicas=[0, 0, 4],
    )  # fmt: skip
    assert st.fits(share(100)).tolist() == [True, False, False]
    assert st.ts_free[2].tolist() == [4, 4]
    assert st.mig_state[1].tolist() == [0, 0] and st.mig_state[0].tolist() == [-1, -1]
    assert not st.fits(PodShape(1000, 1000, 1, 100, mig_profile="1g.10gb")).any()


def test_shape_validation():
    with pytest.raises(ValueError):
        PodShape(1000, 1000, 2, 500)  # only single-GPU pods share
    with pytest.raises(ValueError):
        PodShape(1000, 1000, 1, 0)
    assert share(500).is_sharing and not whole(1).is_sharing
    assert whole(4).total_milli == 4000
