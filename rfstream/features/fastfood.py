"""Fastfood (Le, Sarlos & Smola 2013) and compact random feature maps (Hamid et al. 2014).

Both are baselines of the TEFM paper's Figure 1 (Chen et al. 2015, Section 4).
"""
from __future__ import annotations

import math
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions

from ..hadamard import fwht, next_power_of_two
from ..samplers import check_sampler
from .base import FeatureMap, KernelFeatureMap
from .fourier import FOURIER_PARAMETERS, RandomFourierFeatures


class FastfoodFeatures(KernelFeatureMap):
    r"""Fastfood random features for the Gaussian kernel ("Hadamard features").

    The input is zero-padded to ``p`` columns (the next power of two) and
    ``ceil(D / p)`` stacked blocks ``V_j = (1 / (sigma sqrt(p))) S H G Pi H B``
    replace the dense Gaussian ``W'`` of random Fourier features (Le et al.
    2013, eq. (8)): ``B`` random signs, ``H`` the unnormalized Walsh-Hadamard
    matrix (applied by :func:`rfstream.hadamard.fwht`, ``O(p log p)`` per row),
    ``Pi`` a random permutation, ``G`` diagonal Gaussian, and ``S`` diagonal
    with ``S_ii = s_i / ||G||_F``, ``s_i ~ chi(p)``, so that every row of ``V``
    has the norm of a ``N(0, 2 gamma I_p)`` vector (``1/sigma = sqrt(2 gamma)``).
    Features are ``sqrt(2/D) cos(V x + b)``, ``b ~ U[0, 2 pi]`` (the first ``D``
    rows of the stacked ``V``).  Time per row ``O(D log p)`` instead of
    ``O(D p)``.  Prefix maps (:mod:`rfstream.features.prefix`): the first ``n``
    columns are the map of ``n`` made of the first ``ceil(n / p)`` stacks and
    ``n`` phases (the last stack cut, as the map cuts its own).

    A class, not a ``sampler="fastfood"`` entry of
    :data:`rfstream.samplers.SAMPLERS`: a sampler returns a dense frequency
    matrix ``W`` that ``RandomFourierFeatures`` multiplies densely, which would
    keep Fastfood's (different) frequency distribution but lose its fast
    transform; :meth:`frequencies` still gives that dense ``W`` for tests.

    Parameters
    ----------
    n_components : int, default=100
        Number of output features ``D``.
    gamma : float > 0 or "auto", default=1.0
        ``k(x, y) = exp(-gamma ||x - y||^2)``.
    kernel : {"gaussian"}, default="gaussian"
    random_state : int, Generator, RandomState or None, default=None
    dtype : {"float32", "float64"}, default="float32"

    Attributes
    ----------
    gamma_ : float
    signs_, gauss_, scale_ : ndarray of shape (n_stacks, p)
        ``B``, ``G`` and ``S / (sigma sqrt(p))`` per stack.
    perm_ : ndarray of shape (n_stacks, p)
        ``Pi`` per stack (indices).
    random_offset_ : ndarray of shape (n_components,)
    n_features_in_ : int

    References
    ----------
    Q. Le, T. Sarlos and A. Smola, "Fastfood - Approximating Kernel Expansions
    in Loglinear Time", ICML 2013.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream.features import FastfoodFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> ff = FastfoodFeatures(n_components=10, random_state=0).fit(X)
    >>> ff.transform(X).shape, ff.perm_.shape
    ((5, 10), (3, 4))
    """

    _parameter_constraints: dict = {
        **KernelFeatureMap._parameter_constraints,
        "kernel": [StrOptions({"gaussian"})],
    }
    prefix_valid = True

    def _keep_prefix(self, n):
        """The first ``ceil(n / p)`` stacks (``B``, ``Pi``, ``G``, ``S``) and ``n`` phases."""
        k = -(-n // self.signs_.shape[1])
        for name in ("signs_", "perm_", "gauss_", "scale_"):
            setattr(self, name, getattr(self, name)[:k].copy())
        self.random_offset_ = self.random_offset_[:n].copy()

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`):
        ``ceil(k / p)`` stacks of ``p = next_power_of_two(d)`` signs, permutations, Gaussians
        and scales, and ``k`` phases."""
        p = next_power_of_two(view.int("n_features_in_"))
        k = view.array("random_offset_")
        if len(k) != 1:
            view.fail(f"random_offset_ has shape {k}, not (n_components,)")
        shape = (-(-k[0] // p), p)
        view.array("signs_", shape)
        view.array("perm_", shape, kinds="iu", finite=False)
        view.array("gauss_", shape)
        view.array("scale_", shape)
        view.one_of("signs_", (-1.0, 1.0))
        view.check("perm_ must hold a permutation of 0..p-1 in each row",
                   lambda a: bool(np.all(np.sort(a, axis=1) == np.arange(a.shape[1]))), "perm_")

    def _draw(self, rng, n_features):
        p = next_power_of_two(n_features)
        k = -(-self.n_components // p)
        self.signs_ = rng.choice([-1.0, 1.0], size=(k, p))
        self.perm_ = np.argsort(rng.random((k, p)), axis=1)
        self.gauss_ = rng.standard_normal((k, p))
        chi = np.sqrt(rng.chisquare(p, size=(k, p)))
        frob = np.linalg.norm(self.gauss_, axis=1, keepdims=True)
        self.scale_ = chi / frob * math.sqrt(2.0 * self.gamma_) / math.sqrt(p)
        self.random_offset_ = rng.uniform(0.0, 2.0 * np.pi, size=self.n_components)

    @property
    def _n_features_out(self):
        return self.random_offset_.shape[0]

    def _project(self, x):
        """``V x`` for every row of ``x`` (float64), shape (rows, n_components)."""
        x = x.toarray() if sp.issparse(x) else np.asarray(x)
        k, p = self.signs_.shape
        rows = x.shape[0]
        v = np.zeros((rows, k, p))
        v[:, :, : x.shape[1]] = x[:, None, :]
        v *= self.signs_  # B
        fwht(v, axis=2, out=v)  # H
        v = np.take_along_axis(v, np.broadcast_to(self.perm_, v.shape), axis=2)  # Pi
        v *= self.gauss_  # G
        fwht(v, axis=2, out=v)  # H
        v *= self.scale_  # S / (sigma sqrt(p))
        return v.reshape(rows, k * p)[:, : self.random_offset_.shape[0]]

    def frequencies(self):
        """The dense ``(n_features_in_, D)`` matrix ``W`` with ``V x = W' x``."""
        return self._project(np.eye(self.n_features_in_)).copy()

    def _block(self, x):
        dtype = self._output_dtype()
        proj = self._project(x)
        proj += self.random_offset_
        np.cos(proj, out=proj)
        proj *= math.sqrt(2.0 / proj.shape[1])
        return proj.astype(dtype, copy=False)


class CompactRandomFeatures(FeatureMap):
    r"""Compact random feature maps (Hamid, Xiao, Gittens & DeCoste 2014).

    A data-independent random projection of ``d = n_random_features`` random
    Fourier features down to ``l = n_components``: ``z(x) = f(x) R / sqrt(l)``
    with ``R`` (``d x l``) i.i.d. ``N(0, 1)`` (a Johnson-Lindenstrauss map, so
    ``E[z(x)' z(y)] = f(x)' f(y)``).  Hamid et al. compact polynomial-kernel
    features; as in Chen et al. (2015, Section 4, "Comp") it is applied here to
    random Fourier features.  The data-dependent counterpart is :class:`~rfstream.TEFM`.

    Parameters
    ----------
    n_components : int, default=100
        Output features ``l``.
    n_random_features : int or None, default=None
        Random Fourier features ``d >= l`` before the projection; ``None``: ``4 l``.
    kernel, gamma, sampler, variant, random_state, dtype :
        As in :class:`~rfstream.RandomFourierFeatures`.

    Attributes
    ----------
    rff_ : RandomFourierFeatures
    projection_ : ndarray of shape (d, l)
        ``R / sqrt(l)``, in ``dtype``.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream.features import CompactRandomFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> crf = CompactRandomFeatures(8, random_state=0).fit(X)
    >>> crf.transform(X).shape, crf.projection_.shape
    ((5, 8), (32, 8))
    """

    _parameter_constraints: dict = {
        **FeatureMap._parameter_constraints,
        **FOURIER_PARAMETERS,
        "n_random_features": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, n_components=100, *, n_random_features=None, kernel="gaussian", gamma=1.0,
                 sampler="mc", variant="cos", random_state=None, dtype="float32"):
        self.n_components = n_components
        self.n_random_features = n_random_features
        self.kernel = kernel
        self.gamma = gamma
        self.sampler = sampler
        self.variant = variant
        self.random_state = random_state
        self.dtype = dtype

    def _check_params(self, n_features):
        d = 4 * self.n_components if self.n_random_features is None else self.n_random_features
        if d < self.n_components:
            raise ValueError(
                f"n_random_features must be >= n_components; got {d} < {self.n_components}."
            )
        check_sampler(self.sampler, self.kernel)

    def _draw(self, rng, n_features):
        d = 4 * self.n_components if self.n_random_features is None else self.n_random_features
        self.rff_ = RandomFourierFeatures.for_columns(
            n_features, n_components=d, kernel=self.kernel, gamma=self.gamma_, sampler=self.sampler,
            variant=self.variant, random_state=int(rng.integers(0, 2**63 - 1)), dtype=self.dtype)
        R = rng.standard_normal((d, self.n_components)) / math.sqrt(self.n_components)
        self.projection_ = R.astype(self._output_dtype())

    @property
    def _n_features_out(self):
        return self.projection_.shape[1]

    def _block(self, x):
        return self.rff_.block(x) @ self.projection_
