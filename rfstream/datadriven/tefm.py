"""Training-efficient feature maps, TEFM-G and TEFM-S (Chen, Yang, King & Lyu, IJCAI 2015).

TEFM maps ``x`` to ``d`` random Fourier features ``f(x)`` (the rows of ``F``, ``n x d``) and
then to ``l << d`` features ``g(x) = f(x) Q``, where ``Q`` (``d x l``, orthonormal) spans the
dominant row space of ``F``, found by a randomized range finder (Halko, Martinsson & Tropp
2011) over ``F'`` (Algorithms 1-2).  ``F`` is never stored: every product with it is one pass
(:func:`rfstream.reductions.sum_rows`) whose tasks return ``d x l`` float64 partials.
Departs from the paper: TEFM-S uses a block SRHT, which a row-chunked pass can compute.
Method, deviations and measurements: docs/tefm.md.
"""
from __future__ import annotations

import copy
from functools import partial
from numbers import Integral

import numpy as np
import scipy.linalg
import scipy.sparse
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..cluster import compute
from ..features.base import FeatureMap
from ..features.fourier import FOURIER_PARAMETERS, RandomFourierFeatures
from ..hadamard import hadamard_blocks, next_power_of_two
from ..options import ParameterError
from ..random import (
    STREAM_SRHT_SAMPLE,
    STREAM_SRHT_SIGNS,
    STREAM_TEFM_GAUSSIAN,
    VIRTUAL_BLOCK,
    row_normal,
    row_uniform,
)
from ..reductions import sum_rows
from ..samplers import check_sampler
from ..solvers.kpca import orthonormal

__all__ = ["TEFM", "fold_projection", "gaussian_sketch_chunk", "power_chunk", "srht_block_size",
           "srht_sketch_chunk", "srht_sketch_rows"]


# --------------------------------------------------------------- chunk functions
# Pure numpy functions of one row block and its global row offset, returning a
# flat float64 partial of size d * l (see rfstream.reductions.sum_rows).

def gaussian_sketch_chunk(x, offset, *, rff, seed, n_components):
    """Partial of ``Y = F' Theta`` with ``Theta[i] ~ N(0, I_l)`` drawn from (seed, row i)."""
    f = rff.block(x)
    theta = row_normal(seed, STREAM_TEFM_GAUSSIAN, offset, offset + f.shape[0], n_components,
                       dtype=f.dtype)
    return (f.T @ theta).astype(np.float64).ravel()


def srht_block_size(n_components: int) -> int:
    """Rows per SRHT block: the smallest power of two ``B >= l`` (at most 4096)."""
    return next_power_of_two(n_components)


#: rows of features a TEFM-S task holds at once: a chunk is sketched in sub-ranges cut at
#: global multiples of max(SKETCH_ROWS, B), so per-task memory does not grow with the chunk
SKETCH_ROWS = 4096


