"""MIG slot geometry as lookup tables, built on the catalogue in ``gpus.py``.

One GPU's MIG occupancy is a small integer code: bits 0-7 mark used memory slices, bit 8 is set while a
``+me`` instance exists (only one is allowed), bits 9-12 count used compute slices (at most 7). Every
rule of facts doc 3.2 is a property of that code, so "may profile P start at slice S on this GPU?" and
"what code results?" are table lookups, vectorisable over all GPUs of a cluster at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt

from scheduling.engine import gpus

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

_ME_BIT = 1 << gpus.MEMORY_SLICES
_COMPUTE_SHIFT = gpus.MEMORY_SLICES + 1
N_CODES = 1 << (_COMPUTE_SHIFT + 4)
FULL_MASK = (1 << gpus.MEMORY_SLICES) - 1
MEMORY_SLOTS = gpus.MEMORY_SLICES


def used_slices(code: int) -> int:
    return (code & FULL_MASK).bit_count()


def compute_used(code: int) -> int:
    return code >> _COMPUTE_SHIFT


@dataclass(frozen=True)
class Option:
    """One profile at one start slice."""

    profile: str
    start: int
    bits: int  # memory slices it occupies
    compute: int
    me: bool


@dataclass(frozen=True)
class MigGeometry:
    """The slot tables of one MIG-capable GPU model.

    ``next_code[code, k]`` is the code after adding ``options[k]`` to a GPU in state ``code``, or -1 if
    NVIDIA forbids it. ``by_profile`` lists the option indices of each profile.
    """

    model: str
    options: tuple[Option, ...]
    by_profile: dict[str, tuple[int, ...]]
    next_code: I64  # (N_CODES, len(options))
    compute_slices: dict[str, int]

    def add(self, code: int, profile: str, start: int) -> int | None:
        """The code after adding ``profile`` at ``start``; ``None`` if the hardware would refuse it."""
        for k in self.by_profile.get(profile, ()):
            if self.options[k].start == start:
                new = int(self.next_code[code, k]) if code >= 0 else -1
                return new if new >= 0 else None
        return None

    def remove(self, code: int, profile: str, start: int) -> int | None:
        """The code after deleting that instance; ``None`` if the slots it names are not in use."""
        for k in self.by_profile.get(profile, ()):
            o = self.options[k]
            if o.start != start:
                continue
            if code < 0 or code & o.bits != o.bits or (o.me and not code & _ME_BIT):
                return None
            if compute_used(code) < o.compute:
                return None
            new = (code & ~o.bits) - (o.compute << _COMPUTE_SHIFT)
            return new & ~_ME_BIT if o.me else new
        return None


def _transition(code: int, o: Option) -> int:
    if code & o.bits or (o.me and code & _ME_BIT):
        return -1
    compute = compute_used(code) + o.compute
    if compute > gpus.COMPUTE_SLICES:
        return -1
    return (code | o.bits | (_ME_BIT if o.me else 0)) + (o.compute << _COMPUTE_SHIFT)


@cache
def geometry_for(model: str) -> MigGeometry:
    """Tables for a catalogue model (any name ``gpus.get_model`` resolves); raises for non-MIG parts."""
    m = gpus.get_model(model)
    if not m.mig_capable:
        raise gpus.MigNotSupported(f"{m.key} does not support MIG")
    options: list[Option] = []
    by_profile: dict[str, tuple[int, ...]] = {}
    for p in m.mig_profiles:
        ks = []
        for s in p.starts:
            bits = ((1 << p.memory_slices) - 1) << s
            ks.append(len(options))
            options.append(Option(p.name, s, bits, p.compute_slices, p.media_extensions))
        by_profile[p.name] = tuple(ks)
    table = np.full((N_CODES, len(options)), -1, dtype=np.int64)
    for code in range(N_CODES):
        if compute_used(code) > gpus.COMPUTE_SLICES:
            continue
        for k, o in enumerate(options):
            table[code, k] = _transition(code, o)
    table.setflags(write=False)
    return MigGeometry(
        model=m.key,
        options=tuple(options),
        by_profile=by_profile,
        next_code=table,
        compute_slices={p.name: p.compute_slices for p in m.mig_profiles},
    )


def smallest_profile(model: str, gpu_milli: int) -> str:
    """The smallest plain profile whose compute share covers ``gpu_milli`` of one GPU.

    Ties on compute (``1g`` vs ``1g`` with 2 memory slices) go to the fewer memory slices; ``+me``
    profiles are never chosen, since they exist for media work, not size.
    """
    ps = [p for p in gpus.mig_profiles(model) if not p.media_extensions]
    fitting = [p for p in ps if p.compute_slices * 1000 >= gpu_milli * gpus.COMPUTE_SLICES]
    return min(fitting, key=lambda p: (p.compute_slices, p.memory_slices)).name


def _cover(geo: MigGeometry, profile: str) -> I64:
    return _cover_of(geo.model, profile)


@cache
def _cover_of(model: str, profile: str) -> I64:
    """Per code: the memory slices some valid placement of ``profile`` would occupy."""
    geo = geometry_for(model)
    cover = np.zeros(N_CODES, dtype=np.int64)
    for k in geo.by_profile.get(profile, ()):
        cover |= np.where(geo.next_code[:, k] >= 0, geo.options[k].bits, 0)
    cover.setflags(write=False)
    return cover


def _free(codes: I64) -> I64:
    return (~codes) & FULL_MASK


def unusable_slices(geo: MigGeometry, weights: Mapping[str, float]) -> F64:
    """Fragmentation of every code: free memory slices a typical profile could not use, weighted.

    For each profile ``p`` with weight ``w``, a free slice counts ``w`` if no valid placement of ``p`` on
    the GPU as it stands covers it. This is the MIG analogue of FGD's measure: a slice no common
    request can use is stranded.
    """
    codes = np.arange(N_CODES, dtype=np.int64)
    out = np.zeros(N_CODES, dtype=np.float64)
    for profile, w in weights.items():
        out += w * popcount(_free(codes) & ~_cover(geo, profile))
    out[(codes >> _COMPUTE_SHIFT) > gpus.COMPUTE_SLICES] = 0.0
    return out


def stranded_by_any(geo: MigGeometry, profiles: Iterable[str]) -> I64:
    """Per code: free memory slices that no placement of any of ``profiles`` could use."""
    codes = np.arange(N_CODES, dtype=np.int64)
    cover = np.zeros(N_CODES, dtype=np.int64)
    for p in profiles:
        cover |= _cover(geo, p)
    return popcount(_free(codes) & ~cover)


def popcount(x: I64) -> I64:
    """Set bits among the memory-slice bits of each code."""
    return np.asarray(np.bitwise_count((x & FULL_MASK).astype(np.uint64)), dtype=np.int64)
