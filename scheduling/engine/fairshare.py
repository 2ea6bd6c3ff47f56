"""Time-decayed usage, the fair-share input of queue ordering.

A team's decayed usage is an exponentially weighted average of the units it held, with a half-life:
what it used a half-life ago counts half as much as what it uses now (Kueue's admission fair sharing and
KAI's time-based fairshare work the same way). Share = decayed usage / guaranteed units, so a team that
has been using little of its guarantee goes before one that has been using a lot, at equal priority.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeVar

K = TypeVar("K")


def decay(previous: float, held: float, elapsed: float, half_life: float) -> float:
    """Average after holding ``held`` units for ``elapsed`` seconds, starting from ``previous``."""
    if half_life <= 0:
        return held
    keep = math.pow(0.5, elapsed / half_life)
    return previous * keep + held * (1.0 - keep)


def decay_all(previous: Mapping[K, float], held: Mapping[K, float], elapsed: float, half_life: float) -> dict[K, float]:
    """:func:`decay` for every key of either mapping; keys that have decayed to nothing are dropped."""
    out: dict[K, float] = {}
    for key in previous.keys() | held.keys():
        value = decay(previous.get(key, 0.0), held.get(key, 0.0), elapsed, half_life)
        if value > 1e-9:
            out[key] = value
    return out


def share(usage: float, guaranteed: int) -> float:
    """Usage relative to guarantee; a team with no guarantee ranks after every team with one."""
    if guaranteed > 0:
        return usage / guaranteed
    return math.inf if usage > 0 else 1e18
