"""Compact Nonlinear Maps (Yu, Kumar, Rowley & Chang 2015): learned random Fourier features.

``Z(x) = sqrt(2/k) cos(Theta' x + b)`` with ``Theta`` (``d x k``) initialized as random
Fourier features and then learned, jointly with a linear SVM ``w``, by alternating mini-batch
SGD (Algorithm 3; the steps are in :mod:`rfstream.datadriven.cnm_sgd`).  Mini-batches and
held-out rows are drawn from the seed and the row index only (:mod:`rfstream.random`), so the
model does not depend on the chunking.  Data access, the deviations from the paper and their
measurements: docs/cnm.md.
"""
from __future__ import annotations

import math
from numbers import Integral, Real
from typing import ClassVar

import dask.array as da
import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from .._validation import check_dask_array
from ..features.base import GAMMA_CONSTRAINT, KERNEL_PARAMETERS, FeatureMap
from ..features.circulant import dense_rows, draw_circulant
from ..kernels import sample_frequencies
from ..random import STREAM_CNM_BATCHES, STREAM_CNM_HOLDOUT, sample_row_indices
from ..solvers.linear import labels_from_scores
from ..solvers.targets import check_targets, encode_classes, find_classes, signed
from .cnm_sgd import Iterate, features, gather_rows, train_index

__all__ = ["CompactNonlinearMap"]

#: at most this many held-out rows are gathered for early stopping
MAX_VALIDATION_ROWS = 10_000
#: gamma="paper": Section 7's 2/sigma^2 over rfstream's "auto" 1/(2 sigma^2)
PAPER_GAMMA_FACTOR = 4.0


