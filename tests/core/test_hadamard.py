"""The fast Walsh-Hadamard transform against scipy's dense Hadamard matrix."""
import numpy as np
import pytest
import scipy.linalg

from rfstream.hadamard import (
    fwht,
    hadamard_blocks,
    is_power_of_two,
    kronecker_split,
    next_power_of_two,
)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 32, 256])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fwht_equals_scipy_hadamard(n, dtype):
    rng = np.random.default_rng(n)
    H = scipy.linalg.hadamard(n).astype(np.float64)
    a = rng.standard_normal((n, 5)).astype(dtype)
    tol = 1e-4 * np.sqrt(n) if dtype == np.float32 else 1e-10
    out = fwht(a, axis=0)
    assert out.dtype == dtype
    np.testing.assert_allclose(out, H @ a.astype(np.float64), atol=tol)
    b = rng.standard_normal((3, n)).astype(dtype)
    np.testing.assert_allclose(fwht(b), b.astype(np.float64) @ H.T, atol=tol)
    c = rng.standard_normal((2, n, 3)).astype(dtype)  # the middle axis (block SRHT layout)
    np.testing.assert_allclose(fwht(c, axis=1), np.einsum("ij,bjk->bik", H, c), atol=tol)


def test_fwht_in_place_involution_and_input_untouched():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 64))
    a0 = a.copy()
    b = fwht(a, axis=1)
    np.testing.assert_array_equal(a, a0)  # out of place by default
    fwht(b, axis=1, out=b)  # in place; H H = n I
    np.testing.assert_allclose(b / 64, a0, atol=1e-12)


def test_fwht_is_n_log_n_additions_not_a_matmul():
    # A dense 2^14 Hadamard matrix would be 2 GB in float64; the fast transform
    # needs only the vector.
    n = 2**14
    x = np.zeros(n)
    x[3] = 1.0
    y = fwht(x)
    assert np.all(np.abs(y) == 1.0) and y[0] == 1.0


def test_fwht_errors_and_helpers():
    with pytest.raises(ValueError, match="power-of-two length along axis 0; got 6"):
        fwht(np.ones((6, 2)), axis=0)
    with pytest.raises(ValueError, match="C-contiguous"):
        fwht(np.ones((4, 4)), out=np.ones((4, 2)))
    assert [next_power_of_two(n) for n in (1, 2, 3, 50, 64, 65)] == [1, 2, 4, 64, 64, 128]
    assert is_power_of_two(4096) and not is_power_of_two(0) and not is_power_of_two(12)


def test_fwht_cache_blocked_batches_equal_dense():
    # 40 vectors of 256 x 64 float64 (128 KiB each): transformed a few at a time.
    rng = np.random.default_rng(1)
    c = rng.standard_normal((40, 256, 64))
    H = scipy.linalg.hadamard(256).astype(np.float64)
    np.testing.assert_allclose(fwht(c, axis=1), np.einsum("ij,bjk->bik", H, c), atol=1e-9)
    d = c.copy()
    fwht(d, axis=1, out=d)
    np.testing.assert_allclose(d, np.einsum("ij,bjk->bik", H, c), atol=1e-9)


@pytest.mark.parametrize("n", [1, 2, 8, 32, 128, 512, 4096])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hadamard_blocks_equals_scipy_hadamard_per_block(n, dtype):
    a, b = kronecker_split(n)
    assert a * b == n and a <= b and is_power_of_two(a) and is_power_of_two(b)
    x = np.random.default_rng(n).standard_normal((3, n, 5)).astype(dtype)
    out = hadamard_blocks(x)
    assert out.dtype == dtype and out.shape == x.shape
    H = scipy.linalg.hadamard(n).astype(np.float64)
    expected = np.einsum("ij,kjd->kid", H, x.astype(np.float64))
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol * np.sqrt(n))


def test_hadamard_blocks_rejects_bad_shapes():
    with pytest.raises(ValueError, match="power of two"):
        hadamard_blocks(np.zeros((2, 12, 3)))
    with pytest.raises(ValueError, match=r"\(nblk, B, d\)"):
        hadamard_blocks(np.zeros((12, 3)))
