"""Kubernetes resource quantities ("500m", "2", "64Gi", "1e3") as exact fractions.

Follows apimachinery's `resource.Quantity`: a number, then a binary-SI (Ki..Ei), decimal-SI
(n, u, m, "", k..E) or decimal-exponent (e3) suffix; values finer than a nano are rounded up, and
the canonical string keeps the suffix family the value was written in.
"""

from __future__ import annotations

import functools
import math
import re
from fractions import Fraction
from typing import Literal

QuantityLike = str | int | float
Format = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

# The API server's own wording for a malformed quantity (apimachinery ErrFormatWrong).
FORMAT_ERROR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"

_NUMBER = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(.*)$")
_EXPONENT = re.compile(r"^[eE]([+-]?\d+)$")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {exp: suffix for suffix, exp in _DECIMAL.items()}
_NANO = 10**9


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity (the server answers 400 with this message)."""


# Remembered: the scheduler, the kubelets and validation parse the same few strings ("8Gi", "2000m") for every
# pod, and parsing into exact fractions was a fifth of the simulated cluster's CPU under load. Typed, so that
# True (refused) and 1 are never taken for each other; the answers are immutable.
@functools.lru_cache(maxsize=4096, typed=True)
def parse(q: QuantityLike) -> tuple[Fraction, Format]:
    """Value and suffix family of a quantity; JSON numbers (YAML `gpu: 1`) count as decimal SI."""
    if isinstance(q, bool):
        raise QuantityError(FORMAT_ERROR)
    if isinstance(q, int | float):
        return _round_up_to_nano(Fraction(repr(q))), "DecimalSI"
    match = _NUMBER.match(q.strip())
    if match is None:
        raise QuantityError(FORMAT_ERROR)
    sign, digits, suffix = match.groups()
    number = Fraction(digits) * (-1 if sign == "-" else 1)
    if suffix in _BINARY:
        return _round_up_to_nano(number * 2 ** _BINARY[suffix]), "BinarySI"
    if suffix in _DECIMAL:
        return _round_up_to_nano(number * Fraction(10) ** _DECIMAL[suffix]), "DecimalSI"
    exponent = _EXPONENT.match(suffix)
    if exponent is None:
        raise QuantityError("unable to parse quantity's suffix")
    return _round_up_to_nano(number * Fraction(10) ** int(exponent.group(1))), "DecimalExponent"


def value(q: QuantityLike) -> Fraction:
    """The exact value of a quantity."""
    return parse(q)[0]


def cpu_millis(q: QuantityLike) -> int:
    """Quantity.MilliValue(): thousandths, rounded up (how the scheduler counts CPU)."""
    return math.ceil(value(q) * 1000)


def bytes_(q: QuantityLike) -> int:
    """Quantity.Value(): whole units, rounded up (bytes for memory, devices for extended resources)."""
    return math.ceil(value(q))


def is_integer_quantity(q: QuantityLike) -> bool:
    """The API server's integer test for extended resources: MilliValue() % 1000 == 0."""
    return cpu_millis(q) % 1000 == 0


@functools.lru_cache(maxsize=4096, typed=True)
def canonical(q: QuantityLike) -> str:
    """The string the API server echoes back: "0.5" -> "500m", "1024Mi" -> "1Gi", "1.5" -> "1500m"."""
    number, fmt = parse(q)
    return format_quantity(number, fmt)


def format_quantity(number: Fraction | int, fmt: Format = "DecimalSI") -> str:
    """Canonical text of a value: the largest suffix that keeps the mantissa an integer."""
    number = _round_up_to_nano(Fraction(number))
    if fmt == "BinarySI" and abs(number) >= 1024 and number.denominator == 1:
        whole = int(number)
        for suffix, shift in reversed(_BINARY.items()):
            if whole % (1 << shift) == 0:
                return f"{whole >> shift}{suffix}"
    nanos = int(number * _NANO)
    if nanos == 0:
        return "0"
    exponent = -9
    while exponent < 18 and nanos % 10 ** (exponent + 12) == 0:
        exponent += 3
    mantissa = nanos // 10 ** (exponent + 9)
    if fmt == "DecimalExponent":
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def _round_up_to_nano(number: Fraction) -> Fraction:
    # Quantities carry at most nano precision; apimachinery rounds anything finer up.
    return Fraction(math.ceil(number * _NANO), _NANO)
