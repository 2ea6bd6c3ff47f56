"""Placement policies behind one interface (:class:`Policy`) and a registry by name.

Every factory gets the workload the policy may learn from (the pod shapes of the trace, as FGD's typical
pods come from it) and a seeded random generator for policies that break ties by chance.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from scheduling.engine.fragmentation import typical_shapes
from scheduling.engine.policies.balanced import BalancedFGD
from scheduling.engine.policies.base import Policy
from scheduling.engine.policies.fgd import FGD
from scheduling.engine.policies.simple import BestFit, FirstFit
from scheduling.engine.shapes import PodShape
from scheduling.engine.workload import OnlineWorkload

Factory = Callable[[Sequence[PodShape], np.random.Generator], Policy]


def _ours(pods: Sequence[PodShape], rng: np.random.Generator) -> Policy:
    # Learns the workload from the requests it sees; it is not given the trace's shapes as FGD is.
    return BalancedFGD(OnlineWorkload(with_memory=True))


POLICIES: dict[str, Factory] = {
    "firstfit": lambda pods, rng: FirstFit(),
    "bestfit": lambda pods, rng: BestFit(rng),
    "fgd": lambda pods, rng: FGD(typical_shapes(pods)),
    "ours": _ours,
}


def make_policy(name: str, pods: Sequence[PodShape], rng: np.random.Generator) -> Policy:
    """A fresh policy; ``pods`` is the workload it may learn typical shapes from."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(POLICIES)}") from None
    return factory(pods, rng)


__all__ = ["POLICIES", "Policy", "make_policy"]
