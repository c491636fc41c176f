"""ExactSum's two routes (float extractions, exponent bins) against the exact rational sum."""
from fractions import Fraction
from functools import cache

import numpy as np
import pytest

from rfstream.io.ingest import ExactSum

TINY = float(np.nextafter(0.0, 1.0))  # 2**-1074
RNG = np.random.default_rng(7)
CASES = {
    "near 2**31": np.array([2.0**31 - 1, -(2.0**31 - 1), 2.0**31, -2.0**31, 2.0**31 - 0.5, 2.0**31 + 0.5, 3.0] * 9),
    "counts": RNG.integers(-2**31 + 1, 2**31, 5000).astype(np.float64),
    "big whole numbers": np.array([2.0**52, 2.0**53, -2.0**60, 2.0**62 + 2.0**10, 1.0, -3.0]),
    "negative zero": np.array([-0.0, 0.0, -0.0, 1.5, -1.5]),
    "subnormals": np.array([TINY, 3 * TINY, -TINY, 2.0**-1022, float(np.nextafter(2.0**-1022, 0.0)), 1e-310, -1e-320]),
    "subnormals and ones": np.array([TINY, 1.0, -TINY * 7, 2.0**-1000, -1.0]),
    "huge": np.array([np.finfo(np.float64).max, -np.finfo(np.float64).max, 1e308, 1e308, -1e300, 2.0**1023]),
    "rates of two digits": np.round(RNG.random(5000), 2),
    "wide range": np.concatenate([RNG.lognormal(0, 8, 3000), -RNG.lognormal(0, 8, 3000), [1e300, -1e300, TINY]]),
}


def exact(v: np.ndarray) -> int:
    """The sum times 2**1074: an integer for any float64 values."""
    return int(sum(Fraction(x) for x in v.tolist()) * 2**ExactSum.SHIFT)


@cache
def exact_of(name: str) -> int:
    return exact(CASES[name])


def summed(v: np.ndarray, step: int) -> ExactSum:
    s = ExactSum()
    for a in range(0, len(v), step):
        s.add(v[a:a + step])
    return s


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("levels", [0, 1, 3, 80])
def test_routes_give_the_exact_sum(name, levels, monkeypatch):
    """Bins only (0 levels), extractions then bins, extractions only (80 levels span any
    exponents): the same integer, the exact sum's, in any cut of the values."""
    monkeypatch.setattr(ExactSum, "LEVELS", levels)
    v = CASES[name]
    want = exact_of(name)
    for step in (len(v), 1, 7, 64, 1000):
        assert summed(v, step).value == want, (name, levels, step)


def test_counts_and_rates_need_no_bins():
    """The fast route ends in extractions alone on KDD-like columns (whole counts, fractions
    of two digits), and its remainder is exact where it does not."""
    for name in ("counts", "near 2**31", "rates of two digits", "negative zero"):
        s = ExactSum()
        assert s._extract(CASES[name]) is None, name
        assert s.value == exact(CASES[name])
    v = CASES["wide range"]
    s = ExactSum()
    rest = s._extract(v)
    assert rest is not None and rest is not v
    assert s.value + exact(rest) == exact(v)


def test_bins_in_batches(monkeypatch):
    monkeypatch.setattr(ExactSum, "LEVELS", 0)
    monkeypatch.setattr(ExactSum, "_BATCH", 5)
    v = CASES["wide range"]
    assert summed(v, len(v)).value == exact(v)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_refuses_what_is_not_finite(bad):
    s = ExactSum()
    with pytest.raises(ValueError, match="finite values only"):
        s.add(np.array([1.0, bad, 2.5]))
    assert s.value == 0
