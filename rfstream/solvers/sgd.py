"""Streaming SGD estimators: Pegasos (hinge), logistic, squared hinge and squared loss.

They minimize the regularized risk of Shalev-Shwartz et al.'s Pegasos (the
w-step of CNM, Yu et al. 2015, eqs. 5-7; EERF eq. (8) with the quadratic
regularizer its authors use in practice):

    f(W) = alpha/2 (||W||_F^2 + ||b / s||^2) + 1/S sum_i s_i c_i L(y_i, W z_i + b)

with ``alpha`` the paper's lambda, ``s_i`` the ``sample_weight`` of row i
(1 without; S = sum_i s_i, = n without), ``c_i`` its class weight and
``s = intercept_scaling`` (the intercept is the weight of a constant feature,
regularized like the rest, as in liblinear): the objective of scikit-learn's
``LinearSVC`` and ``LogisticRegression(solver="liblinear")`` with
``C = 1 / (alpha S)`` and the same ``sample_weight`` (docs/sgd.md).  Steps: :mod:`rfstream.solvers.pegasos` (CNM's
Algorithm 1); epochs as parameter-averaging reductions:
:mod:`rfstream.solvers.epochs`; the training loop: :mod:`rfstream.solvers.sgd_base`;
Newton passes: :mod:`rfstream.solvers.newton`.  Why averaging, convergence
measured against scikit-learn, and determinism: docs/sgd.md.
"""
from __future__ import annotations

from typing import ClassVar

import dask.array as da
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import StrOptions

from ..cluster import compute
from .linear import LinearClassifierMixin
from .proba import LogLossProbaMixin
from .sgd_base import _BaseStreamingSGD, weight_task
from .targets import class_weights, find_classes
from .weights import weight_summary, weight_terms

__all__ = ["StreamingSGDClassifier", "StreamingSGDRegressor"]


