"""The rate card as the ledger reads it: the price of a shape at an instant, and when prices change. Pure.

One price per GPU model (``shape`` empty) sets every shape of it: a unit costs its GPU-equivalents times
the model's price, so a MIG 1g.10gb slice of an A100 costs a seventh of the GPU and one of four time-sliced
replicas a quarter. A shape's own entry, where finance sets one, wins over the derived price.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

MODEL_PRICE = ""  # the shape key of a model's per-GPU price


def shape_key(kind: str, mig_profile: str = "", replicas: int = 1) -> str:
    """``whole``, ``mig-1g.10gb``, ``shared-4`` (one of four replicas), ``mps-4`` (one of four MPS clients),
    ``cpu``."""
    if kind == "mig":
        return f"mig-{mig_profile}"
    if kind in ("shared", "mps"):
        return f"{kind}-{replicas}"
    return kind


@dataclass(frozen=True)
class Price:
    gpu_model: str
    shape: str
    hourly_price: Decimal
    effective_from: datetime


class RateCard:
    """Prices by (model, shape), each a timeline sorted by effective time."""

    def __init__(self, prices: Iterable[Price]) -> None:
        timelines: dict[tuple[str, str], list[Price]] = defaultdict(list)
        for price in prices:
            timelines[(price.gpu_model, price.shape)].append(price)
        self._timelines = {key: sorted(line, key=lambda p: p.effective_from) for key, line in timelines.items()}
        self._starts = {key: [p.effective_from for p in line] for key, line in self._timelines.items()}

    def _at(self, gpu_model: str, shape: str, at: datetime) -> Decimal | None:
        starts = self._starts.get((gpu_model, shape))
        if not starts:
            return None
        index = bisect.bisect_right(starts, at) - 1
        return self._timelines[(gpu_model, shape)][index].hourly_price if index >= 0 else None

    def own_price(self, gpu_model: str, shape: str, at: datetime) -> Decimal | None:
        """The shape's own price (not derived from the model's), if finance set one."""
        return self._at(gpu_model, shape, at)

    def model_price(self, gpu_model: str, at: datetime) -> Decimal | None:
        """One whole GPU of the model for an hour; None when no price is set yet."""
        return self._at(gpu_model, MODEL_PRICE, at)

    def unit_price(self, gpu_model: str, shape: str, gpu_equivalents: Decimal, at: datetime) -> Decimal | None:
        """One unit of the shape (one GPU, one slice, one replica) for an hour."""
        own = self._at(gpu_model, shape, at)
        if own is not None:
            return own
        base = self.model_price(gpu_model, at)
        return None if base is None else base * gpu_equivalents

    def changes(self, gpu_model: str, shape: str, after: datetime, upto: datetime) -> list[datetime]:
        """When the price of the shape may change within (after, upto]: its own entries and the model's."""
        found: list[datetime] = []
        for key in ((gpu_model, MODEL_PRICE), (gpu_model, shape)):
            found.extend(t for t in self._starts.get(key, ()) if after < t <= upto)
        return sorted(set(found))

    def latest_change(self, upto: datetime) -> datetime | None:
        """The last effective time at or before ``upto`` of any entry."""
        latest = [starts[i - 1] for starts in self._starts.values() if (i := bisect.bisect_right(starts, upto))]
        return max(latest, default=None)
