import numpy as np
import pytest

from scheduling.engine.fragmentation import typical_shapes
from scheduling.engine.policies import POLICIES, make_policy
from scheduling.engine.policies.balanced import BalancedFGD, claimed, demand_ratios, stranded, typical_model_demand
from scheduling.engine.policies.fgd import FGD
from scheduling.engine.policies.simple import BestFit, FirstFit
from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import build_state
from scheduling.engine.workload import OnlineWorkload
from tests.engine.helpers import cluster, cpu_only, share, whole

WORKLOAD = [share(500, cpu=4000)] * 4 + [share(250, cpu=2000)] * 2 + [whole(1, cpu=8000)] * 3 + [cpu_only(4000)]


def test_first_fit_takes_lowest_index():
    st = cluster([2, 2])
    assert FirstFit().choose(st, share(300)) == Placement(0, (0,))
    st.apply(whole(2), Placement(0, (0, 1)))
    assert FirstFit().choose(st, whole(1)) == Placement(1, (0,))


def test_best_fit_prefers_the_fullest_node_and_gpu():
    st = cluster([2, 2])
    st.apply(share(600), Placement(1, (1,)))
    p = BestFit(np.random.default_rng(0), exact=True).choose(st, share(300))
    assert p == Placement(1, (1,))  # node 1 has less left; GPU 1 is the tightest that fits


def test_fgd_packs_shares_onto_an_already_shared_gpu():
    st = cluster([2, 2])
    st.apply(share(500), Placement(1, (1,)))
    p = FGD(typical_shapes(WORKLOAD)).choose(st, share(500))
    assert p == Placement(1, (1,))  # filling the half-used GPU leaves no fragment; a fresh one would


def test_fgd_keeps_whole_gpus_for_whole_gpu_pods():
    st = cluster([1, 1])
    st.apply(share(250), Placement(0, (0,)))
    # A 0.5 pod fits either GPU; on GPU 0 the 250 left still suits the 0.25 shape, on the empty GPU the
    # 500 left would strand half a GPU for whole-GPU pods.
    assert FGD(typical_shapes(WORKLOAD)).choose(st, share(500)) == Placement(0, (0,))


def test_stranded_gpu_by_hand():
    ratios = (0.1, 1.0)  # 0.1 milli-GPU per milli-CPU: 10 cores feed one GPU
    assert stranded(np.array([4000.0]), np.array([20_000.0]), np.array([1e9]), ratios).tolist() == [2000.0]
    assert stranded(np.array([1000.0]), np.array([20_000.0]), np.array([1e9]), ratios).tolist() == [0.0]
    assert stranded(np.array([1000.0]), np.array([0.0]), np.array([0.0]), (np.inf, np.inf)).tolist() == [0.0]
    t = typical_shapes([whole(1, cpu=10_000, mem=2000)], with_memory=True)
    assert demand_ratios(t) == pytest.approx((0.1, 0.5))


def test_ours_sends_cpu_heavy_pods_where_cpu_is_plentiful():
    # Node 0: 8 GPUs, 12 cores each. Node 1: 2 GPUs, 52 cores each (the trace's G2 and T4 nodes).
    st = build_state(["g2", "t4"], ["G2", "T4"], [8, 2], [96_000, 104_000], [393_216, 524_288])
    work = [whole(1, cpu=11_000, mem=40_000)] * 8 + [cpu_only(40_000, mem=40_000)] * 2
    ours = BalancedFGD(typical_shapes(work, with_memory=True))
    # 40 cores taken from the G2 node would leave 56 cores for 8 GPUs that want 11 each: 3 GPUs stranded.
    assert ours.choose(st, cpu_only(40_000, mem=40_000)) == Placement(1)