def srht_sketch_chunk(x, offset, *, rff, seed, n_components):
    """Partial of ``Y = F' Theta`` for one chunk, sketched in sub-ranges of rows.

    Sub-ranges are cut at global multiples of ``max(SKETCH_ROWS, B)``, so every
    SRHT block lies in one sub-range (or is cut by the chunk edge, as before):
    the sum over sub-ranges is the chunk's sketch, with the feature block and
    the transform's buffers held for at most that many rows at a time.
    """
    step = max(SKETCH_ROWS, srht_block_size(n_components))
    stop = offset + x.shape[0]
    bounds = [offset, *range((offset // step + 1) * step, stop, step), stop]
    total = None
    for a, b in zip(bounds[:-1], bounds[1:]):
        part = srht_sketch_rows(x[a - offset : b - offset], a, rff=rff, seed=seed,
                                 n_components=n_components)
        total = part if total is None else total + part
    return total


def srht_sketch_rows(x, offset, *, rff, seed, n_components):
    """Partial of ``Y = F' Theta`` with the block SRHT ``Theta`` (see :class:`TEFM`).

    The global rows are cut into fixed blocks of ``B`` rows (``B`` a power of two
    dividing :data:`rfstream.random.VIRTUAL_BLOCK`).  For each block ``b`` the
    chunk overlaps, the block is zero-padded to ``B`` rows (rows of other
    chunks count as zeros: by linearity their contributions are added by the
    reduction), multiplied by the block's random signs, transformed along the
    rows by :func:`rfstream.hadamard.hadamard_blocks` (two small GEMMs), and
    ``l`` of its ``B`` rows are kept; one sparse selection product sums the
    kept rows of all blocks into the ``l x d`` ``Y'``.
    """
    f = rff.block(x)
    n, d = f.shape
    B = srht_block_size(n_components)
    if n == 0:
        return np.zeros(d * n_components)
    first, last = offset // B, (offset + n - 1) // B
    lo, hi = first * B, (last + 1) * B
    nblk = last - first + 1
    signs = np.where(row_uniform(seed, STREAM_SRHT_SIGNS, lo, hi) < 0.5, -1.0, 1.0)
    signs = signs.astype(f.dtype)[:, None]
    if lo == offset and hi == offset + n:  # chunk made of whole blocks: no padding
        pad = np.multiply(f, signs, out=f)  # D_b F_b (f is this task's own array)
    else:
        pad = np.zeros((nblk * B, d), dtype=f.dtype)  # D_b F_b, zero outside this chunk
        rows = slice(offset - lo, offset - lo + n)
        np.multiply(f, signs[rows], out=pad[rows])
    hdf = hadamard_blocks(pad.reshape(nblk, B, d)).reshape(nblk * B, d)  # H_B D_b F_b
    # R_b: l distinct rows of each block, from per-row random keys (argsort); the
    # kept rows of all blocks are summed by one sparse (l x nblk B) selection product.
    keys = row_uniform(seed, STREAM_SRHT_SAMPLE, lo, hi).reshape(nblk, B)
    keep = np.argsort(keys, axis=1, kind="stable")[:, :n_components]
    keep += (np.arange(nblk) * B)[:, None]
    slots = np.broadcast_to(np.arange(n_components), keep.shape)
    select = scipy.sparse.csr_matrix(
        (np.full(keep.size, 1.0 / np.sqrt(n_components), dtype=f.dtype),  # sqrt(B/l) / sqrt(B)
         (slots.ravel(), keep.ravel())), shape=(n_components, nblk * B))
    yt = select @ hdf  # (l, d) = sum_b sqrt(1/l) R_b H_B D_b F_b
    return np.ascontiguousarray(yt.T, dtype=np.float64).ravel()


def power_chunk(x, offset, *, rff, Q):
    """Partial of ``F' (F Q)`` for one row block (one power iteration)."""
    f = rff.block(x)
    return (f.T @ (f @ Q)).astype(np.float64).ravel()


class TEFM(FeatureMap):
    r"""Training-efficient feature map: ``l`` features spanning ``d`` random Fourier features.

    ``g(x) = f(x) Q`` where ``f`` is a :class:`~rfstream.RandomFourierFeatures`
    map with ``d = n_random_features`` features and ``Q`` (``d x l``,
    ``Q'Q = I``) is fitted by a randomized range finder over the feature matrix
    ``F`` (``n x d``) of the training rows, so that ``G G' = F Q Q' F'`` is close
    to the best rank-``l`` approximation of ``F F' ~= K`` (Chen et al. 2015,
    Theorems 1-2: error ``O(n/l)`` with ``l`` features against ``O(n/sqrt(l))``
    for plain random features).

    * ``method="gaussian"`` (TEFM-G, Algorithm 1): ``Y = (F'F)^q F' Theta``
      with ``Theta`` (``n x l``) i.i.d. ``N(0, 1)``; ``Q = qr(Y)``.
    * ``method="srht"`` (TEFM-S, Algorithm 2): ``Theta`` is a *block* subsampled
      randomized Hadamard transform.  The rows are cut into fixed blocks of
      ``B`` rows, ``B`` the smallest power of two ``>= l``; block ``b`` gets its
      own random signs ``D_b`` and its own sample ``R_b`` of ``l`` of its ``B``
      rows, and ``Theta' = [sqrt(B/l) R_b (H_B/sqrt(B)) D_b]_b`` (``l x n``,
      ``E[Theta Theta'] = I_n``), i.e. ``Y' = Theta' F = sum_b sqrt(1/l) R_b H_B
      D_b F_b``.  This is a block SRHT in the sense of Balabanov, Beaupere,
      Grigori & Lacoste (2022) with independent per-block samples and
      ``F_b`` transformed by a fast Hadamard transform
      (:func:`rfstream.hadamard.hadamard_blocks`: ``H_B = H_a (x) H_b``, two
      rounds of small matrix products, ``4 sqrt(B)`` flops per entry in two
      passes over memory) and the kept rows summed by a sparse selection
      product, instead of the ``2 l`` flops per entry of a Gaussian ``Theta``
      and its ``n x l`` normal draws.  Deviation: the radix-2 butterflies
      (``log2 B`` additions per entry, :func:`rfstream.hadamard.fwht`) are
      asymptotically cheaper but are ``log2 B`` memory-bound numpy passes,
      no faster than the Gaussian sketch's GEMM (docs/tefm.md).
      Algorithm 2 of the paper is ``n_power_iter=0`` with one global SRHT; the block form is what a
      row-chunked pass can compute, and with ``n_power_iter >= 1`` the same
      power iterations as TEFM-G follow the sketch.

    Each power iteration is one more pass ``Y <- F' (F Q)``, and ``Y`` is
    re-orthonormalized on the client (thin QR of the ``d x l`` matrix) before
    every pass, so the iteration does not lose orthogonality in float32
    (Halko et al. 2011, Algorithm 4.4, orthonormalizing the ``d x l`` side).
    Per-row randomness (``Theta``'s rows, the SRHT signs and samples) is a
    function of ``(seed, global row index)`` only (:mod:`rfstream.random`), so
    ``Q`` does not depend on the chunking or on the number of workers.

    ``dask.array.linalg.compression_matrix`` is not reused: its test matrix
    depends on the chunking and it has no SRHT (docs/tefm.md says why in full).

    Parameters
    ----------
    n_components : int, default=100
        Number of output features ``l``.
    n_random_features : int or None, default=None
        Number of random Fourier features ``d >= l``; ``None`` means ``4 l``
        (the paper's experiments).
    n_power_iter : int, default=1
        Power iterations ``q`` (the paper: typically 0, 1 or 2); each one is one
        more pass over the data.
    method : {"gaussian", "srht"}, default="gaussian"
        TEFM-G or TEFM-S, see above.  "srht" needs ``n_components <= 4096``.
    kernel, gamma, sampler, variant :
        Passed to the inner :class:`~rfstream.RandomFourierFeatures` (``d``
        features).
        A list of gammas (a grid) is searched by
        :func:`rfstream.pipeline.fit_dataset` and ``rfstream fit``, one whole
        fit per gamma (the standardizer's, ``1 + n_power_iter`` for the range
        finder, the ridge's two each; :mod:`rfstream.selection.gamma_loop`):
        the passes of the range finder multiply the features of one gamma, so
        they cannot be shared between gammas.  Fitted directly, the map takes
        one gamma.
    random_state : int, Generator, RandomState or None, default=None
    dtype : {"float32", "float64"}, default="float32"

    Attributes
    ----------
    gamma_ : float
    rff_ : RandomFourierFeatures
        The fitted inner map ``f`` (``d`` features).
    components_ : ndarray of shape (n_random_features_, n_components)
        ``Q``, orthonormal columns, in ``dtype``.
    n_random_features_ : int
    seed_ : int
        Seed of the per-row randomness.
    n_features_in_ : int

    Notes
    -----
    Fitting costs ``1 + n_power_iter`` passes; ``transform`` is lazy for dask
    input.  To predict with only the random Fourier features and ``Q w``, fold
    ``Q`` into a fitted linear solver with :func:`fold_projection`.

    References
    ----------
    X. Chen, H. Yang, I. King and M. R. Lyu, "Training-Efficient Feature Map for
    Shift-Invariant Kernels", IJCAI 2015.  N. Halko, P.-G. Martinsson and
    J. A. Tropp, "Finding structure with randomness", SIAM Review 2011.
    O. Balabanov, M. Beaupere, L. Grigori and V. Lacoste, "Block subsampled
    randomized Hadamard transform for low-rank approximation on distributed
    architectures", 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import TEFM
    >>> X = np.random.default_rng(0).normal(size=(200, 4))
    >>> tefm = TEFM(n_components=10, random_state=0).fit(X)
    >>> tefm.transform(X).shape, tefm.components_.shape
    ((200, 10), (40, 10))
    """

    _parameter_constraints: dict = {
        **FeatureMap._parameter_constraints,
        **FOURIER_PARAMETERS,
        "n_random_features": [Interval(Integral, 1, None, closed="left"), None],
        "n_power_iter": [Interval(Integral, 0, None, closed="left")],
        "method": [StrOptions({"gaussian", "srht"})],
    }
    makes_data_pass = True

    def __init__(
        self,
        n_components=100,
        *,
        n_random_features=None,
        n_power_iter=1,
        method="gaussian",
        kernel="gaussian",
        gamma=1.0,
        sampler="mc",
        variant="cos",
        random_state=None,
        dtype="float32",
    ):
        self.n_components = n_components
        self.n_random_features = n_random_features
        self.n_power_iter = n_power_iter
        self.method = method
        self.kernel = kernel
        self.gamma = gamma
        self.sampler = sampler
        self.variant = variant
        self.random_state = random_state
        self.dtype = dtype

    def _d(self):
        return 4 * self.n_components if self.n_random_features is None else self.n_random_features

    def _check_params(self, n_features):
        d = self._d()
        if d < self.n_components:
            raise ParameterError("{n_random_features} must be >= {n_components} (d >= l); got "
                                 "{n_random_features=} < {n_components=}.", n_random_features=d,
                                 n_components=self.n_components)
        if self.variant == "cossin" and d % 2:
            raise ValueError(
                f"n_random_features must be even with variant='cossin'; got {d}."
            )
        if self.method == "srht" and self.n_components > VIRTUAL_BLOCK:
            raise ValueError(
                f"method='srht' supports n_components <= {VIRTUAL_BLOCK}; got "
                f"{self.n_components}. Use method='gaussian'."
            )
        check_sampler(self.sampler, self.kernel)

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`): the
        orthonormal ``d x l`` basis ``Q`` of the ``d = n_random_features_`` random features."""
        d = view.int("n_random_features_")
        view.array("components_", (d, view.int("n_components", param=True)))
        view.check("components_ must have orthonormal columns",
                   lambda q: np.allclose(q.T.astype(np.float64) @ q, np.eye(q.shape[1]), atol=1e-3),
                   "components_")

    def _draw(self, rng, n_features):
        d = self._d()
        self.n_random_features_ = d
        self.seed_ = int(rng.integers(0, 2**63 - 1))
        self.rff_ = RandomFourierFeatures.for_columns(
            n_features, n_components=d, kernel=self.kernel, gamma=self.gamma_, sampler=self.sampler,
            variant=self.variant, random_state=int(rng.integers(0, 2**63 - 1)), dtype=self.dtype)

    def _fit_data(self, X, y, seed):
        """``Q`` from ``1 + n_power_iter`` passes over the rows (the sketch, then power iterations)."""
        d, l = self.n_random_features_, self.n_components
        sketch = gaussian_sketch_chunk if self.method == "gaussian" else srht_sketch_chunk
        chunk = partial(sketch, rff=self.rff_, seed=self.seed_, n_components=l)
        Y = np.asarray(compute(sum_rows(chunk, d * l, X))).reshape(d, l)
        dtype = self._output_dtype()
        for _ in range(self.n_power_iter):
            Q = orthonormal(Y).astype(dtype)
            chunk = partial(power_chunk, rff=self.rff_, Q=Q)
            Y = np.asarray(compute(sum_rows(chunk, d * l, X))).reshape(d, l)
        self.components_ = orthonormal(Y).astype(dtype)
        return self

    @property
    def _n_features_out(self):
        return self.components_.shape[1]

    def _block(self, x):
        return self.rff_.block(x) @ self.components_


def fold_projection(model):
    """Fold TEFM's ``Q`` into a fitted linear solver: predict from RFF features only.

    Turns a fitted ``Pipeline([..., ("features", TEFM), ("solver", linear)])``
    into an equivalent ``Pipeline([..., ("features", tefm.rff_), ("solver",
    linear')])`` with ``coef' = coef Q'`` (``Q w`` in the paper's notation,
    Section 3.4): prediction then needs only the seed / frequencies of the
    ``d`` random Fourier features and the folded weights, since ``g(x) w =
    f(x) Q w``.  The solver must expose ``coef_`` (``(l,)`` or ``(t, l)``) and
    ``intercept_`` and predict from ``z coef' + intercept`` (e.g.
    :class:`~rfstream.StreamingRidge`, :class:`~rfstream.StreamingRidgeClassifier`).
    A bare fitted ``(tefm, solver)`` pair can be passed as a tuple as well; a
    tuple ``(rff, solver')`` is then returned.  Nothing is refitted; the inputs
    are not modified.
    """
    from sklearn.pipeline import Pipeline

    if isinstance(model, Pipeline):
        names = [name for name, _ in model.steps]
        idx = [i for i, (_, est) in enumerate(model.steps) if isinstance(est, TEFM)]
        if len(idx) != 1 or idx[0] != len(names) - 2:
            raise ValueError(
                "fold_projection needs a Pipeline whose second-to-last step is a fitted TEFM "
                f"and whose last step is a linear solver; got steps {names}."
            )
        tefm, solver = model.steps[idx[0]][1], model.steps[-1][1]
    else:
        tefm, solver = model
    if not isinstance(tefm, TEFM):
        raise TypeError(f"fold_projection needs a TEFM feature map; got {type(tefm).__name__}.")
    check_is_fitted(tefm)
    if not hasattr(solver, "coef_"):
        raise ValueError(
            f"fold_projection needs a fitted linear solver with coef_; got {type(solver).__name__}."
        )
    Q = np.asarray(tefm.components_, dtype=np.float64)
    folded = copy.deepcopy(solver)
    coef = np.asarray(solver.coef_, dtype=np.float64)
    folded.coef_ = coef @ Q.T  # (l,) -> (d,), (t, l) -> (t, d)
    if hasattr(folded, "n_features_in_"):
        folded.n_features_in_ = Q.shape[0]
    rff = copy.deepcopy(tefm.rff_)
    if hasattr(tefm, "n_features_in_"):
        rff.n_features_in_ = tefm.n_features_in_
    if hasattr(tefm, "feature_names_in_"):
        rff.feature_names_in_ = tefm.feature_names_in_
    if not isinstance(model, Pipeline):
        return rff, folded
    steps = [(name, copy.deepcopy(est)) for name, est in model.steps[:-2]]
    steps += [(model.steps[-2][0], rff), (model.steps[-1][0], folded)]
    return Pipeline(steps)
