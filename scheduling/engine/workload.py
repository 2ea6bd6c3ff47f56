"""A workload model learned online: the typical request shapes of recent arrivals.

FGD is handed the typical shapes of the whole trace in advance. A live scheduler has no such oracle,
so :class:`OnlineWorkload` counts the shapes of the requests it is offered, with exponential decay so
the model follows a workload that drifts, and re-derives the typical shapes now and then.
"""

from __future__ import annotations

from collections import defaultdict

from scheduling.engine.fragmentation import ShapeKey, TypicalShapes, shape_key, shapes_from_counts
from scheduling.engine.shapes import PodShape


class OnlineWorkload:
    """Decayed shape counts of observed requests.

    ``half_life`` is in requests. ``version`` changes whenever :meth:`typical` would answer differently
    enough to matter: after every ``refresh`` observations, and at 1, 2, 4, ... while the model is young.
    """

    def __init__(
        self, coverage: float = 0.95, with_memory: bool = False, half_life: float = 2000.0, refresh: int = 256
    ) -> None:
        self.coverage = coverage
        self.with_memory = with_memory
        self.refresh = refresh
        self._decay = 0.5 ** (1.0 / half_life)
        self._scale = 1.0  # counts are stored divided by the running decay, renormalised now and then
        self._counts: dict[ShapeKey, float] = defaultdict(float)
        self._gpu_milli = 0.0  # decayed GPU demand of every request, and of those that name models, per model
        self._model_milli: dict[str, float] = defaultdict(float)
        self.observed = 0
        self.version = 0
        self._cached: tuple[int, TypicalShapes] | None = None

    def observe(self, pod: PodShape) -> None:
        if pod.mig_profile is not None or pod.replica:
            return
        self._scale /= self._decay
        self._counts[shape_key(pod, self.with_memory)] += self._scale
        demand = pod.total_milli * self._scale
        self._gpu_milli += demand
        if pod.gpu_models and demand:
            for model in pod.gpu_models:
                self._model_milli[model] += demand / len(pod.gpu_models)
        if self._scale > 1e12:
            for k in self._counts:
                self._counts[k] /= self._scale
            for m in self._model_milli:
                self._model_milli[m] /= self._scale
            self._gpu_milli /= self._scale
            self._scale = 1.0
        self.observed += 1
        n = self.observed
        if n % self.refresh == 0 or (n < self.refresh and n & (n - 1) == 0):
            self.version += 1

    def model_demand(self) -> dict[str, float]:
        """Per GPU model, the share of recent GPU demand that may run only there (a request naming a set of
        models counts a part for each). Unconstrained requests count for no model."""
        total = self._gpu_milli
        return {m: v / total for m, v in sorted(self._model_milli.items())} if total else {}

    def typical(self) -> TypicalShapes:
        if self._cached is None or self._cached[0] != self.version:
            self._cached = (self.version, shapes_from_counts(dict(self._counts), self.coverage))
        return self._cached[1]
