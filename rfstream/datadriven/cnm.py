"""Compact Nonlinear Maps (Yu, Kumar, Rowley & Chang 2015): learned random Fourier features.

``Z(x) = sqrt(2/k) cos(Theta' x + b)`` with ``Theta`` (``d x k``) initialized as
random Fourier features and then learned, jointly with a linear SVM ``w``, by
alternating mini-batch SGD (Algorithm 3): ``T1`` Pegasos steps on ``w`` with
``Theta`` fixed (Algorithm 1, gradient eq. 7; :func:`rfstream.solvers.sgd_steps`),
then ``T2`` SGD steps on ``Theta`` with ``w`` fixed (Algorithm 2, gradient eq. 9).
``objective="kernel"`` learns ``Theta`` for kernel approximation instead (Section
5, eqs. 10-11); ``structure="circulant"`` learns a circulant ``R = circ(r)``
(Section 8.3, FFT gradient of eqs. 16-17).

Data access: every outer iteration draws its ``(T1 + T2) x batch_size`` row
indices from ``(seed, iteration)`` (stream :data:`rfstream.random.STREAM_CNM_BATCHES`)
and gathers those rows in one ``X[idx]`` (dask reads only the chunks that hold
them); the mini-batches are slices of that sample.  The held-out rows for early
stopping are drawn once from ``(seed, STREAM_CNM_HOLDOUT)`` and never trained on.
The result therefore depends on the seed only, not on the chunking or the
number of workers, and a numpy array gives the same model as a dask array.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import ClassVar

import dask.array as da
import numpy as np
from dask.base import is_dask_collection
from sklearn.base import ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_dask_array
from ..cluster import compute
from ..features._base import FeatureMap
from ..features.circulant import circulant_grad, circulant_project, dense_rows
from ..kernels import KERNELS, kernel_matrix, sample_frequencies
from ..random import (
    STREAM_CNM_BATCHES,
    STREAM_CNM_HOLDOUT,
    check_seed,
    sample_row_indices,
)
from ..solvers import sgd_steps
from ..solvers._linear import _scores_to_labels, labels_from_scores
from ..solvers._losses import crammer_singer, hinge, multinomial

__all__ = ["CompactNonlinearMap"]

#: at most this many held-out rows are gathered for early stopping
MAX_VALIDATION_ROWS = 10_000
#: theta_step=None: the constant map step per objective (docs/cnm.md, step sweep)
DEFAULT_STEP = {"classification": 0.2, "kernel": 2.0}
#: gamma="paper": Section 7's 2/sigma^2 over rfstream's "auto" 1/(2 sigma^2)
PAPER_GAMMA_FACTOR = 4.0
#: held-out rows whose pairs give the validation kernel MSE (objective="kernel")
KERNEL_VALIDATION_ROWS = 1000


# ------------------------------------------------------------ the map and its gradient
def _phases(x, params, k):
    """``u = Theta' x + b`` (dense) or ``circ(r) D x + b`` (circulant), float64."""
    if "theta" in params:
        return x @ params["theta"] + params["offset"]
    xs = x * params["signs"]
    return circulant_project(xs, params["r"], k) + params["offset"]


def features(x, params, k):
    """``Z(x) = sqrt(2/k) cos(u)`` and the phases ``u`` (float64)."""
    u = _phases(x, params, k)
    return math.sqrt(2.0 / k) * np.cos(u), u


def map_gradient(x, params, k, u, dZ):
    """Gradient of ``sum(dZ * Z(x))`` with respect to the learned parameters.

    ``dZ`` (m, k) is the derivative of the objective with respect to the
    features.  Chain rule through ``Z = sqrt(2/k) cos(u)``:
    ``dU = -sqrt(2/k) sin(u) dZ``, then ``d/dTheta = x' dU`` (eq. 9 for the
    hinge loss, eq. 11 for the kernel MSE), ``d/db = sum_rows dU``, or for the
    circulant map the FFT cross-correlation of eqs. 16-17
    (:func:`rfstream.features.circulant.circulant_grad`).  Returns a dict with
    the keys of the learned parameters.
    """
    dU = -math.sqrt(2.0 / k) * np.sin(u) * dZ
    grad = {"offset": dU.sum(axis=0)}
    if "theta" in params:
        grad["theta"] = x.T @ dU
    else:
        grad["r"] = circulant_grad(x * params["signs"], dU, params["r"].shape[0])
    return grad