class CompactNonlinearMap(ClassifierMixin, FeatureMap):
    r"""Compact Nonlinear Map: random Fourier features learned for a task (transformer and classifier).

    Minimizes ``lambda/2 ||w||^2 + 1/N sum_i L(y_i, w' Z(x_i))`` (eq. 5) over
    ``w`` and the map ``Z(x) = sqrt(2/k) cos(Theta' x + b)`` (eq. 4 with the
    phase ``b`` of random Fourier features, i.e. the bias the paper adds by
    augmenting ``x``), by alternating minimization (Algorithm 3):

    1. ``Theta, b`` initialized as random Fourier features of ``kernel`` with
       ``gamma``, ``w = 0``;
    2. repeat ``max_iter`` times: ``n_steps_w`` (``T1``) Pegasos steps on
       ``w`` (Algorithm 1, eq. 7, step ``1/(lambda t)`` with ``t`` counted over
       all iterations, projection on the ``1/sqrt(lambda)`` ball), run by
       :func:`rfstream.solvers.sgd_steps`; then ``n_steps_theta`` (``T2``) SGD
       steps on ``(Theta, b)`` with ``w`` fixed (Algorithm 2, gradient eq. 9).

    Every step uses a mini-batch of ``batch_size`` rows drawn at random from
    the training rows (docs/cnm.md, "Data access", says how rows are gathered).
    Regularization as in Section 6.1: no penalty on ``Theta``, early stopping
    on held-out rows (the best ``(Theta, b, w)`` seen is kept; the first
    candidate is the initial random map with its Pegasos ``w``).

    ``objective="kernel"`` (Section 5): only ``Theta, b`` are learned, by SGD on
    the squared kernel error over all pairs of each mini-batch (eqs. 10-11);
    ``y`` is ignored and the estimator is a transformer only (``predict``
    raises).  ``structure="circulant"``: ``Theta' x`` is replaced by the
    circulant map ``circ(r) D x`` of :class:`~rfstream.CirculantFeatures`
    (random signs ``D`` fixed, ``r`` learned with the FFT gradient of eqs.
    16-17, ``O(k)`` parameters).

    Deviations from the paper (docs/cnm.md, "Deviations (and why)", gives the
    reasons and the measurements behind each):

    * ``theta_step``: Algorithm 2's ``1/t`` decay, but not its Pegasos scale
      ``1/(lambda t)``, which for a small ``lambda`` moves the phases by many
      periods: the ``t``-th Theta-step (``t = 0, 1, ...``, counted over
      Theta-steps only) is ``theta_step / (1 + t / theta_t0)``, ``theta_step``
      for ``1/lambda``, shifted by ``t0``; ``theta_schedule="constant"`` takes
      the constant ``theta_step`` instead;
    * ``average=True``: the ``w`` used by the Theta-step, for scoring and as
      ``coef_`` is the mean of the ``T1`` Pegasos iterates of the last w-step;
    * ``multiclass``: with more than two classes, the multi-class hinge of
      Crammer & Singer (2001) in eq. 5 (or the softmax, or ``K`` one-vs-rest
      hinge problems sharing the map); the Theta-gradient is the same chain
      rule ``dL/dZ = g W / m`` (eq. 9 for the hinge), ``g`` the loss's
      derivative with respect to the ``K`` scores.  Two classes always use the
      paper's binary hinge;
    * ``gamma="paper"`` reads Section 7's ``gamma = 2/sigma^2`` in rfstream's
      convention ``exp(-gamma ||x-y||^2)``, i.e. 4 x ``"auto"``; the default
      ``"auto"`` starts from the same map as
      :class:`~rfstream.RandomFourierFeatures` with ``gamma="auto"``.

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
        Bandwidth of the initial random Fourier map.  "auto": ``sigma`` = mean
        distance to the 50th nearest neighbour of 1000 sampled rows and
        ``gamma = 1/(2 sigma^2)`` (:func:`rfstream.kernels.auto_gamma`);
        "paper": 4 x "auto" (Gaussian only, above); "auto*F"; a list: a fit per gamma.
    alpha : float, default=1e-4
        ``lambda`` of eq. 5 (the w-step's regularization; not given in the
        paper; docs/cnm.md has the held-out sweep).
    multiclass : {"ovr", "crammer-singer", "multinomial"}, default="crammer-singer"
        Loss of the classifier with more than two classes, see above (two
        classes always use the paper's binary hinge).  The w-step is
        ``sgd_steps(loss="hinge" | "crammer_singer" | "multinomial")``.
    max_iter : int, default=200
        Outer iterations ``T`` of Algorithm 3 (the paper: "a few hundred"
        iterations suffice), each ``n_steps_w + n_steps_theta`` steps; early
        stopping usually ends the run well before.
    n_steps_w : int, default=100
        ``T1``, Pegasos steps per iteration (the paper's 100).
    n_steps_theta : int, default=100
        ``T2``, map steps per iteration (the paper's 100).
    batch_size : int, default=500
        Rows per mini-batch (the paper's 500).
    theta_step : float or None, default=None
        First SGD step of ``Theta``, ``b`` (or ``r``), or the constant step with
        ``theta_schedule="constant"``, see above; 0 keeps the random map (random
        Fourier features trained with Pegasos).  None: 1.0 for
        ``objective="classification"`` (0.2 with ``theta_schedule="constant"``),
        2.0 for ``objective="kernel"`` (whose gradient, eq. 11, is an average
        over pairs and much smaller).
    theta_schedule : {"decay", "constant"} or None, default=None
        Step of the ``t``-th Theta-step: ``theta_step / (1 + t / theta_t0)``
        (Algorithm 2's decay), or ``theta_step``.  None: "decay" for
        ``objective="classification"``, "constant" for ``objective="kernel"``
        (docs/cnm.md has the measurements behind both).
    theta_t0 : float, default=500.0
        ``t0`` of ``theta_schedule="decay"``, in Theta-steps.
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the rows (at most
        :data:`MAX_VALIDATION_ROWS`), score every candidate ``(Theta, b, w)``
        on them after each w-step (accuracy, or the kernel MSE over their pairs
        for ``objective="kernel"``), keep the best, and stop after
        ``n_iter_no_change`` iterations without improvement.
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=30
    average : bool, default=True
        Average the Pegasos iterates of each w-step, see above.
    random_state : int, Generator, RandomState or None, default=None
    dtype : {"float32", "float64"}, default="float32"
        Of the stored map and of ``transform``'s output.  The optimization,
        and the phases of ``transform`` and ``decision_function``, run in
        float64: a row's features do not depend on the batch it comes in.

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

    Notes
    -----
    ``fit`` never loads a dask ``X``: each outer iteration gathers its
    ``(n_steps_w + n_steps_theta) * batch_size`` sampled rows (at most), and
    early stopping the held-out rows once.

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
        **KERNEL_PARAMETERS,
        "objective": [StrOptions({"classification", "kernel"})],
        "structure": [StrOptions({"dense", "circulant"})],
        "gamma": GAMMA_CONSTRAINT,
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "multiclass": [StrOptions({"ovr", "multinomial", "crammer-singer"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_steps_w": [Interval(Integral, 1, None, closed="left")],
        "n_steps_theta": [Interval(Integral, 0, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "theta_step": [Interval(Real, 0, None, closed="left"), None],
        "theta_schedule": [StrOptions({"constant", "decay"}), None],
        "theta_t0": [Interval(Real, 0, None, closed="neither")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "average": ["boolean"],
    }
    gamma_words = ("paper",)  # a gamma of its own, resolved by _resolve_gamma
    makes_data_pass = True
    searches_alpha = searches_gamma = solves_by_gram = False  # as a classifier: by SGD steps
    _y_purpose = (
        "with objective='classification' the map is learned with a linear SVM on the labels "
        "(y is required; objective='kernel' learns the map for kernel approximation without labels)"
    )

    def __init__(self, n_components=32, *, objective="classification", structure="dense",
                 kernel="gaussian", gamma="auto", alpha=1e-4, multiclass="crammer-singer", max_iter=200,
                 n_steps_w=100, n_steps_theta=100, batch_size=500, theta_step=None,
                 theta_schedule=None, theta_t0=500.0, early_stopping=True,
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
        self.theta_schedule = theta_schedule
        self.theta_t0 = theta_t0
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
        return PAPER_GAMMA_FACTOR * super()._resolve_gamma(X, rng, "auto")

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`): ``k``
        phases and a dense ``d x k`` projection, or a circulant one (``ceil(k / d)`` rows of
        ``d``, ``d`` signs); as a classifier, sorted distinct classes and a linear model of
        the ``k`` features."""
        d = view.int("n_features_in_")
        k = view.array("offset_")
        if len(k) != 1:
            view.fail(f"offset_ has shape {k}, not (n_components,)")
        if view.params.get("structure") == "circulant":
            view.array("circulant_", (-(-k[0] // d), d))
            view.array("signs_", (d,))
        else:
            view.array("projection_", (d, k[0]))
        if view.fitted.get("classes_") is not None:
            shape = view.array("classes_", kinds="biuUS", finite=False)
            if len(shape) != 1 or shape[0] < 2:
                view.fail("classes_ must be one-dimensional with at least two classes")
            view.distinct_sorted("classes_")
            targets = 1 if shape[0] == 2 else shape[0]
            view.array("coef_", (targets, k[0]))
            view.array("intercept_", (targets,))

    def _draw(self, rng, n_features):
        """Random Fourier initialization (Algorithm 3, line 1), kept in float64 until ``fit`` ends."""
        k, d = self.n_components, n_features
        if self.structure == "dense":
            theta = sample_frequencies(self.kernel, self.gamma_, (d, k), rng)
            params = {"theta": theta, "offset": rng.uniform(0.0, 2.0 * np.pi, size=k)}
        else:
            r, signs, offset = draw_circulant(rng, self.kernel, self.gamma_, k, d)
            params = {"r": r, "signs": signs, "offset": offset}
        self._set_params_(params, np.float64)

    def _fit_data(self, X, y, seed):
        """Algorithm 3 on mini-batches of sampled rows, with early stopping on held-out rows.

        ``y`` is None with ``objective="kernel"`` (the base ``fit`` passes labels
        only to a map that needs them).
        """
        if isinstance(X, da.Array):  # the row draws need the number of rows
            check_dask_array(X, known_rows=True)
        classify = y is not None
        if classify:
            y = check_targets(X, y)
            self.classes_ = find_classes(y, name=type(self).__name__)
        n = int(X.shape[0])
        # held-out rows (early stopping), drawn once and never trained on
        n_val = min(math.ceil(self.validation_fraction * n), MAX_VALIDATION_ROWS, n - 1)
        n_val = n_val if self.early_stopping else 0
        holdout = (sample_row_indices(n, n_val, np.random.default_rng([seed, STREAM_CNM_HOLDOUT]))
                   if n_val else np.empty(0, dtype=np.int64))
        val = gather_rows(X, y, holdout) if n_val else None
        state = Iterate(self._params(), self)
        best = (-np.inf, None, 0)
        self.validation_path_ = []
        no_change = 0
        it = 0
        for it in range(self.max_iter + 1):
            draw = np.random.default_rng([seed, STREAM_CNM_BATCHES, it])
            n_steps = (self.n_steps_w if classify else 0) + (
                self.n_steps_theta if it < self.max_iter else 0)
            pos = draw.integers(0, n - holdout.size, size=(n_steps, min(self.batch_size, n)))
            rows = train_index(pos, holdout)
            idx, inverse = np.unique(rows, return_inverse=True)
            xs, ys = gather_rows(X, y, idx) if n_steps else (None, None)
            batches = inverse.reshape(rows.shape)
            if classify:
                state.w_step(xs, self._encode(ys), batches[: self.n_steps_w])
                batches = batches[self.n_steps_w :]
            if val is not None:  # score the candidate (map, w) and keep the best
                score = state.score(*val, self)
                self.validation_path_.append(score)
                if score > best[0]:
                    best = (score, state.copy(), it)
                    no_change = 0
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
            self.coef_ = state.w.copy()
            self.intercept_ = state.b.copy()
            self.t_ = state.t
        else:  # a refit with objective="kernel" keeps no classifier from an earlier fit
            for name in ("coef_", "intercept_", "t_", "classes_"):
                self.__dict__.pop(name, None)

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

    def _features64(self, x):
        """``Z(x)`` from float64 phases: float32 would round a learned ``Theta' x + b`` differently
        with a batch's number of rows (docs/cnm.md, "Float64 phases at prediction")."""
        return features(dense_rows(x, np.float64), self._params(), self._n_features_out)[0]

    def _block(self, x):
        return self._features64(x).astype(self._output_dtype())

    def _set_params_(self, params, dtype=None):
        """Store the map's parameters as fitted attributes, in ``dtype`` (default: ``self.dtype``)."""
        dtype = self._output_dtype() if dtype is None else dtype
        for name in ("projection_", "circulant_", "signs_"):
            self.__dict__.pop(name, None)
        if "theta" in params:
            self.projection_ = params["theta"].astype(dtype)
        else:
            self.circulant_ = params["r"].astype(dtype)
            self.signs_ = params["signs"].astype(dtype)
        self.offset_ = params["offset"].astype(dtype)

    def _encode(self, y):
        """+-1 targets (m, K) for the OvR hinge (K = 1 for two classes); class codes otherwise."""
        codes = encode_classes(y, self.classes_)
        if self.classes_.size > 2 and self.multiclass != "ovr":
            return codes
        return signed(codes, self.classes_.size)

    # ------------------------------------------------------------ classifier API
    def _check_classifier(self):
        check_is_fitted(self)
        if self.objective != "classification":
            raise ValueError("objective='kernel' learns no classifier; train a solver on transform(X) "
                             "(e.g. StreamingSGDClassifier) or use objective='classification'.")

    def _decision_block(self, x):
        s = self._features64(x) @ self.coef_.T + self.intercept_  # the float64 map, as trained
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
        # ClassifierMixin says y is required; the kernel objective learns without labels
        tags.target_tags.required = self.objective == "classification"
        return tags
