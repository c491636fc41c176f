"""Random binning features (Rahimi & Recht 2007, Section 4, Algorithm 2), sparse output.

Departs from the paper: the integer bin vector of grid ``p`` is hashed (a seeded multilinear
hash and the SplitMix64 finalizer, Steele, Lea & Flood 2014) into one of ``n_bins`` columns
instead of numbering the occupied bins, so a row's features depend on the row and the drawn
parameters only and the width ``n_grids * n_bins`` is known in ``fit``.  The hash, its
collision bound and the measurements: docs/binning.md, "Bin identities".
"""
from __future__ import annotations

import copy
import math
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval

from ..kernels import auto_gamma
from .base import GAMMA_CONSTRAINT, FeatureMap
from .fourier import FOURIER_PARAMETERS, RandomFourierFeatures
from .grid import GammaGridMixin, gamma_items, needs_auto, resolve_items

_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
#: Rows per sub-block inside ``_block``: bounds the (rows, d) float64 temporaries.
_SUB_ROWS = 8192
#: Bin numbers are clipped to this magnitude before the cast to int64.
_BIN_LIMIT = 2.0**62


def splitmix64(z):
    """SplitMix64 finalizer of a uint64 array (a bijection that spreads every bit)."""
    z = np.asarray(z, dtype=np.uint64)
    z = z ^ (z >> np.uint64(30))
    z = z * _MIX1
    z = z ^ (z >> np.uint64(27))
    z = z * _MIX2
    return z ^ (z >> np.uint64(31))