#: loss of the classifier per ``multiclass`` option: targets +-1 (m, K) for "ovr",
#: class indices (m,) otherwise
CLASS_LOSSES = {"ovr": hinge, "multinomial": multinomial, "crammer-singer": crammer_singer}
#: the same losses by their name in :func:`rfstream.solvers.sgd_steps` (the w-step)
W_STEP_LOSSES = {"ovr": "hinge", "multinomial": "multinomial", "crammer-singer": "crammer_singer"}


def classification_objective(x, Y, params, k, coef, intercept, multiclass="ovr"):
    """Mean loss of ``w' Z(x)`` (eq. 8 for "ovr") and ``dLoss/dZ`` for a batch.

    ``Y``: +-1 (m, K) for the OvR hinge, class indices (m,) for "multinomial"
    and "crammer-singer".  ``dLoss/dZ = g W / m`` with ``g = dL/dscores``: one
    chain rule for every loss, continued by :func:`map_gradient`.
    """
    Z, u = features(x, params, k)
    loss, g = CLASS_LOSSES[multiclass](Z @ coef.T + intercept, Y)  # g = dL/dscores (m, K)
    m = x.shape[0]
    return loss.mean(), (g @ coef) / m, u


def hinge_objective(x, Y, params, k, coef, intercept):
    """Mean OvR hinge loss (eq. 8) and ``dLoss/dZ`` for a batch; ``Y`` is +-1 (m, K)."""
    return classification_objective(x, Y, params, k, coef, intercept, "ovr")


def kernel_objective(x, params, k, kernel, gamma):
    """Mean squared kernel error over all pairs of the batch (eq. 10) and ``dLoss/dZ``.

    ``E = Z Z' - K``; ``d mean(E^2) / dZ = 4 E Z / m^2`` (``E`` symmetric), the
    pair sum of eq. 11.
    """
    Z, u = features(x, params, k)
    E = Z @ Z.T - kernel_matrix(x, kernel=kernel, gamma=gamma)
    m = x.shape[0]
    return float(np.mean(E**2)), 4.0 * (E @ Z) / (m * m), u


# ------------------------------------------------------------ rows
def _gather(X, y, idx):
    """Rows ``idx`` (sorted, distinct) of numpy or dask ``X`` (and ``y``), as numpy float64."""
    if isinstance(X, da.Array):
        xs, ys = compute(X[idx], None if y is None else y[idx])  # one graph, one pass
    else:
        xs, ys = X[idx], (None if y is None else np.asarray(y)[idx])
    return dense_rows(xs, np.float64), ys


def _train_index(j, holdout):
    """The ``j``-th row that is not held out (``holdout`` sorted), vectorized over ``j``."""
    if holdout.size == 0:
        return j
    return j + np.searchsorted(holdout - np.arange(holdout.size), j, side="right")


