"""Kubernetes quantities: exact values, the API server's canonical text, and its rounding."""

from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduling.simcluster.quantity import (
    FORMAT_ERROR,
    QuantityError,
    QuantityLike,
    bytes_,
    canonical,
    cpu_millis,
    is_integer_quantity,
    parse,
    value,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Fraction(1, 2)),
        ("2", 2),
        ("64Gi", 64 * 2**30),
        ("1e3", 1000),
        ("1E3", 1000),
        ("1.5", Fraction(3, 2)),
        ("100M", 100_000_000),
        ("1E", 10**18),
        (".5", Fraction(1, 2)),
        ("5.", 5),
        ("-1", -1),
        ("+2k", 2000),
        ("250u", Fraction(1, 4000)),
        (1, 1),
        (0.5, Fraction(1, 2)),
    ],
)
def test_value(text: QuantityLike, expected: Fraction | int) -> None:
    assert value(text) == expected


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("0.5", "500m"),
        ("1.5", "1500m"),
        ("2000m", "2"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("100M", "100M"),
        ("1e3", "1e3"),
        ("1500e0", "1500"),
        ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"),
        ("0.5Gi", "512Mi"),
        ("0.5Ki", "512"),
        ("1.5Ki", "1536"),
        ("0.1n", "1n"),  # finer than a nano rounds up
        ("1.0001", "1000100u"),
        ("0", "0"),
        (8, "8"),
    ],
)
def test_canonical(text: QuantityLike, shown: str) -> None:
    assert canonical(text) == shown


def test_unit_helpers_round_up_like_apimachinery() -> None:
    assert cpu_millis("1.5") == 1500
    assert cpu_millis("0.0001") == 1
    assert bytes_("1Ki") == 1024
    assert bytes_("0.5") == 1
    assert parse("64Gi") == (Fraction(64 * 2**30), "BinarySI")


@pytest.mark.parametrize(
    ("text", "integer"), [("0.5", False), ("1", True), ("1000m", True), ("1e3", True), ("1001m", False)]
)
def test_is_integer_quantity(text: str, integer: bool) -> None:
    assert is_integer_quantity(text) is integer


@pytest.mark.parametrize("text", ["abc", "", "1.5.5x", "--1", "Gi"])
def test_malformed(text: str) -> None:
    with pytest.raises(QuantityError):
        value(text)


def test_malformed_messages() -> None:
    with pytest.raises(QuantityError, match=f"^{re.escape(FORMAT_ERROR)}$"):
        value("abc")
    with pytest.raises(QuantityError, match=r"^unable to parse quantity's suffix$"):
        value("1x")
    with pytest.raises(QuantityError):
        value(True)


_SUFFIXES = ["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e6"]


@given(
    mantissa=st.integers(min_value=0, max_value=10**7), fraction=st.integers(0, 999), suffix=st.sampled_from(_SUFFIXES)
)
def test_canonical_text_keeps_the_value(mantissa: int, fraction: int, suffix: str) -> None:
    text = f"{mantissa}.{fraction:03d}{suffix}"
    shown = canonical(text)
    assert value(shown) == value(text)
    assert canonical(shown) == shown
