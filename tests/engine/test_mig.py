"""MIG placement never produces a layout NVIDIA forbids (checked against ``gpus.validate_layout``)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.engine import gpus, mig
from scheduling.engine.mig_placement import MigPlacer, mig_fragmentation
from scheduling.engine.shapes import Placement, PodShape
from scheduling.engine.state import MIG, build_state

MODELS = ["A100-SXM4-40GB", "A100-SXM4-80GB", "H100-80GB-HBM3", "H200-141GB"]


def _request(profile: str, k: int = 1) -> PodShape:
    return PodShape(1000, 1024, k, 1000 if k > 1 else 100, mig_profile=profile)


def _layouts(placed: list[tuple[PodShape, Placement]]) -> dict[tuple[int, int], list[tuple[str, int]]]:
    """Per (node, GPU): the (profile, start) instances placed there."""
    out: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for pod, p in placed:
        assert pod.mig_profile is not None and p.mig_start is not None
        for g in p.gpus:
            out.setdefault((p.node, g), []).append((pod.mig_profile, p.mig_start))
    return out


@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_request_sequences_stay_valid(model, data):
    profiles = [p.name for p in gpus.mig_profiles(model)]
    single_start = [p.name for p in gpus.mig_profiles(model) if len(p.starts) == 1]
    state = build_state(["a", "b"], [model, model], [2, 1], [10**6] * 2, [10**7] * 2, modes=[MIG, MIG])
    placer = MigPlacer()
    placed: list[tuple[PodShape, Placement]] = []
    for _ in range(data.draw(st.integers(1, 20))):
        profile = data.draw(st.sampled_from(profiles))
        k = data.draw(st.integers(1, 2)) if profile in single_start else 1
        pod = _request(profile, k)
        p = placer.choose(state, pod)
        if p is None:
            # Nothing fits: no GPU of either node accepts the profile at any start.
            for n in range(2):
                for g in range(int(state.gpu_count[n])):
                    layout = _layouts(placed).get((n, g), [])
                    assert k > 1 or not gpus.free_placements(model, layout, profile)
            continue
        state.apply(pod, p)
        placed.append((pod, p))
        for layout in _layouts(placed).values():
            gpus.validate_layout(model, layout)  # raises InvalidMigLayout if NVIDIA would refuse it


@pytest.mark.parametrize("model", MODELS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_slot_table_agrees_with_validate_layout(model, data):
    geo = mig.geometry_for(model)
    code: int | None = 0
    layout: list[tuple[str, int]] = []
    for _ in range(data.draw(st.integers(1, 8))):
        opt = data.draw(st.sampled_from(geo.options))
        assert code is not None
        new = geo.add(code, opt.profile, opt.start)
        try:
            gpus.validate_layout(model, [*layout, (opt.profile, opt.start)])
            allowed = True
        except gpus.InvalidMigLayout:
            allowed = False
        assert (new is not None) == allowed
        if new is not None:
            code, layout = new, [*layout, (opt.profile, opt.start)]
    for profile, start in layout:  # removing every instance returns to an empty GPU
        assert code is not None
        code = geo.remove(code, profile, start)
        assert code is not None
    assert code == 0


@pytest.mark.parametrize("model", MODELS)
def test_named_configs_fit_the_tables(model):
    geo = mig.geometry_for(model)
    for name in gpus.named_config_names(model):
        code: int | None = 0
        for profile, start in gpus.named_layout(model, name) or []:
            assert code is not None
            code = geo.add(code, profile, start)
            assert code is not None, (name, profile, start)


def test_forbidden_layouts_are_refused():
    geo = mig.geometry_for("A100-SXM4-80GB")
    three = geo.add(0, "3g.40gb", 0)
    assert three is not None
    code = geo.add(three, "3g.40gb", 4)
    assert code is not None and geo.add(code, "1g.10gb", 6) is None  # 3g+3g+1g: no memory slice left
    four = geo.add(0, "4g.40gb", 0)
    assert four is not None and geo.add(four, "4g.40gb", 0) is None
    assert geo.add(0, "1g.10gb", 7) is None  # never at slice 7
    me = geo.add(0, "1g.10gb+me", 0)
    assert me is not None and geo.add(me, "1g.10gb+me", 1) is None  # one +me per GPU


def test_smallest_profile_covers_the_share():
    assert mig.smallest_profile("A100-SXM4-80GB", 50) == "1g.10gb"
    assert mig.smallest_profile("A100-SXM4-80GB", 143) == "2g.20gb"  # 1/7 is 142.9 milli
    assert mig.smallest_profile("A100-SXM4-80GB", 460) == "4g.40gb"
    assert mig.smallest_profile("A100-SXM4-40GB", 1000) == "7g.40gb"


def test_placer_packs_and_keeps_big_slots_open():
    state = build_state(["a"], ["A100-SXM4-80GB"], [2], [10**6], [10**7], modes=[MIG])
    placer = MigPlacer({"1g.10gb": 0.5, "3g.40gb": 0.5})
    first = placer.choose(state, _request("1g.10gb"))
    assert first is not None and first.mig_start is not None
    state.apply(_request("1g.10gb"), first)
    second = placer.choose(state, _request("1g.10gb"))
    assert second is not None and second.gpus == first.gpus  # packs onto the GPU already in use
    state.apply(_request("1g.10gb"), second)
    # Both 1g instances leave a 3g start free on that GPU, so a 3g fits beside them.
    assert placer.choose(state, _request("3g.40gb")) == Placement(0, first.gpus, 4 if first.mig_start < 4 else 0)


def test_whole_gpu_instances_on_distinct_gpus():
    state = build_state(["a"], ["H100-80GB-HBM3"], [4], [10**6], [10**7], modes=[MIG])
    pod = _request("7g.80gb", 3)
    p = MigPlacer().choose(state, pod)
    assert p == Placement(0, (0, 1, 2), 0)
    state.apply(pod, p)
    assert MigPlacer().choose(state, _request("7g.80gb", 2)) is None
    with pytest.raises(ValueError):
        MigPlacer().choose(state, _request("1g.10gb", 2))


def test_mig_fragmentation_by_hand():
    state = build_state(["a"], ["A100-SXM4-80GB"], [1], [10**6], [10**7], modes=[MIG])
    for profile, start in [("4g.40gb", 0), ("1g.10gb", 4), ("1g.10gb", 6)]:
        state.apply(_request(profile), Placement(0, (0,), start))
    # Free slices 5 and 7: a 1g fits at 5; nothing can start at or cover 7 any more.
    assert mig_fragmentation(state) == pytest.approx(50.0)
    assert np.isclose(mig_fragmentation(state, {"2g.20gb": 1.0}), 100.0)