def test_ours_learns_online():
    model = OnlineWorkload(with_memory=True, refresh=4)
    ours = BalancedFGD(model)
    st = cluster([2, 2])
    for _ in range(5):
        p = ours.choose(st, share(500))
        assert p is not None
        st.apply(share(500), p)
    assert model.observed == 5 and model.typical().milli.tolist() == [500]
    assert sorted(st.gpu_free[:, :2].ravel().tolist()) == [0, 0, 500, 1000]  # shares packed in pairs


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_every_policy_places_validly_and_only_drops_what_fits_nowhere(name):
    rng = np.random.default_rng(11)
    st = build_state(
        [f"n{i}" for i in range(6)], ["G2", "G2", "T4", "T4", "V100", "V100"], [8, 4, 2, 2, 1, 1],
        [64_000, 32_000, 48_000, 16_000, 8000, 8000], [262_144, 131_072, 65_536, 65_536, 32_768, 32_768],
    )  # fmt: skip
    shapes = [share(m, cpu=c) for m in (120, 330, 500, 810) for c in (2000, 6000)] + [
        whole(1, cpu=6000), whole(2, cpu=8000), whole(8, cpu=16_000), cpu_only(12_000),
        PodShape(4000, 8192, 1, 1000, gpu_models=frozenset({"T4"})),
    ]  # fmt: skip
    policy = make_policy(name, shapes, rng)
    for _ in range(150):
        pod = shapes[rng.integers(len(shapes))]
        p = policy.choose(st, pod)
        assert (p is None) == (not st.fits(pod).any())
        if p is not None:
            assert st.fits(pod)[p.node]
            st.apply(pod, p)  # raises if the placement were invalid
    assert (st.gpu_free >= 0).all() and (st.cpu_free >= 0).all() and (st.mem_free >= 0).all()


def test_unknown_policy():
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("nope", [], np.random.default_rng(0))


def test_online_workload_counts_the_demand_that_names_models():
    model = OnlineWorkload(half_life=1e9)
    t4 = PodShape(4000, 8192, 1, 1000, gpu_models=frozenset({"T4"}))
    pair = PodShape(4000, 8192, 2, 1000, gpu_models=frozenset({"V100M16", "V100M32"}))
    for pod in (t4, pair, whole(1), share(500), cpu_only(8000)):
        model.observe(pod)
    # 4,500 milli-GPU in all: 1,000 may run only on T4, 2,000 on either V100 (half each).
    assert model.model_demand() == pytest.approx({"T4": 1000 / 4500, "V100M16": 1000 / 4500, "V100M32": 1000 / 4500})
    assert OnlineWorkload().model_demand() == {}


def test_claimed_is_demand_share_over_free_share():
    st = build_state(["a", "b", "c"], ["G2", "T4", "G2"], [8, 2, 8], [96_000] * 3, [393_216] * 3)
    free = st.gpu_free.sum(axis=1)  # 8,000 / 2,000 / 8,000: T4 holds 1/9 of the free GPU
    assert claimed(st, free, {"T4": 0.5}).tolist() == pytest.approx([0.0, 4.5])  # models: ("G2", "T4")
    assert not claimed(st, free, {}).any()
    assert typical_model_demand(typical_shapes([whole(1), PodShape(1000, 1024, 1, 1000, frozenset({"T4"}))])) == {
        "T4": 0.5
    }


def test_ours_leaves_a_model_in_demand_to_the_pods_that_need_it():
    # Two nodes alike but for the model. Pods naming T4 have been seen: a pod free to go anywhere goes to G2,
    # although with nothing named it would take the T4 node (the lower index wins ties).
    st = build_state(["t4", "g2"], ["T4", "G2"], [4, 4], [64_000, 64_000], [262_144, 262_144])
    t4 = PodShape(4000, 8192, 1, 1000, gpu_models=frozenset({"T4"}))
    free = whole(1, cpu=4000, mem=8192)
    assert BalancedFGD(typical_shapes([free] * 4)).choose(st, free) == Placement(0, (0,))
    ours = BalancedFGD(OnlineWorkload())
    for _ in range(3):
        ours.choose(st.copy(), t4)
    assert ours.choose(st, free) == Placement(1, (0,))
    assert BalancedFGD(OnlineWorkload(), scarce_weight=0.0).choose(st, free) == Placement(0, (0,))


def test_with_no_model_named_the_scarcity_term_changes_nothing():
    rng = np.random.default_rng(5)
    shapes = [share(m, cpu=c) for m in (250, 500, 810) for c in (2000, 8000)] + [whole(1), whole(2), cpu_only(9000)]
    st = build_state(["a", "b", "c"], ["G2", "T4", "P100"], [8, 2, 2], [96_000, 104_000, 16_000], [393_216] * 3)
    a, b = BalancedFGD(OnlineWorkload()), BalancedFGD(OnlineWorkload(), scarce_weight=0.0)
    for _ in range(40):
        pod = shapes[rng.integers(len(shapes))]
        p = a.choose(st, pod)
        assert p == b.choose(st, pod)
        if p is not None:
            st.apply(pod, p)
