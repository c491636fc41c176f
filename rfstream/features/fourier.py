"""Random Fourier features (Rahimi & Recht 2007)."""
from __future__ import annotations

import copy
import math
import threading
from collections import OrderedDict

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import StrOptions

from ..kernels import frequency_scale
from ..options import ParameterError
from ..preprocess import binary_passthrough
from ..samplers import SAMPLERS, check_sampler, sample_weights
from .base import KERNEL_PARAMETERS, FeatureMap
from .fused import ScaledBlock
from .on_device import DeviceTwin, FourierOnDevice
from .onehot import project_split, split_weights
from .grid import GammaGridMixin

__all__ = ["FOURIER_PARAMETERS", "RandomFourierFeatures", "project_with_offset"]

#: ``_parameter_constraints`` of random Fourier features, shared by the maps
#: that pass them on to an inner :class:`RandomFourierFeatures`
FOURIER_PARAMETERS = {
    **KERNEL_PARAMETERS,
    "sampler": [StrOptions(set(SAMPLERS))],
    "variant": [StrOptions({"cos", "cossin"})],
}


class RandomFourierFeatures(GammaGridMixin, FeatureMap):
    r"""Random Fourier features for the Gaussian, Laplacian and Cauchy kernels.

    Maps ``x`` to ``z(x)`` with ``z(x)' z(y) ~= k(x, y)`` for a shift-invariant
    kernel ``k`` (Rahimi & Recht 2007, Algorithm 1).  By Bochner's theorem
    ``k(x - y) = E_w[cos(w' (x - y))]`` where ``w`` is drawn from the Fourier
    transform ``p(w)`` of ``k`` (Figure 1); averaging over ``m`` draws gives eq. (2)
    with

    * ``variant="cos"``: ``z(x) = sqrt(2/D) cos(W' x + b)``, ``D = m =
      n_components`` frequencies, ``b ~ U[0, 2 pi]``;
    * ``variant="cossin"``: ``z(x) = sqrt(2/D) [cos(W' x), sin(W' x)]`` with
      ``m = D/2`` frequencies, i.e. ``sqrt(1/m)`` per pair, so that
      ``z(x)' z(y) = (1/m) sum_i cos(w_i' (x - y))`` (lower variance than "cos"
      for the same ``D``; ``n_components`` must be even).

    Both are unbiased estimators of ``k(x, y)``.

    Prefix maps (:mod:`rfstream.features.prefix`): the first ``n`` columns
    ("cos"), or the first ``n/2`` cosines and sines ("cossin", ``n`` even), are
    the map of ``n`` components made of the first ``n`` (``n/2``) frequencies,
    for every sampler: i.i.d. draws ("mc"); the first points of the scrambled
    Sobol sequence ("qmc", Avron et al. 2016; balanced at powers of two); whole
    orthogonal blocks of ``d`` frequencies and the first columns of the next
    ("orthogonal": Yu et al. 2016 stack independent ``d x d`` blocks and keep
    the first rows, as :func:`rfstream.samplers.sample_orthogonal` cuts its own
    last block).  With "qmc", and "orthogonal" with "cossin", they are exactly
    the frequencies a fit of ``n`` components with the same seed draws.

    Parameters
    ----------
    n_components : int, default=100
        Number of output features ``D``.
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        Kernel and spectral density (Rahimi & Recht 2007, Figure 1), with
        ``delta = x - y``:

        - "gaussian": ``exp(-gamma ||delta||_2^2)``, ``w ~ N(0, 2 gamma I)``
          (same convention as :class:`sklearn.kernel_approximation.RBFSampler`);
        - "laplacian": ``exp(-gamma ||delta||_1)``, ``w_j ~ Cauchy(0, gamma)``;
        - "cauchy": ``prod_j 1 / (1 + gamma delta_j^2)``,
          ``w_j ~ Laplace(0, sqrt(gamma))``.
    gamma : float > 0 or "auto", default=1.0
        Inverse bandwidth, as in the formulas above (a length scale ``sigma``
        corresponds to ``1/(2 sigma^2)``, ``1/sigma`` and ``1/sigma^2`` for the
        three kernels).  "auto": ``sigma`` is the mean distance to the 50th
        nearest neighbour among 1000 rows sampled from ``X``
        (:func:`rfstream.kernels.auto_gamma`).  "auto*F": F times that.  A list of
        these is a bandwidth grid (:mod:`rfstream.features.grid`): the
        frequencies are drawn once for ``gamma = 1`` and scaled to each gamma,
        ``transform`` gives the stacked features of every gamma, and a ridge
        solver fitted on them searches every (gamma, alpha) in its two passes,
        then sets this map to the chosen gamma (:meth:`select_gamma`).
    sampler : {"mc", "qmc", "orthogonal"}, default="mc"
        How the frequencies ``W`` are drawn (:mod:`rfstream.samplers`): i.i.d.
        Monte Carlo; scrambled Sobol points through the inverse CDF; or
        orthogonal random features (Yu et al. 2016, "Orthogonal Random
        Features", NeurIPS), Gaussian kernel only.
    variant : {"cos", "cossin"}, default="cos"
        Feature form, see above.
    random_state : int, numpy Generator, RandomState or None, default=None
        Seed of every random quantity; all are drawn once in ``fit``.
    dtype : {"float32", "float64"}, default="float32"
        Dtype of the weights and of the output; ``x @ W`` is computed in it.

    Attributes
    ----------
    gamma_ : float
        Resolved ``gamma``.
    gamma_grid_ : ndarray of shape (G,)
        The resolved gammas of a grid (``gamma`` a list only).
    random_weights_ : ndarray of shape (n_features_in_, m)
        Frequencies ``W`` (one per column), in ``dtype``; ``m = n_components``
        for "cos", ``n_components // 2`` for "cossin".
    random_offset_ : ndarray of shape (m,)
        Phases ``b`` (``variant="cos"`` only), in ``dtype``.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Only when ``X`` in ``fit`` has string column names.

    Notes
    -----
    ``transform`` of a dask array is lazy, one output block per row block; the
    output for a row does not depend on the chunking.  With float32 the phase
    ``w' x`` carries a relative error of about 1e-7 times ``|w| |x|``; use
    ``dtype="float64"`` for badly scaled data.

    References
    ----------
    A. Rahimi and B. Recht, "Random Features for Large-Scale Kernel Machines",
    NIPS 2007.  F. X. Yu, A. T. Suresh, K. Choromanski, D. Holtmann-Rice and
    S. Kumar, "Orthogonal Random Features", NIPS 2016.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream.features import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(5, 3))
    >>> rff = RandomFourierFeatures(n_components=8, random_state=0).fit(X)
    >>> rff.transform(X).shape, rff.transform(X).dtype
    ((5, 8), dtype('float32'))
    """

    _parameter_constraints: dict = {**FeatureMap._parameter_constraints, **FOURIER_PARAMETERS}
    prefix_valid = True

    def __init__(
        self,
        n_components=100,
        *,
        kernel="gaussian",
        gamma=1.0,
        sampler="mc",
        variant="cos",
        random_state=None,
        dtype="float32",
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.sampler = sampler
        self.variant = variant
        self.random_state = random_state
        self.dtype = dtype

    def fit(self, X, y=None):
        """Draw the frequencies (:meth:`FeatureMap.fit`); a Standardizer's dask output also names
        its 0/1 passthrough columns (:func:`rfstream.preprocess.binary_passthrough`), which the
        "cos" projection sums as rows of ``W`` (:mod:`rfstream.features.onehot`)."""
        onehot = binary_passthrough(X)
        super().fit(X, y)
        self._binary_columns_ = onehot  # private: not saved with the model (it then multiplies)
        return self

    def _check_params(self, n_features):
        if self.variant == "cossin" and self.n_components % 2:
            raise ParameterError("{n_components} must be even with {variant=} (a cos and a sin feature per "
                                 f"frequency); got {self.n_components}.", n_components=self.n_components,
                                 variant="cossin")
        check_sampler(self.sampler, self.kernel)

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`)."""
        d, n = view.int("n_features_in_"), view.int("n_components", param=True)
        cos = view.params.get("variant") == "cos"
        m = n if cos else n // 2  # "cossin": a cosine and a sine per frequency
        view.array("random_weights_", (d, m))
        view.array("random_offset_", (m,), optional=not cos)
        view.number("gamma_", positive=True)

    def _draw(self, rng, n_features):
        """Frequencies drawn for ``gamma = 1`` (float64, kept as ``_unit_weights``) and
        scaled to ``gamma_`` (:func:`rfstream.kernels.frequency_scale`): one draw serves
        every gamma of a grid (:meth:`at_gamma`)."""
        dtype = self._output_dtype()
        m = self.n_components if self.variant == "cos" else self.n_components // 2
        self._unit_weights = sample_weights(self.sampler, self.kernel, 1.0, n_features, m, rng)
        self.random_weights_ = self._scaled_weights(self.gamma_)
        if self.variant == "cos":
            self.random_offset_ = rng.uniform(0.0, 2.0 * np.pi, size=m).astype(dtype)
        elif hasattr(self, "random_offset_"):  # refit with the other variant
            del self.random_offset_

    def _scaled_weights(self, gamma):
        return (frequency_scale(self.kernel, gamma) * self._unit_weights).astype(self._output_dtype())

    def at_gamma(self, gamma):
        """A copy of this fitted map with bandwidth ``gamma``: the same draw, scaled."""
        twin = copy.copy(self)
        twin.gamma_, twin.random_weights_ = float(gamma), self._scaled_weights(gamma)
        return twin

    @property
    def _n_features_out(self):
        m = self.random_weights_.shape[1]
        return m if self.variant == "cos" else 2 * m

    @property
    def _prefix_step(self):
        return 1 if self.variant == "cos" else 2  # "cossin": a cosine and a sine per frequency

    def _prefix_columns(self, n):
        if self.variant == "cos":
            return np.arange(n)
        half = np.arange(n // 2)
        return np.concatenate([half, self.random_weights_.shape[1] + half])

    def _keep_prefix(self, n):
        """The first ``n`` (``n/2`` for "cossin") frequencies, phases and unit draws."""
        m = n // self._prefix_step
        self.random_weights_ = self.random_weights_[:, :m].copy()
        if hasattr(self, "_unit_weights"):  # absent on a loaded map
            self._unit_weights = self._unit_weights[:, :m].copy()
        if self.variant == "cos":
            self.random_offset_ = self.random_offset_[:m].copy()

    def _block(self, x):
        return self._block_into(x)

    def _block_into(self, x, out=None):
        W = self.random_weights_
        m = W.shape[1]
        if self.variant == "cos":
            return self._fused_block()(x, out)  # the cosines times sqrt(2/m)
        proj = np.asarray(x.astype(W.dtype) @ W) if sp.issparse(x) else np.asarray(x, W.dtype) @ W
        out = np.empty((proj.shape[0], 2 * m), dtype=W.dtype)
        np.cos(proj, out=out[:, :m])
        np.sin(proj, out=out[:, m:])
        out *= math.sqrt(1.0 / m)
        return out

    def _projection_into(self, x, out=None):
        """``W' x + b`` ("cos" variant), written into ``out`` for dense rows ``x``."""
        W = self.random_weights_
        if sp.issparse(x):
            proj = np.asarray(x.astype(W.dtype) @ W)
            proj += self.random_offset_
            return proj
        onehot = getattr(self, "_binary_columns_", ())
        if onehot:
            return project_split(np.asarray(x), W, self.random_offset_, onehot, out=out,
                                 split=kept_weights(split_weights, W, self.random_offset_, onehot))
        return project_with_offset(np.asarray(x), W, self.random_offset_, out=out,
                                   Wb=stacked_weights(W, self.random_offset_))

    def _cosines_into(self, x, out=None):
        """``cos(W' x + b)`` ("cos" variant), written into ``out`` for dense rows ``x``: the
        features before their ``sqrt(2/D)``."""
        proj = self._projection_into(x, out)
        np.cos(proj, out=proj)
        return proj

    def _fused_block(self):
        """``sqrt(2/D)`` times the cosines (:class:`~rfstream.features.fused.ScaledBlock`) for the
        "cos" variant, so that a pass may apply the constant to its partials (and the cosines to
        its buffer's whole rows); else ``_block_into``."""
        device = self._device_features()
        if self.variant != "cos":
            return DeviceTwin(self._block_into, device)
        return ScaledBlock(self._cosines_into, math.sqrt(2.0 / self.random_weights_.shape[1]),
                           (self._projection_into, np.cos), device)

    def _device_features(self):
        """The features in the rows' array namespace (:class:`~rfstream.features.on_device.FourierOnDevice`)."""
        return FourierOnDevice(self.random_weights_, getattr(self, "random_offset_", None)
                               if self.variant == "cos" else None, self.variant)


_KEPT = OrderedDict()  # (make, id(W), id(b), extra) -> (W, b, made): the last few
_KEPT_LOCK = threading.Lock()


def kept_weights(make, W, b, *extra):
    """``make(W, b, *extra)``, kept for the last few such calls in this process: a task makes the
    features of many sub-blocks (:func:`rfstream.features.fused.stream_rows`) from weights derived
    once, and the map itself stays unchanged, as scikit-learn asks of ``transform``.  Each entry
    holds ``W`` and ``b``, so the ids that find it cannot name other arrays."""
    key = (make, id(W), id(b), extra)
    with _KEPT_LOCK:
        kept = _KEPT.get(key)
        if kept is not None:
            _KEPT.move_to_end(key)
            return kept[2]
    made = make(W, b, *extra)
    with _KEPT_LOCK:
        _KEPT[key] = (W, b, made)
        while len(_KEPT) > 4:
            _KEPT.popitem(last=False)
    return made


def stacked_weights(W, b):
    """``[W; b]`` (:func:`stack_offset`), kept for the last few ``(W, b)`` (:func:`kept_weights`)."""
    return kept_weights(stack_offset, W, b)


def stack_offset(W, b):
    """``[W; b]``: the weights with the offsets as one more row, in ``W``'s dtype."""
    Wb = np.empty((W.shape[0] + 1, W.shape[1]), dtype=W.dtype)
    Wb[:-1] = W
    Wb[-1] = b
    return Wb


def project_with_offset(x, W, b, out=None, Wb=None):
    """``x @ W + b`` as one GEMM, ``[x, 1] @ [W; b]`` (not one more pass over the block to add
    ``b``), in ``W``'s dtype; ``Wb``: ``[W; b]`` when the caller keeps it (:func:`stack_offset`)."""
    xa = np.empty((x.shape[0], x.shape[1] + 1), dtype=W.dtype)
    xa[:, :-1] = x
    xa[:, -1] = 1.0
    return np.matmul(xa, stack_offset(W, b) if Wb is None else Wb, out=out)
