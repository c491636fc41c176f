"""SES: Stein-effect shrinkage weights for random Fourier features (Chang, Li, Yang & Poczos, IJCAI 2017).

Monte Carlo features estimate ``k(x - x') = E_w[cos(w'(x - x'))]`` (eqs. (2)-(4)) by the plain
mean; SES replaces the uniform ``1/M`` by weights ``beta`` fitted to the exact kernel on sampled
pairs of rows (eqs. (6)-(8)) and maps ``x`` to ``diag(sqrt(beta)) z(x)`` (Algorithm 1), with the
Bayesian Quadrature weights of Section 3 as the baseline.  Only sampled rows are read (one
gather, :func:`rfstream.random.sample_rows`).  Departs from the paper: ``beta >= 0`` (an NNLS
solve) and a sketch of at least :data:`MIN_PAIRS` pairs.  Decisions and figures: docs/ses.md.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import ClassVar

import dask.array as da
import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from .._validation import check_dask_array
from ..features.base import KERNEL_PARAMETERS, FeatureMap
from ..features.fourier import FOURIER_PARAMETERS, RandomFourierFeatures
from ..kernels import kernel_matrix
from ..random import STREAM_SES_PAIRS, STREAM_SES_ROWS, sample_row_indices, sample_rows
from ..samplers import check_sampler

__all__ = ["SESFeatures", "bq_system", "bq_weights", "nonnegative_quadratic"]

#: lambda_beta tried by ``reg="auto"`` (Section 5.1: {2^-8, 2^-6, ..., 2^8}).
REG_GRID = tuple(2.0 ** np.arange(-8, 9, 2))
#: sigma_GP / s tried by ``weights="bq"``, ``s = sqrt(2 gamma)`` the spread of the
#: frequencies (Section 5.1 tunes sigma_GP over {2^-8, 2^-6, ..., 2^8}).
SIGMA_GP_GRID = tuple(2.0 ** np.arange(-8, 9, 2))
#: candidate pairs drawn uniformly per sketched pair: the sketch keeps ``n_pairs``
#: of ``POOL_FACTOR * n_pairs`` candidates with probability proportional to their norm.
POOL_FACTOR = 4
#: default sketch size is ``max(4 M, MIN_PAIRS)``: with fewer pairs the fitted weights are
#: noisy for small ``M`` (docs/ses.md, "Sketch size"), and pairs are cheap.
MIN_PAIRS = 1024
#: nugget added to the GP covariance of Bayesian Quadrature (its diagonal is 1).
BQ_JITTER = 1e-6


# ------------------------------------------------------------------- solvers
def nonnegative_quadratic(A, b):
    """``argmin_{beta >= 0} beta' A beta - 2 b' beta`` for a symmetric positive definite ``A``.

    With ``A = L L'`` (Cholesky) the objective is ``||L' beta - L^{-1} b||^2`` up
    to a constant, a non-negative least squares problem in ``M`` unknowns
    (:func:`scipy.optimize.nnls`), solved only when the unconstrained minimiser
    ``A^{-1} b`` has a negative entry: ``O(M^3)``, independent of the number of pairs.
    """
    L = scipy.linalg.cholesky(A, lower=True)
    c = scipy.linalg.solve_triangular(L, b, lower=True)
    beta = scipy.linalg.solve_triangular(L.T, c, lower=False)  # unconstrained A^{-1} b
    if np.all(beta >= 0):  # convex objective: the unconstrained minimiser is feasible, so optimal
        return beta
    beta, _ = scipy.optimize.nnls(L.T, c, maxiter=50 * A.shape[0])
    return beta


def bq_weights(W, gamma, sigma_gp):
    """Bayesian Quadrature weights of Section 3 for the Gaussian kernel ``gamma``: ``K_GP^{-1}
    gamma_vector`` over ``beta >= 0``, for frequencies ``W`` (d, M) and GP length scale
    ``sigma_gp`` (the derivation: docs/ses.md, "BQ baseline")."""
    return nonnegative_quadratic(*bq_system(W, gamma, sigma_gp))


def bq_system(W, gamma, sigma_gp):
    """``(K_GP + BQ_JITTER I, gamma_vector)`` of :func:`bq_weights` (unconstrained: ``K^{-1} gamma``)."""
    W = np.asarray(W, dtype=np.float64)
    d, m = W.shape
    s2, g2 = 2.0 * gamma, sigma_gp**2
    sq = np.sum(W * W, axis=0)
    dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (W.T @ W), 0.0)
    K = np.exp(-dist / (2.0 * g2))
    K[np.diag_indices(m)] += BQ_JITTER
    # log of the normalisation first: (g2 / (g2 + s2))^(d/2) underflows for large d
    log_gam = 0.5 * d * math.log(g2 / (g2 + s2)) - sq / (2.0 * (g2 + s2))
    return K, np.exp(log_gam)


# ---------------------------------------------------------------------- pairs
def pair_terms(rff, rows, i, j, kernel, gamma):
    """``H[k, m] = cos(w_m'(x_i - x_j))``, eq. (7)'s ``z(x_i) o z(x_j)`` with each frequency's
    cos and sin halves added (from the differences, float64), and ``t[k] = k(x_i, x_j)``."""
    diff = rows[i] - rows[j]
    H = np.cos(diff @ rff.random_weights_.astype(np.float64))
    # shift invariance: k(x_i, x_j) = k(x_i - x_j, 0)
    t = kernel_matrix(diff, np.zeros((1, rows.shape[1])), kernel, gamma)[:, 0]
    return H, t


def _draw_pairs(rng, n_rows, n_pairs):
    """``n_pairs`` index pairs ``(i, j)``, ``i != j``, uniform over ``range(n_rows)``."""
    i = rng.integers(0, n_rows, size=n_pairs)
    j = (i + rng.integers(1, max(n_rows, 2), size=n_pairs)) % n_rows
    return i, j


class SESFeatures(FeatureMap):
    r"""Random Fourier features with data-driven shrinkage weights (SES) or BQ weights.

    ``z'(x) = [sqrt(beta_m) cos(w_m' x), sqrt(beta_m) sin(w_m' x)]_{m=1..M}`` so that
    ``z'(x)' z'(x') = sum_m beta_m cos(w_m'(x - x'))``; ``beta = 1/M`` is plain
    Monte Carlo / quasi-Monte Carlo (eq. (3)).

    * ``weights="ses"`` (Section 4, Algorithm 1): ``beta`` minimises the ridge
      least squares risk over pairs of rows, eq. (7),
      ``||t - H beta||^2 + lambda_beta ||beta||^2`` with ``t_k = k(x_i, x_j)``
      and ``H[k, m] = h_{x_i,x_j}(w_m)``, solved through the sampling sketch of
      eq. (8): ``POOL_FACTOR * n_pairs`` candidate pairs are drawn uniformly
      from sampled rows, and ``n_pairs`` of them are kept i.i.d. with probability
      ``p_k`` proportional to ``||H[k]||`` and rescaled by ``1/sqrt(n_pairs p_k)``
      (Woodruff 2014's row-norm sampling, with replacement; the paper keeps rows
      independently with probability ``p_k``, same expectation).  Both squared
      terms are averages over pairs, so ``reg`` does not depend on ``n_pairs``.
    * ``weights="bq"`` (Section 3): Bayesian Quadrature weights
      (:func:`bq_weights`), Gaussian kernel only, ``sigma_GP`` tuned on
      held-out pairs.
    * ``weights="uniform"``: ``beta = 1/M``, i.e. MC (``sampler="mc"``) or QMC
      (``sampler="qmc"``) features with the same frequencies.

    Negative weights.  The unconstrained minimisers (SES's ridge solution,
    BQ's ``K_GP^{-1} gamma``) do have negative entries in practice (SES on
    real data with the tuned ``reg``: 0-5 of ``M <= 128``, 16-31 of 512).
    ``sqrt(beta)`` then does not exist and no real feature map gives
    ``sum_m beta_m h(w_m)``: the approximation would not even be a positive
    semi-definite kernel.  We therefore minimise the *same* objectives over
    ``beta >= 0`` (:func:`nonnegative_quadratic`, an exact non-negative least
    squares solve), rather than clipping the unconstrained solution afterwards:
    clipping ignores how the other weights should compensate (docs/ses.md,
    "Negative weights (decision)", compares the two).  A zero weight drops its
    frequency's two columns to exactly 0; every feature is finite.  The count
    of negative entries of the unconstrained solution is kept in
    ``n_negative_``.

    Parameters
    ----------
    n_components : int, default=100
        Number ``M`` of frequencies (= number of weights).  The output has
        ``2 M`` columns (a cos and a sin per frequency, eq. (4)).
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        See :class:`~rfstream.RandomFourierFeatures`.  ``weights="bq"`` needs
        "gaussian".
    gamma : float > 0 or "auto", default="auto"
        See :class:`~rfstream.RandomFourierFeatures`.
        A list of gammas (a grid) is searched by
        :func:`rfstream.pipeline.fit_dataset` and ``rfstream fit``, one whole
        fit per gamma (the standardizer's, SES's sketch pass, the ridge's two
        each; :mod:`rfstream.selection.gamma_loop`): the passes sketch the
        features of one gamma, so they cannot be shared between gammas.  Fitted
        directly, the map takes one gamma.
    sampler : {"mc", "qmc", "orthogonal"}, default="mc"
        How the frequencies are drawn.
    n_pairs : int or None, default=None
        Sketch size ``r``; ``None`` means ``max(4 M, 1024)`` (the paper finds 2 to
        4 times ``M`` enough; for small ``M`` more pairs still help, docs/ses.md).
    reg : float > 0 or "auto", default="auto"
        ``lambda_beta``; "auto" picks it from :data:`REG_GRID` by the squared
        kernel error on ``n_pairs`` held-out pairs (pairs of rows not used in the
        fit).
    weights : {"ses", "bq", "uniform"}, default="ses"
    random_state : int, Generator, RandomState or None, default=None
    dtype : {"float32", "float64"}, default="float32"

    Attributes
    ----------
    gamma_ : float
    rff_ : RandomFourierFeatures
        The unweighted map (``variant="cossin"``, ``2 M`` columns).
    weights_ : ndarray of shape (M,)
        ``beta`` (float64, ``>= 0``); ``sum(weights_)`` is the estimate of ``k(x, x) = 1``.
    reg_ : float or None
        ``lambda_beta`` used (``weights="ses"``).
    sigma_gp_ : float or None
        GP length scale used (``weights="bq"``).
    n_negative_ : int
        Negative weights in the unconstrained solution (0 for "uniform").
    validation_error_ : float or None
        Mean squared kernel error of the weights on the held-out pairs.
    seed_ : int
        Seed of the row and pair sampling.
    n_features_in_ : int

    References
    ----------
    W.-C. Chang, C.-L. Li, Y. Yang and B. Poczos, "Data-driven Random Fourier
    Features using Stein Effect", IJCAI 2017.  D. P. Woodruff, "Sketching as a
    Tool for Numerical Linear Algebra", 2014.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import SESFeatures
    >>> X = np.random.default_rng(0).normal(size=(300, 4))
    >>> ses = SESFeatures(n_components=16, gamma=0.2, random_state=0).fit(X)
    >>> ses.transform(X).shape, ses.weights_.shape
    ((300, 32), (16,))
    """

    _parameter_constraints: ClassVar[dict] = {
        **FeatureMap._parameter_constraints,
        **KERNEL_PARAMETERS,
        "sampler": FOURIER_PARAMETERS["sampler"],
        "n_pairs": [Interval(Integral, 1, None, closed="left"), None],
        "reg": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "weights": [StrOptions({"ses", "bq", "uniform"})],
    }
    #: a cosine and a sine column per frequency (:mod:`rfstream.features.width`)
    columns_per_component = 2
    makes_data_pass = True

    def __init__(
        self,
        n_components=100,
        *,
        kernel="gaussian",
        gamma="auto",
        sampler="mc",
        n_pairs=None,
        reg="auto",
        weights="ses",
        random_state=None,
        dtype="float32",
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.sampler = sampler
        self.n_pairs = n_pairs
        self.reg = reg
        self.weights = weights
        self.random_state = random_state
        self.dtype = dtype

    def _check_params(self, n_features):
        check_sampler(self.sampler, self.kernel)
        if self.weights == "bq" and self.kernel != "gaussian":
            raise ValueError(
                "weights='bq' has closed-form Bayesian Quadrature weights only for "
                f"kernel='gaussian'; got kernel={self.kernel!r}. Use weights='ses' or 'uniform'."
            )

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`): a
        weight per frequency."""
        view.array("weights_", (view.int("n_components", param=True),))

    def _draw(self, rng, n_features):
        self.seed_ = int(rng.integers(0, 2**63 - 1))
        self.rff_ = RandomFourierFeatures.for_columns(
            n_features, n_components=2 * self.n_components, kernel=self.kernel, gamma=self.gamma_,
            sampler=self.sampler, variant="cossin", random_state=int(rng.integers(0, 2**63 - 1)),
            dtype=self.dtype)

    def _fit_data(self, X, y, seed):
        """The weights, fitted on pairs of sampled rows (only the chunks that hold them are read)."""
        m = self.n_components
        self.reg_ = self.sigma_gp_ = self.validation_error_ = None
        self.n_negative_ = 0
        if self.weights == "uniform":
            self.weights_ = np.full(m, 1.0 / m)
            return
        if isinstance(X, da.Array):  # the row sample needs the number of rows
            check_dask_array(X, known_rows=True)
        r = max(4 * m, MIN_PAIRS) if self.n_pairs is None else int(self.n_pairs)
        (H, t), (Hv, tv) = self._sample_pairs(X, r)
        if self.weights == "bq":
            W = self.rff_.random_weights_
            grid = [c * math.sqrt(2.0 * self.gamma_) for c in SIGMA_GP_GRID]
            fits = [(bq_weights(W, self.gamma_, s), s) for s in grid]
            self.sigma_gp_ = self._select(fits, Hv, tv)
            # unconstrained BQ weights at the chosen sigma_GP, for n_negative_
            unconstrained = np.linalg.solve(*bq_system(W, self.gamma_, self.sigma_gp_))
        else:
            A, b = H.T @ H, H.T @ t  # already averaged over pairs (see _sample_pairs)
            grid = REG_GRID if self.reg == "auto" else (float(self.reg),)
            fits = [(nonnegative_quadratic(A + lam * np.eye(m), b), lam) for lam in grid]
            self.reg_ = self._select(fits, Hv, tv)
            unconstrained = np.linalg.solve(A + self.reg_ * np.eye(m), b)
        self.n_negative_ = int(np.sum(unconstrained < 0))

    def _select(self, fits, Hv, tv):
        """Keep the weights with the lowest mean squared error on the held-out pairs."""
        errors = [float(np.mean((tv - Hv @ beta) ** 2)) for beta, _ in fits]
        best = int(np.argmin(errors))
        self.weights_ = fits[best][0]
        self.validation_error_ = errors[best]
        return float(fits[best][1])

    def _sample_pairs(self, X, r):
        """Sketched pair rows ``(S H, S t)`` (scaled so that ``(SH)'(SH)`` averages over
        the candidates) and ``r`` held-out pairs ``(H_val, t_val)``.

        One pass gathers the sampled rows (chunk by chunk for dask input); the
        rows are split into fit rows and held-out rows, so that held-out pairs
        share no row with fitted ones (when there are at least 4 rows).
        """
        pool = POOL_FACTOR * r
        n = int(X.shape[0])
        rows_rng = np.random.default_rng([self.seed_, STREAM_SES_ROWS])
        n_rows = 2 * (pool + r)
        if sp.issparse(X):
            rows = X[sample_row_indices(n, n_rows, rows_rng)].toarray()
        else:
            rows = sample_rows(X, n_rows, rows_rng)
        rows = np.asarray(rows, dtype=np.float64)
        rng = np.random.default_rng([self.seed_, STREAM_SES_PAIRS])
        order = rng.permutation(rows.shape[0])
        n_fit = round(rows.shape[0] * pool / (pool + r))
        if min(n_fit, rows.shape[0] - n_fit) < 2:  # tiny X: fit and validate on all rows
            fit_rows = val_rows = rows
        else:
            fit_rows, val_rows = rows[order[:n_fit]], rows[order[n_fit:]]
        args = (self.rff_, self.kernel, self.gamma_)
        H, t = pair_terms(args[0], fit_rows, *_draw_pairs(rng, fit_rows.shape[0], pool), *args[1:])
        norms = np.linalg.norm(H, axis=1)
        total = norms.sum()
        p = norms / total if total > 0 else np.full(pool, 1.0 / pool)
        keep = rng.choice(pool, size=r, p=p)
        scale = 1.0 / np.sqrt(r * p[keep] * pool)
        Hv, tv = pair_terms(args[0], val_rows, *_draw_pairs(rng, val_rows.shape[0], r), *args[1:])
        return (H[keep] * scale[:, None], t[keep] * scale), (Hv, tv)

    @property
    def _n_features_out(self):
        return self.rff_.random_weights_.shape[1] * 2

    def _block(self, x):
        z = self.rff_.block(x)
        m = z.shape[1] // 2
        # rff_ scales by sqrt(1/m): multiply by sqrt(m beta) per frequency
        scale = np.sqrt(m * self.weights_).astype(z.dtype)
        z *= np.concatenate([scale, scale])
        return z