class CompactNonlinearMap(ClassifierMixin, FeatureMap):
    r"""Compact Nonlinear Map: random Fourier features learned for a task (transformer and classifier).

    Minimizes ``lambda/2 ||w||^2 + 1/N sum_i L(y_i, w' Z(x_i))`` (eq. 5) over
    ``w`` and the map ``Z(x) = sqrt(2/k) cos(Theta' x + b)`` (eq. 4 with the
    phase ``b`` of random Fourier features, i.e. the bias the paper adds by
    augmenting ``x``), by alternating minimization (Algorithm 3):

    1. ``Theta, b`` initialized as random Fourier features of ``kernel`` with
       ``gamma`` (``"auto"``: rfstream's bandwidth rule, ``sigma`` = mean
       distance to the 50th nearest neighbour of 1000 sampled rows and
       ``gamma = 1/(2 sigma^2)``; ``"paper"``: Section 7's literal
       ``gamma = 2/sigma^2``, see below), ``w = 0``;
    2. repeat ``max_iter`` times: ``n_steps_w`` (``T1``) Pegasos steps on
       ``w`` (Algorithm 1, eq. 7, step ``1/(lambda t)`` with ``t`` counted over
       all iterations, projection on the ``1/sqrt(lambda)`` ball), run by
       :func:`rfstream.solvers.sgd_steps`; then ``n_steps_theta`` (``T2``) SGD
       steps on ``(Theta, b)`` with ``w`` fixed (Algorithm 2, gradient eq. 9).

    Every step uses a mini-batch of ``batch_size`` rows drawn at random from
    the training rows (see the module docstring for how rows are gathered).

    **Theta's step size** (``theta_step``).  Algorithm 2 reuses Pegasos'
    ``1/(lambda t)``, which for the small ``lambda`` that suits the w-step is
    orders of magnitude too large for ``Theta``: the phases jump by many
    periods and accuracy collapses (worst at small ``k``).  We use a constant
    step ``eta_t = theta_step`` (deviation from the paper), default 0.2 (2.0
    for the kernel objective),
    chosen on held-out rows of letter and magic04 (docs/cnm.md has the sweep).

    **Averaging** (``average=True``, deviation): the ``w`` used by the
    Theta-step, for scoring and as ``coef_`` is the mean of the ``T1`` Pegasos
    iterates of the last w-step (Pegasos continues from its last iterate).
    Pegasos' last iterate at small ``lambda`` jumps between steps, which made
    the held-out accuracy oscillate by several points from one iteration to
    the next; the average removes most of that (docs/cnm.md).

    **Regularization** (Section 6.1): no penalty on ``Theta``; early stopping.
    With ``early_stopping=True`` a ``validation_fraction`` of the rows (at most
    :data:`MAX_VALIDATION_ROWS`) is held out; after every w-step the current
    ``(Theta, b, w)`` is scored on them (accuracy, or the kernel MSE over their
    pairs for ``objective="kernel"``); the best one is kept and training stops
    after ``n_iter_no_change`` iterations without improvement.  The first
    candidate is the initial random Fourier map with its Pegasos ``w``.

    **Bandwidth.**  Section 7 sets ``gamma = 2/sigma^2`` without writing the
    kernel out; read with the usual RBF convention ``exp(-gamma ||x-y||^2)``
    (rfstream's), that is 4 x the ``"auto"`` value ``1/(2 sigma^2)`` that
    every rfstream map uses.  ``gamma="paper"`` (Gaussian kernel only) takes
    that literal reading; the default stays ``"auto"`` so that CNM starts
    from the same random map as :class:`~rfstream.RandomFourierFeatures` with
    ``gamma="auto"``.  CNM's own accuracy moves by about a point between the
    two on letter and magic04; random Fourier features with 128-256 features
    lose 4-11 points at 4 x ``"auto"`` (docs/cnm.md, bandwidth grid).

    **Multi-class** (``multiclass``, more than two classes; two classes
    always use the paper's binary hinge).  ``"ovr"`` (default): ``K`` binary
    hinge problems (class vs rest) share the map: the w-step is Pegasos on each
    row of ``coef_`` (each in its own ball, as :func:`~rfstream.solvers.sgd_steps`
    does for OvR), and the Theta-step gradient is the sum of the ``K``
    gradients of eq. 9, i.e. ``dL/dZ = g W`` with ``g`` the hinge
    derivatives.  ``"crammer-singer"``: the multi-class hinge
    ``max(0, 1 + max_{j != y} w_j' Z - w_y' Z)`` (Crammer & Singer 2001) in
    eq. 5, i.e. one SVM over all classes, the natural multi-class form of the
    paper's objective; the w-step is Pegasos on it
    (``sgd_steps(loss="crammer_singer")``, step ``1/(lambda t)``, ball of
    radius ``sqrt(2/lambda)``).  ``"multinomial"``: the softmax cross-entropy, w-step
    by ``sgd_steps(loss="multinomial")`` (Pegasos schedule capped by the
    loss's smoothness).  In both the Theta-gradient is the same chain rule
    ``dL/dZ = g W / m`` through :func:`map_gradient`, with ``g`` the loss's
    derivative with respect to the ``K`` scores.  With OvR the map is pulled
    by ``K`` problems that each see one class against the rest; a joint loss
    only cares about the margin to the closest wrong class, which on letter
    (26 classes) gave 1.7-3.5 points (Crammer-Singer) and 0.4-2.7 points
    (multinomial) more than OvR at the same ``k`` and gamma (docs/cnm.md).

    ``objective="kernel"`` (Section 5): only ``Theta, b`` are learned, by SGD on
    the squared kernel error over all pairs of each mini-batch (eqs. 10-11);
    ``y`` is ignored and the estimator is a transformer only (``predict``
    raises).  ``structure="circulant"``: ``Theta' x`` is replaced by the
    circulant map ``circ(r) D x`` of :class:`~rfstream.CirculantFeatures`
    (random signs ``D`` fixed, ``r`` learned with the FFT gradient of eqs.
    16-17, ``O(k)`` parameters).

    Parameters
    ----------
    n_components : int, default=32
        ``k``, the number of features.
    objective : {"classification", "kernel"}, default="classification"
    structure : {"dense", "circulant"}, default="dense"
    kernel : {"gaussian", "laplacian", "cauchy"}, default="gaussian"
        Kernel of the random Fourier initialization (and the kernel approximated
        with ``objective="kernel"``).
    gamma : float > 0, "auto" or "paper", default="auto"
        Bandwidth of the initial random Fourier map; "paper" is 4 x "auto"
        (``2/sigma^2``, Gaussian kernel only), see above.
    alpha : float, default=1e-4
        ``lambda`` of eq. 5 (the w-step's regularization; not given in the
        paper).  Held-out accuracy preferred 1e-5 on letter (with
        ``multiclass="crammer-singer"``) and 1e-4 on magic04 (docs/cnm.md).
    multiclass : {"ovr", "crammer-singer", "multinomial"}, default="crammer-singer"
        Loss of the classifier with more than two classes, see above (the
        multi-class hinge measured best on letter; two classes always use the
        paper's binary hinge).
    max_iter : int, default=200
        Outer iterations ``T`` of Algorithm 3 (the paper: "a few hundred"
        iterations suffice), each ``n_steps_w + n_steps_theta`` steps; early
        stopping usually ends the run well before.  On letter 200 (with
        ``n_iter_no_change=30``) added 0.3-2.3 points over 30 (docs/cnm.md).
    n_steps_w : int, default=100
        ``T1``, Pegasos steps per iteration (the paper's 100).
    n_steps_theta : int, default=100
        ``T2``, map steps per iteration (the paper's 100).
    batch_size : int, default=500
        Rows per mini-batch (the paper's 500).
    theta_step : float or None, default=None
        Constant SGD step of ``Theta``, ``b`` (or ``r``), see above; 0 keeps the
        random map (random Fourier features trained with Pegasos).  None: 0.2
        for ``objective="classification"``, 2.0 for ``objective="kernel"``
        (whose gradient, eq. 11, is an average over pairs and much smaller).
    early_stopping : bool, default=True
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=30
    average : bool, default=True
        Average the Pegasos iterates of each w-step, see above.
    random_state : int, Generator, RandomState or None, default=None
    dtype : {"float32", "float64"}, default="float32"
        Of the stored map and of ``transform``'s output (the optimization runs
        in float64).

    Attributes
    ----------
    gamma_ : float
    projection_ : ndarray of shape (n_features_in_, k)
        Learned ``Theta`` (``structure="dense"``).
    circulant_ : ndarray of shape (ceil(k / d), d)
        Learned ``r`` per block; ``signs_`` (d,) the fixed ``D``
        (``structure="circulant"``).
    offset_ : ndarray of shape (k,)
        Learned phases ``b``.
    classes_ : ndarray
        (``objective="classification"``.)
    coef_ : ndarray of shape (1, k) or (n_classes, k)
    intercept_ : ndarray of shape (1,) or (n_classes,)
        The linear SVM ``w`` trained with the map (used by ``predict``).
    n_iter_ : int
        Outer iterations run.
    best_iter_ : int
        Iteration whose model was kept (0: the random initialization).
    validation_path_ : list of float
        Held-out accuracy (or kernel MSE) of each candidate.
    t_ : int
        Pegasos step counter.
    n_features_in_ : int

    References
    ----------
    F. X. Yu, S. Kumar, H. Rowley and S.-F. Chang, "Compact Nonlinear Maps and
    Circulant Extensions", arXiv:1503.03893, 2015.  S. Shalev-Shwartz et al.,
    "Pegasos: primal estimated sub-gradient solver for SVM", 2011.
    K. Crammer and Y. Singer, "On the algorithmic implementation of multiclass
    kernel-based vector machines", JMLR 2001.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import CompactNonlinearMap
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(600, 2)); y = (np.hypot(*X.T) > 1.2).astype(int)
    >>> cnm = CompactNonlinearMap(8, max_iter=3, random_state=0).fit(X, y)
    >>> cnm.transform(X).shape, cnm.predict(X[:3]).shape
    ((600, 8), (3,))
    """

    _parameter_constraints: ClassVar[dict] = {
        **FeatureMap._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "objective": [StrOptions({"classification", "kernel"})],
        "structure": [StrOptions({"dense", "circulant"})],
        "kernel": [StrOptions(set(KERNELS))],
        "gamma": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto", "paper"})],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "multiclass": [StrOptions({"ovr", "multinomial", "crammer-singer"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_steps_w": [Interval(Integral, 1, None, closed="left")],
        "n_steps_theta": [Interval(Integral, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "theta_step": [Interval(Real, 0, None, closed="left"), None],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "average": ["boolean"],
    }

    def __init__(self, n_components=32, *, objective="classification", structure="dense",
                 kernel="gaussian", gamma="auto", alpha=1e-4, multiclass="crammer-singer", max_iter=200,
                 n_steps_w=100,
                 n_steps_theta=100, batch_size=500, theta_step=None, early_stopping=True,
                 validation_fraction=0.1, n_iter_no_change=30, average=True, random_state=None,
                 dtype="float32"):
        self.n_components = n_components
        self.objective = objective
        self.structure = structure
        self.kernel = kernel
        self.gamma = gamma
        self.alpha = alpha
        self.multiclass = multiclass
        self.max_iter = max_iter
        self.n_steps_w = n_steps_w
        self.n_steps_theta = n_steps_theta
        self.batch_size = batch_size
        self.theta_step = theta_step
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.average = average
        self.random_state = random_state
        self.dtype = dtype

    # ------------------------------------------------------------ FeatureMap hooks
    def _resolve_gamma(self, X, rng):
        """``"paper"``: Section 7's ``2/sigma^2``, i.e. 4 x the ``"auto"`` ``1/(2 sigma^2)``."""
        if self.gamma != "paper":
            return super()._resolve_gamma(X, rng)
        if self.kernel != "gaussian":
            raise ValueError(
                f"gamma='paper' (Section 7's 2/sigma^2 for the RBF kernel) needs "
                f"kernel='gaussian'; got kernel={self.kernel!r}. Use gamma='auto' or a float."
            )
        return PAPER_GAMMA_FACTOR * super()._resolve_gamma(X, rng)

    def _draw(self, rng, n_features):
        """Random Fourier initialization (Algorithm 3, line 1), float64."""
        k, d = self.n_components, n_features
        if self.structure == "dense":
            params = {"theta": sample_frequencies(self.kernel, self.gamma_, (d, k), rng)}
        else:
            params = {
                "r": sample_frequencies(self.kernel, self.gamma_, (-(-k // d), d), rng),
                "signs": np.where(rng.random(d) < 0.5, -1.0, 1.0),
            }
        params["offset"] = rng.uniform(0.0, 2.0 * np.pi, size=k)
        return params

    @property
    def _n_features_out(self):
        return self.offset_.shape[0]

    def _params(self, dtype=np.float64):
        if self.structure == "dense" and hasattr(self, "projection_"):
            p = {"theta": self.projection_}
        else:
            p = {"r": self.circulant_, "signs": self.signs_}
        p["offset"] = self.offset_
        return {key: np.asarray(v, dtype=dtype) for key, v in p.items()}

    def _block(self, x):
        dtype = self._output_dtype()
        Z, _ = features(dense_rows(x, dtype), self._params(dtype), self._n_features_out)
        return Z.astype(dtype, copy=False)

    def _set_params_(self, params):
        dtype = self._output_dtype()
        for name in ("projection_", "circulant_", "signs_"):
            if hasattr(self, name):
                delattr(self, name)
        if "theta" in params:
            self.projection_ = params["theta"].astype(dtype)
        else:
            self.circulant_ = params["r"].astype(dtype)
            self.signs_ = params["signs"].astype(dtype)
        self.offset_ = params["offset"].astype(dtype)

    # ------------------------------------------------------------ fit
    def _check_fit_input(self, X, y):
        classify = self.objective == "classification"
        if classify and y is None:
            raise ValueError(
                "y is required with objective='classification'; pass labels, or use "
                "objective='kernel' to learn the map for kernel approximation without labels."
            )
        if not is_dask_collection(X):
            if classify:
                X, y = validate_data(self, X, y, accept_sparse=("csr", "csc"),
                                     dtype=[np.float64, np.float32])
            else:
                X = validate_data(self, X, accept_sparse=("csr", "csc"),
                                  dtype=[np.float64, np.float32])
                y = None
            return X, y
        X = check_dask_array(X, self, reset=True)
        if not classify:
            return X, None
        if np.ndim(y) != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(f"y must be 1-D with one label per row of X ({X.shape[0]}); "
                             f"got shape {getattr(y, 'shape', None)}.")
        if not isinstance(y, da.Array):
            y = np.asarray(y)
        return X, y

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Learn the map (and, for classification, the linear SVM) by Algorithm 3.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            A dask array is never loaded: each outer iteration gathers its
            ``(n_steps_w + n_steps_theta) * batch_size`` sampled rows (at most).
        y : array-like or dask array of shape (n_samples,), or None
            Labels; required with ``objective="classification"``, ignored with
            ``objective="kernel"``.

        Returns
        -------
        self : object
        """
        self._output_dtype()
        X, y = self._check_fit_input(X, y)
        n, d = int(X.shape[0]), int(X.shape[1])
        seed = check_seed(self.random_state)
        rng = np.random.default_rng(seed)
        self.gamma_ = self._resolve_gamma(X, rng)
        params = self._draw(rng, d)
        classify = self.objective == "classification"
        if classify:
            self._init_classes(y)
        # held-out rows (early stopping), drawn once and never trained on
        n_val = min(math.ceil(self.validation_fraction * n), MAX_VALIDATION_ROWS, n - 1)
        n_val = n_val if self.early_stopping else 0
        holdout = (sample_row_indices(n, n_val, np.random.default_rng([seed, STREAM_CNM_HOLDOUT]))
                   if n_val else np.empty(0, dtype=np.int64))
        val = _gather(X, y, holdout) if n_val else None
        state = _State(params, self, d)
        best = (-np.inf, None, 0)
        self.validation_path_, no_change, it = [], 0, 0
        for it in range(self.max_iter + 1):
            draw = np.random.default_rng([seed, STREAM_CNM_BATCHES, it])
            n_steps = (self.n_steps_w if classify else 0) + (
                self.n_steps_theta if it < self.max_iter else 0)
            pos = draw.integers(0, n - holdout.size, size=(n_steps, min(self.batch_size, n)))
            rows = _train_index(pos, holdout)
            idx, inverse = np.unique(rows, return_inverse=True)
            xs, ys = _gather(X, y, idx) if n_steps else (None, None)
            batches = inverse.reshape(rows.shape)
            if classify:
                state.w_step(xs, self._encode(ys), batches[: self.n_steps_w])
                batches = batches[self.n_steps_w :]
            if val is not None:  # score the candidate (map, w) and keep the best
                score = state.score(*val, self)
                self.validation_path_.append(score)
                if score > best[0]:
                    best, no_change = (score, state.copy(), it), 0
                else:
                    no_change += 1
            if it == self.max_iter or (val is not None and no_change >= self.n_iter_no_change):
                break
            state.map_step(xs, self._encode(ys) if classify else None, batches)
        if val is not None:
            self.validation_path_ = [abs(float(s)) for s in self.validation_path_]
            state, self.best_iter_ = best[1], best[2]
        else:
            self.best_iter_ = it
        self.n_iter_ = it
        self._set_params_(state.params)
        if classify:
            self.coef_, self.intercept_, self.t_ = state.w.copy(), state.b.copy(), state.t
        else:  # a refit with objective="kernel" keeps no classifier from an earlier fit
            for name in ("coef_", "intercept_", "t_", "classes_"):
                self.__dict__.pop(name, None)
        return self

    def _init_classes(self, y):
        classes = compute(da.unique(y)) if isinstance(y, da.Array) else np.unique(y)
        if classes.dtype.kind == "f" and np.any(classes != np.round(classes)):
            raise ValueError(
                "Unknown label type: continuous (y has non-integer float values). "
                f"{type(self).__name__} is a classifier; pass class labels."
            )
        if classes.size < 2:
            raise ValueError(f"y must have at least 2 classes; got {classes.tolist()}.")
        self.classes_ = np.asarray(classes)

    def _encode(self, y):
        """+-1 targets (m, K) for the OvR hinge (K = 1 for two classes); class indices otherwise."""
        idx = np.searchsorted(self.classes_, y)
        if self.classes_.size == 2:
            return np.where(idx == 1, 1.0, -1.0)[:, None]
        if self.multiclass != "ovr":
            return idx
        return np.where(idx[:, None] == np.arange(self.classes_.size)[None, :], 1.0, -1.0)

    # ------------------------------------------------------------ classifier API
    def _check_classifier(self):
        check_is_fitted(self)
        if self.objective != "classification":
            raise ValueError(
                "objective='kernel' learns no classifier; train a solver on transform(X) "
                "(e.g. StreamingSGDClassifier) or use objective='classification'."
            )

    def _decision_block(self, x):
        s = self._block(x).astype(np.float64) @ self.coef_.T + self.intercept_
        return s[:, 0] if s.shape[1] == 1 else s

    def decision_function(self, X):
        """Scores ``Z(x) w + b``: (n,) for two classes, (n, n_classes) otherwise; lazy for dask."""
        self._check_classifier()
        X = self._check_input(X, reset=False)
        if not isinstance(X, da.Array):
            return self._decision_block(X)
        K = self.coef_.shape[0]
        chunks = (X.chunks[0],) if K == 1 else (X.chunks[0], (K,))
        return X.map_blocks(self._decision_block, dtype=np.float64, chunks=chunks,
                            drop_axis=[1] if K == 1 else [],
                            meta=np.empty((0,) * len(chunks), np.float64))

    def predict(self, X):
        """Class labels: numpy in, numpy out; dask in, lazy dask out."""
        return labels_from_scores(self.decision_function(X), self.classes_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags


class _State:
    """The iterate of Algorithm 3: map parameters (float64), ``w``, Pegasos' ``t``."""

    def __init__(self, params, est, d):
        self.params = params
        self.k = est.n_components
        self.alpha = float(est.alpha)
        self.step = float(est.theta_step if est.theta_step is not None else DEFAULT_STEP[est.objective])
        self.kernel, self.gamma = est.kernel, est.gamma_
        K = 0
        if est.objective == "classification":
            K = 1 if est.classes_.size == 2 else est.classes_.size
        # two classes: the binary hinge of the paper whatever ``multiclass`` says
        self.multiclass = est.multiclass if K > 1 else "ovr"
        self.coef, self.intercept, self.t = np.zeros((K, self.k)), np.zeros(K), 0
        self.w, self.b = self.coef, self.intercept
        self.average = est.average
        self._val_kernel = None

    def copy(self):
        new = object.__new__(_State)
        new.__dict__.update(self.__dict__)
        new.params = {key: v.copy() for key, v in self.params.items()}
        new.coef, new.intercept = self.coef.copy(), self.intercept.copy()
        new.w, new.b = self.w.copy(), self.b.copy()
        return new

    def _sgd(self, stream):
        """Pegasos steps on ``(coef, intercept)`` with this state's loss."""
        return sgd_steps(self.coef, self.intercept, stream, loss=W_STEP_LOSSES[self.multiclass],
                         alpha=self.alpha, t0=self.t)

    def w_step(self, xs, Y, batches):
        """Algorithm 1: Pegasos on ``w`` with the map fixed (``sgd_steps``, eq. 7)."""
        if not self.average:
            stream = ((features(xs[b], self.params, self.k)[0], Y[b]) for b in batches)
            self.coef, self.intercept, self.t = self._sgd(stream)
            self.w, self.b = self.coef, self.intercept
            return
        w_sum, b_sum = np.zeros_like(self.coef), np.zeros_like(self.intercept)
        for b in batches:
            Z = features(xs[b], self.params, self.k)[0]
            self.coef, self.intercept, self.t = self._sgd([(Z, Y[b])])
            w_sum += self.coef
            b_sum += self.intercept
        self.w, self.b = w_sum / len(batches), b_sum / len(batches)

    def map_step(self, xs, Y, batches):
        """Algorithm 2 (eq. 9) or the kernel objective (eq. 11): SGD on the map."""
        if self.step == 0:  # the random map is kept: nothing to compute
            return
        for b in batches:
            x = xs[b]
            if Y is None:
                _, dZ, u = kernel_objective(x, self.params, self.k, self.kernel, self.gamma)
            else:
                _, dZ, u = classification_objective(x, Y[b], self.params, self.k, self.w,
                                                    self.b, self.multiclass)
            for key, g in map_gradient(x, self.params, self.k, u, dZ).items():
                self.params[key] -= self.step * g

    def score(self, x, y, est):
        """Held-out accuracy, or minus the kernel MSE over pairs (higher is better)."""
        if est.objective == "kernel":
            x = x[:KERNEL_VALIDATION_ROWS]
            if self._val_kernel is None:  # fixed rows: computed once
                self._val_kernel = kernel_matrix(x, kernel=self.kernel, gamma=self.gamma)
            Z, _ = features(x, self.params, self.k)
            return -float(np.mean((Z @ Z.T - self._val_kernel) ** 2))
        Z, _ = features(x, self.params, self.k)
        s = Z @ self.w.T + self.b
        pred = _scores_to_labels(s[:, 0] if s.shape[1] == 1 else s, est.classes_)
        return float(np.mean(pred == y))