class RandomBinningFeatures(GammaGridMixin, FeatureMap):
    r"""Random binning features for the Laplacian kernel, sparse.

    ``z(x)' z(y)`` is an unbiased estimate (up to hashing collisions, see
    below) of the Laplacian kernel ``k(x, y) = exp(-gamma ||x - y||_1)``
    (Rahimi & Recht 2007, Section 4, Algorithm 2).  Each of the ``P =
    n_grids`` grids has, in every input dimension ``m``, a pitch ``delta_m``
    drawn from ``p(delta) = delta k_m''(delta)`` (Lemma 1), here the
    Gamma(shape 2, scale ``1/gamma``) density, and a shift ``u_m ~
    U[0, delta_m]``.  Two points fall in the same bin of a grid with
    probability ``prod_m max(0, 1 - |x_m - y_m| / delta_m)`` given the
    pitches, i.e. ``k(x, y)`` on average.  A point's feature vector has one
    non-zero, ``sqrt(1/P)``, per grid, in the column of its bin.

    The paper numbers occupied bins ("eliminates unoccupied bins"), which needs
    a vocabulary built from the data.  Instead the integer bin vector
    ``floor((x - u) / delta)`` is hashed (docs/binning.md: seeded
    multilinear hash + SplitMix64) into ``n_bins`` columns per grid.  This is
    a deviation with two reasons: the map stays a pure function of the row
    (the same result on every chunking and worker, no extra pass, no
    dictionary that grows with n), and the output width ``n_grids *
    n_bins`` is fixed, which the solvers need.  Distinct bins that share a
    column (probability about ``1/n_bins`` per pair) add at most
    ``(1 - k) / n_bins`` to ``E[z(x)' z(y)]``.

    Parameters
    ----------
    n_grids : int, default=50
        Number of random grids ``P``.  The estimate's variance is
        ``k (1 - k) / P`` (plus collisions).
    n_bins : int, default=64
        Hashed columns per grid; the output has ``n_grids * n_bins`` columns.
        Larger values mean fewer collisions (finer memorization) but a wider
        feature space for the solver.
    gamma : float > 0 or "auto", default=1.0
        Inverse length scale of the Laplacian kernel
        ``exp(-gamma ||x - y||_1)`` (same convention as
        ``sklearn.metrics.pairwise.laplacian_kernel``).  "auto": ``1 / sigma``
        with ``sigma`` the mean L1 distance to the 50th nearest neighbour among
        1000 sampled rows (:func:`rfstream.kernels.auto_gamma`); "auto*F": F
        times that.  A list: a bandwidth grid, pitches and shifts drawn once and
        scaled by ``1 / gamma`` (as :class:`~rfstream.RandomFourierFeatures`).
    random_state : int, numpy Generator, RandomState or None, default=None
        Seed of the pitches, shifts and hash parameters, all drawn in ``fit``.
    dtype : {"float32", "float64"}, default="float32"
        Dtype of the output values.  Bin numbers are always computed in float64.

    Attributes
    ----------
    gamma_ : float
    pitches_ : ndarray of shape (n_grids, n_features_in_)
        Grid pitches ``delta``, float64.
    offsets_ : ndarray of shape (n_grids, n_features_in_)
        Grid shifts ``u``, float64, ``0 <= u < delta``.
    hash_multipliers_ : ndarray of shape (n_grids, n_features_in_), uint64
    hash_salts_ : ndarray of shape (n_grids,), uint64
    n_features_in_ : int

    Notes
    -----
    ``transform`` returns a ``scipy.sparse.csr_matrix`` for numpy/sparse input
    and, for a dask array, a lazy dask array whose blocks are CSR matrices (one
    per row block).  Only the Laplacian kernel (and other separable kernels
    whose ``delta k''(delta)`` is a density, not implemented) admits random
    binning: the Gaussian's second derivative changes sign.

    References
    ----------
    A. Rahimi and B. Recht, "Random Features for Large-Scale Kernel Machines",
    NIPS 2007, Section 4 and Algorithm 2.  G. L. Steele, D. Lea and C. H.
    Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014
    (the SplitMix64 finalizer).

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream.features import RandomBinningFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> Z = RandomBinningFeatures(n_grids=8, n_bins=16, random_state=0).fit_transform(X)
    >>> Z.shape, Z.nnz, Z.dtype
    ((5, 128), 40, dtype('float32'))
    """

    _parameter_constraints: dict = {
        **FeatureMap._parameter_constraints,
        "n_grids": [Interval(Integral, 1, None, closed="left")],
        "n_bins": [Interval(Integral, 1, 2**31 - 1, closed="both")],
        "gamma": GAMMA_CONSTRAINT,
    }
    #: The kernel is fixed (read by ``gamma="auto"``); not a parameter.
    kernel = "laplacian"
    _sparse_output = True
    _prefix_refusal = ("it has no n_components (its width is n_grids x n_bins, hashed per grid); "
                       "fit one map per n_grids")

    def __init__(self, n_grids=50, *, n_bins=64, gamma=1.0, random_state=None, dtype="float32"):
        self.n_grids = n_grids
        self.n_bins = n_bins
        self.gamma = gamma
        self.random_state = random_state
        self.dtype = dtype

    def _check_params(self, n_features):
        if self.n_grids * self.n_bins >= 2**62:
            raise ValueError(
                f"n_grids * n_bins must be < 2**62 (the column index); got "
                f"{self.n_grids} * {self.n_bins}. Lower n_bins."
            )

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`): per
        grid, a pitch, an offset and a hash multiplier of each input column, and a salt."""
        d = view.int("n_features_in_")
        shape = view.array("pitches_")
        if len(shape) != 2 or shape[1] != d:
            view.fail(f"pitches_ has shape {shape}, not (n_grids, {d})")
        view.array("offsets_", shape)
        view.array("hash_multipliers_", shape, kinds="u", finite=False)
        view.array("hash_salts_", shape[:1], kinds="u", finite=False)

    def _draw(self, rng, n_features):
        """Pitches and shifts drawn for ``gamma = 1`` (kept) and scaled by ``1 / gamma_``:
        one draw serves every gamma of a grid (:meth:`at_gamma`)."""
        shape = (self.n_grids, n_features)
        self._unit_pitches = rng.gamma(2.0, 1.0, size=shape)
        self._unit_shifts = rng.uniform(0.0, 1.0, size=shape)
        self.pitches_, self.offsets_ = self._scaled_grids(self.gamma_)
        ints = rng.integers(0, 2**63, size=(self.n_grids, n_features + 1), dtype=np.uint64)
        self.hash_multipliers_ = (ints[:, :-1] << np.uint64(1)) | np.uint64(1)  # odd
        self.hash_salts_ = ints[:, -1].copy()

    def _scaled_grids(self, gamma):
        pitches = (1.0 / gamma) * self._unit_pitches  # = rng.gamma(2, 1 / gamma), bit for bit
        return pitches, self._unit_shifts * pitches

    def at_gamma(self, gamma):
        """A copy of this fitted map with bandwidth ``gamma``: the same draw, scaled."""
        twin = copy.copy(self)
        twin.gamma_ = float(gamma)
        twin.pitches_, twin.offsets_ = self._scaled_grids(gamma)
        return twin

    @property
    def _n_features_out(self):
        return self.pitches_.shape[0] * self.n_bins

    def bin_keys(self, x):
        """64-bit keys of the bins that hold each row, one column per grid.

        Two rows share grid ``p``'s bin exactly when (up to a 64-bit hash
        collision) their keys in column ``p`` are equal; the feature column is
        ``p * n_bins + key mod n_bins``.

        Parameters
        ----------
        x : ndarray or sparse matrix of shape (rows, n_features_in_)

        Returns
        -------
        keys : ndarray of shape (rows, n_grids), uint64
        """
        x = x.toarray() if sp.issparse(x) else np.asarray(x)
        x = x.astype(np.float64, copy=False)
        keys = np.empty((x.shape[0], self.pitches_.shape[0]), dtype=np.uint64)
        inv = 1.0 / self.pitches_
        shift = self.offsets_ * inv
        for p in range(self.pitches_.shape[0]):
            for start in range(0, x.shape[0], _SUB_ROWS):
                xs = x[start : start + _SUB_ROWS]
                t = xs * inv[p]
                t -= shift[p]
                np.floor(t, out=t)
                np.clip(t, -_BIN_LIMIT, _BIN_LIMIT, out=t)
                bins = t.astype(np.int64).view(np.uint64)
                keys[start : start + _SUB_ROWS, p] = bins @ self.hash_multipliers_[p]
            keys[:, p] += self.hash_salts_[p]
        return splitmix64(keys)

    def _block(self, x):
        keys = self.bin_keys(x)
        n, P = keys.shape
        B = self.n_bins
        # column indices reach P B, row pointers n P: int32 only when both fit
        index_dtype = np.int32 if max(P * B, n * P) < 2**31 else np.int64
        cols = (keys % np.uint64(B)).astype(index_dtype)
        cols += (np.arange(P, dtype=index_dtype) * B)[None, :]
        data = np.full(n * P, math.sqrt(1.0 / P), dtype=self._output_dtype())
        indptr = np.arange(0, n * P + 1, P, dtype=index_dtype)
        return sp.csr_matrix((data, cols.ravel(), indptr), shape=(n, P * B))


class FourierBinningFeatures(FeatureMap):
    r"""Random Fourier and random binning features side by side (a hybrid map).

    Rahimi & Recht (2007, Section 6) note that the two maps can be combined by
    concatenation.  Here ``z(x) = [sqrt(w) z_F(x), sqrt(1 - w) z_B(x)]`` with
    ``z_F`` :class:`~rfstream.features.RandomFourierFeatures` and ``z_B``
    :class:`RandomBinningFeatures`, so that ``z(x)' z(y)`` estimates ``w
    k_F(x, y) + (1 - w) k_L(x, y)``: a convex combination of the Fourier
    kernel and the Laplacian kernel (with ``kernel="laplacian"`` both halves
    estimate the same kernel, from two independent kinds of randomness).
    Fourier features interpolate, binning features memorize (Section 5).

    Parameters
    ----------
    n_components : int, default=500
        Fourier features ``D``.
    n_grids, n_bins : int, default=50, 64
        Binning grids ``P`` and hashed columns per grid.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="laplacian"
        Kernel of the Fourier half; the binning half is always Laplacian.
    gamma : float > 0 or "auto", default=1.0
        A float is used by both halves, each in its own kernel's convention;
        "auto" resolves it separately for each kernel
        (:func:`rfstream.kernels.auto_gamma`).
    sampler, variant : see :class:`~rfstream.features.RandomFourierFeatures`.
    weight : float in [0, 1], default=0.5
        ``w``, the share of the Fourier kernel.
    random_state, dtype : as :class:`RandomBinningFeatures`.

    Attributes
    ----------
    gamma_ : float
        Gamma of the Fourier half.
    binning_gamma_ : float
        Gamma of the binning half.
    fourier_ : RandomFourierFeatures
    binning_ : RandomBinningFeatures
        The fitted halves.

    Notes
    -----
    Output as :class:`RandomBinningFeatures`: CSR (numpy input) or dask array
    of CSR blocks, ``n_components + n_grids * n_bins`` columns; the Fourier
    columns are stored densely inside the CSR blocks.  The ridge solver's Gram
    pass treats such mostly-filled columns with dense BLAS.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream.features import FourierBinningFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> Z = FourierBinningFeatures(16, n_grids=4, n_bins=8, random_state=0).fit_transform(X)
    >>> Z.shape, Z.dtype
    ((5, 48), dtype('float32'))
    """

    _parameter_constraints: dict = {
        **FeatureMap._parameter_constraints,
        **FOURIER_PARAMETERS,
        "n_grids": [Interval(Integral, 1, None, closed="left")],
        "n_bins": [Interval(Integral, 1, 2**31 - 1, closed="both")],
        "weight": [Interval(Real, 0, 1, closed="both")],
    }
    _sparse_output = True

    def __init__(self, n_components=500, *, n_grids=50, n_bins=64, kernel="laplacian", gamma=1.0,
                 sampler="mc", variant="cos", weight=0.5, random_state=None, dtype="float32"):
        self.n_components = n_components
        self.n_grids = n_grids
        self.n_bins = n_bins
        self.kernel = kernel
        self.gamma = gamma
        self.sampler = sampler
        self.variant = variant
        self.weight = weight
        self.random_state = random_state
        self.dtype = dtype

    def _resolve_gamma(self, X, rng):
        gamma = super()._resolve_gamma(X, rng)
        items, _ = gamma_items(self.gamma)
        auto = None
        if needs_auto(items):
            (child,) = rng.spawn(1)
            auto = auto_gamma(X, "laplacian", random_state=child)
        self.binning_gamma_ = float(resolve_items(items[:1], auto)[0])
        return gamma

    def _check_params(self, n_features):
        self._halves(n_features, self.gamma if isinstance(self.gamma, Real) else 1.0, 1.0, 0, 0)

    def _halves(self, d, gamma_f, gamma_b, seed_f, seed_b):
        fourier = RandomFourierFeatures.for_columns(
            d, n_components=self.n_components, kernel=self.kernel, gamma=gamma_f,
            sampler=self.sampler, variant=self.variant, random_state=seed_f, dtype=self.dtype)
        binning = RandomBinningFeatures.for_columns(
            d, n_grids=self.n_grids, n_bins=self.n_bins, gamma=gamma_b, random_state=seed_b,
            dtype=self.dtype)
        return fourier, binning

    def _draw(self, rng, n_features):
        seeds = rng.integers(0, 2**63 - 1, size=2)
        self.fourier_, self.binning_ = self._halves(n_features, self.gamma_, self.binning_gamma_,
                                                    *map(int, seeds))

    @property
    def _n_features_out(self):
        return self.fourier_._n_features_out + self.binning_._n_features_out

    def _block(self, x):
        zf = self.fourier_.block(x)
        zf *= np.asarray(math.sqrt(self.weight), dtype=zf.dtype)
        zb = self.binning_.block(x)
        zb.data *= np.asarray(math.sqrt(1.0 - self.weight), dtype=zb.dtype)
        return sp.hstack([sp.csr_matrix(zf), zb], format="csr")