class StreamingSGDClassifier(LogLossProbaMixin, LinearClassifierMixin, ClassifierMixin,
                             _BaseStreamingSGD):
    """Linear classifier trained by streaming, data-parallel Pegasos-style SGD or Newton passes.

    Minimizes ``alpha/2 (||W||^2 + ||b/s||^2) + 1/S sum_i s_i c_i L(y_i, W z_i + b)``
    (module docstring; docs/sgd.md: the steps, the data parallelism, and how the
    result depends on seeds, workers and chunks).  Equivalent to
    ``LinearSVC(C=1/(alpha S))`` for the (squared) hinge and to
    ``LogisticRegression(C=1/(alpha S), solver="liblinear")`` for the log loss,
    with the same ``intercept_scaling`` and ``sample_weight`` (S = their sum, n
    without).  ``loss="log_loss"`` models have ``predict_proba`` and
    ``predict_log_proba`` (:mod:`rfstream.solvers.proba`).

    Parameters
    ----------
    loss : {"hinge", "log_loss", "squared_hinge"}, default="hinge"
        "hinge" with the default learning rate is Pegasos.
    alpha : float, default=1e-4
        lambda, the regularization (> 0).
    multi_class : {"ovr", "multinomial"}, default="ovr"
        More than two classes: one-vs-rest (K independent binary problems
        trained together, each in its own ball) or the multinomial
        (softmax) loss, for ``loss="log_loss"`` only.
    class_weight : dict, "balanced" or None
        Multiplies each row's loss by the weight of its class (in OvR, the
        row's own class weight in every binary problem, as SGDClassifier), and
        by its ``sample_weight``.  "balanced": n / (n_classes * count(class)),
        from the unweighted counts (as SGDClassifier).
    max_iter : int, default=20
        Epochs (passes over the data).
    batch_size : int, default=16
        Rows per mini-batch inside a block.
    tol : float or None, default=1e-3
        Stop when the objective (or with ``early_stopping`` the held-out loss)
        has not decreased by ``tol`` relative for ``n_iter_no_change`` epochs.
        ``None``: run ``max_iter`` epochs.  The model returned is the best one
        evaluated.
    n_iter_no_change : int, default=3
    early_stopping : bool, default=False
        Hold out rows (chosen from (seed, row index)) and stop on their loss.
    validation_fraction : float, default=0.1
    learning_rate : {"pegasos", "optimal", "constant"}, default="pegasos"
        eta_t = 1/(alpha t); 1/(alpha (t + 1/(alpha eta0))); eta0.
    eta0 : float, default=0.01
    fit_intercept : bool, default=True
    intercept_scaling : float, default=1.0
        Value of the constant feature that carries the intercept (regularized
        like liblinear's).  A larger value regularizes the intercept less.
    chunks_per_round : int or None, default=None
        Blocks averaged per round (None: all, one round per epoch).  With
        rounds the passes see parts of the data only, so no exact per-epoch
        objective is known: ``tol`` and ``early_stopping`` are not applied
        (``max_iter`` epochs run) and ``objective_path_`` holds the final model only.
    random_state : int, default=0
    solver : {"auto", "sgd", "newton"}, default="auto"
        "auto": "newton" for the losses it supports on at most
        ``AUTO_NEWTON_MAX_FEATURES`` (128) features, without ``early_stopping``
        or ``chunks_per_round`` (exact, and cheaper than SGD epochs there:
        docs/sgd.md), "sgd" otherwise; ``solver_`` says which ran.
        "sgd": the streaming steps above.  "newton": damped Newton passes
        (:mod:`rfstream.solvers.newton`): each pass is one reduction computing
        the gradient and the (n_features + 1)^2 Hessian of every binary/OvR
        problem, plus the line search of the previous direction; the result
        does not depend on the row order or the chunking.  ``max_iter`` counts
        passes, ``tol`` bounds the estimated relative gap to the optimum
        (``gap_ / objective_``); ``objective_path_`` holds the exact objective
        of each pass's accepted point.  The hinge is solved through a smoothing of
        width decreasing from 2 (a certified gap).  Not for the multinomial
        loss, ``early_stopping`` or ``partial_fit``; the step parameters
        (batch_size, learning_rate, eta0, average, chunks_per_round) are unused.

    Attributes
    ----------
    classes_, coef_ (K, n_features), intercept_ (K,), n_features_in_
    objective_ : float
        Exact objective of the returned model on the training rows.
    objective_path_ : list of float
        Objective at the start of each epoch and of the final model.
    validation_score_ : float
        Held-out error rate of the returned model (``early_stopping``), else nan.
    t_ : int
        Steps taken (continues across ``partial_fit``).
    n_epochs_, n_samples_seen_ : int
    gap_ : float
        ``solver="newton"`` only: the estimated f(coef_) - min f (Newton
        decrement g' H^-1 g / 2, plus f - f_h for the smoothed hinge).
    solver_ : str
        The solver that ran ("sgd" or "newton").

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import RandomFourierFeatures, StreamingSGDClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 2)); y = (np.hypot(*X.T) > 1.2).astype(int)
    >>> Z = RandomFourierFeatures(64, gamma=0.5, random_state=0).fit_transform(X)
    >>> clf = StreamingSGDClassifier(loss="log_loss", alpha=1e-3, random_state=0).fit(Z, y)
    >>> clf.solver_, bool(clf.score(Z, y) > 0.9), clf.predict_proba(Z[:2]).shape
    ('newton', True, (2, 2))
    """

    _parameter_constraints: ClassVar[dict] = {
        **_BaseStreamingSGD._parameter_constraints,
        "solver": [StrOptions({"auto", "sgd", "newton"})],
        "loss": [StrOptions({"hinge", "log_loss", "squared_hinge"})],
        "multi_class": [StrOptions({"ovr", "multinomial"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }

    def __init__(self, loss="hinge", *, alpha=1e-4, multi_class="ovr", class_weight=None,
                 max_iter=20, batch_size=16, tol=1e-3, n_iter_no_change=3, early_stopping=False,
                 validation_fraction=0.1, learning_rate="pegasos", eta0=0.01, average=True,
                 fit_intercept=True, intercept_scaling=1.0, chunks_per_round=None, random_state=0,
                 solver="auto"):
        self.loss = loss
        self.alpha = alpha
        self.multi_class = multi_class
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.average = average
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.chunks_per_round = chunks_per_round
        self.random_state = random_state
        self.solver = solver

    def _loss_name(self):
        if self.multi_class == "multinomial" and len(self.classes_) > 2:
            return "multinomial"
        return self.loss

    def _n_outputs(self, task):
        return 1 if task["n_classes"] == 2 else task["n_classes"]

    def _make_task(self, classes, counts):
        if self.multi_class == "multinomial" and self.loss != "log_loss":
            raise ValueError(
                f"multi_class='multinomial' needs loss='log_loss'; got loss={self.loss!r}."
            )
        if isinstance(self.class_weight, str) and counts is None:
            raise ValueError("class_weight='balanced' is not supported by partial_fit; pass a dict.")
        self.class_weight_ = class_weights(self.class_weight, classes, counts)
        return self._task()

    def _task(self):
        return {"kind": "classification", "classes": self.classes_, "n_classes": self.classes_.size,
                "class_weight": self.class_weight_, "multinomial": self._loss_name() == "multinomial"}

    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (n, D) and labels ``y`` (n,), numpy, pandas or dask (DataFrames and
        Series included, as :meth:`rfstream.StreamingRidge.fit` takes them).

        ``sample_weight``: None, a float, or one weight >= 0 per row (numpy, pandas, or a
        dask array or Series, aligned lazily with ``X``'s row chunks, never gathered on
        the client).  Row i's loss counts ``s_i c_i / mean(s)`` (the objective above: an
        integer weight is the row repeated, 0 the row dropped; exactly so with
        ``solver="newton"``, in expectation for the SGD steps, whose row order depends
        on the row index).  The weights' sum and maximum come from the class-finding pass.
        """
        self._validate_params()
        X, y, w = self._check_X_y(X, y, reset=True, sample_weight=sample_weight)
        classes, counts, *terms = find_classes(y, name=type(self).__name__, return_counts=True,
                                               also=weight_terms(w))
        self.classes_ = classes
        task = {**self._make_task(classes, counts), **weight_task(X.shape[0], w, terms or None)}
        return self._fit_solver(X, y, task, w)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """One epoch (one pass) over (X, y), continuing from the current model.

        ``classes`` (every label that will ever appear) is required on the first call.
        ``sample_weight`` multiplies each row's loss as it is (not over its mean: the
        objective of the stream is 1/n sum_i s_i c_i L_i, as scikit-learn's
        ``SGDClassifier.partial_fit``).
        """
        first = not hasattr(self, "classes_")
        if self.solver == "newton":
            raise ValueError(f"partial_fit needs solver='sgd' or 'auto'; got solver={self.solver!r} "
                             "(Newton passes need all the data: call fit).")
        if first:
            self._validate_params()
            if classes is None:
                raise ValueError("classes must be passed on the first call to partial_fit.")
            classes = np.unique(np.asarray(classes))
            if classes.size < 2:
                raise ValueError(f"classes must hold at least 2 labels; got {classes.tolist()}.")
            self.classes_ = classes
            self._make_task(classes, None)
        elif classes is not None and not np.array_equal(np.unique(classes), self.classes_):
            raise ValueError(f"classes {list(classes)} differ from classes_ {self.classes_.tolist()} "
                             "of the first partial_fit call.")
        X, y, w = self._check_X_y(X, y, reset=first, sample_weight=sample_weight)
        return self._partial_epoch(X, y, first, w)


class StreamingSGDRegressor(RegressorMixin, _BaseStreamingSGD):
    """Linear regression (squared loss) by streaming, data-parallel SGD or Newton passes.

    Minimizes ``alpha/2 (||w||^2 + (b/s)^2) + 1/(2S) sum_i s_i (y_i - w z_i - b)^2``
    (``s_i`` the ``sample_weight``, S their sum, n without), i.e.
    ``sklearn.linear_model.Ridge(alpha=alpha * S, fit_intercept=False)`` on [Z, s]
    with the same ``sample_weight``.  Steps and projection as
    :class:`StreamingSGDClassifier` (the ball radius is sqrt(weighted mean(y^2) / alpha),
    from f(w*) <= f(0)); ``solver="newton"`` (chosen by "auto" on at most 128
    features) is one exact Newton step and a pass to confirm it.  Parameters and
    attributes as the classifier, without ``loss``, ``multi_class`` and
    ``class_weight``; ``validation_score_`` is the held-out mean squared error.

    Examples
    --------
    >>> import numpy as np
    >>> from rfstream import StreamingSGDRegressor
    >>> X = np.random.default_rng(0).normal(size=(200, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> reg = StreamingSGDRegressor(alpha=1e-6, solver="sgd", random_state=0).fit(X, y)
    >>> reg.coef_.shape, bool(reg.score(X, y) > 0.99)
    ((3,), True)
    """

    _parameter_constraints: ClassVar[dict] = {
        **_BaseStreamingSGD._parameter_constraints,
        "solver": [StrOptions({"auto", "sgd", "newton"})],
    }

    def __init__(self, *, alpha=1e-4, max_iter=20, batch_size=16, tol=1e-3, n_iter_no_change=3,
                 early_stopping=False, validation_fraction=0.1, learning_rate="pegasos", eta0=0.01,
                 average=True, fit_intercept=True, intercept_scaling=1.0,
                 chunks_per_round=None, random_state=0, solver="auto"):
        self.alpha = alpha
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.average = average
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.chunks_per_round = chunks_per_round
        self.random_state = random_state
        self.solver = solver

    def _loss_name(self):
        return "squared"

    def _n_outputs(self, task):
        return 1

    def _make_task(self, y, w=None):
        """The task, with the (weighted) mean of y^2 for the ball radius and the
        weights' scale; one pass over ``y`` (and ``w``) for dask."""
        y64 = y.astype(np.float64) if isinstance(y, da.Array) else np.asarray(y, dtype=np.float64)
        terms = ((y64**2).sum() if w is None else (w * y64**2).sum(), *weight_terms(w))
        if isinstance(y, da.Array):
            terms = compute(*terms) if len(terms) > 1 else (compute(terms[0]),)
        total = float(weight_summary(w, terms[1:])[0]) if w is not None else float(y.shape[0])
        self.target_scale_ = float(terms[0]) / max(total, 1e-300)
        return {**self._task(), **weight_task(y.shape[0], w, terms[1:] or None)}

    def _task(self):
        return {"kind": "regression", "y_sq": self.target_scale_}

    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (n, D) and targets ``y`` (n,), numpy, pandas or dask (DataFrames and
        Series included, as :meth:`rfstream.StreamingRidge.fit` takes them), rows weighted
        by ``sample_weight`` over its mean (as :meth:`StreamingSGDClassifier.fit`)."""
        self._validate_params()
        X, y, w = self._check_X_y(X, y, reset=True, sample_weight=sample_weight)
        return self._fit_solver(X, y, self._make_task(y, w), w)

    def partial_fit(self, X, y, sample_weight=None):
        """One epoch over (X, y) from the current model, each row's loss times its
        ``sample_weight`` as it is.  The projection radius comes from the first call's
        targets (times 4, for later data)."""
        first = not hasattr(self, "coef_")
        if self.solver == "newton":
            raise ValueError("partial_fit needs solver='sgd' or 'auto' (Newton passes need all "
                             "the data: call fit).")
        if first:
            self._validate_params()
        X, y, w = self._check_X_y(X, y, reset=first, sample_weight=sample_weight)
        if first:
            self._make_task(y)
            self.target_scale_ *= 4.0
        return self._partial_epoch(X, y, first, w)

    def _set_public(self, task):
        s = self._intercept_scale()
        self.coef_ = self._Wb[0].copy()
        self.intercept_ = float(s * self._vb[0])

    def predict(self, X):
        """Predictions: numpy in, numpy out; dask in, lazy dask out."""
        return self._decision(X)
