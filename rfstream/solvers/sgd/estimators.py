"""The streaming SGD estimators and their training loop: state, epochs, stopping, Newton.

They minimize the regularized risk of Pegasos (Shalev-Shwartz et al. 2011; the w-step of CNM,
Yu et al. 2015, eqs. 5-7; EERF eq. (8)),
``alpha/2 (||W||_F^2 + ||b / s||^2) + 1/S sum_i s_i c_i L(y_i, W z_i + b)``, the objective of
``LinearSVC`` and ``LogisticRegression(solver="liblinear")`` with ``C = 1 / (alpha S)``, by
parameter-averaged epochs (:mod:`~rfstream.solvers.sgd.epochs`) or Newton passes
(:mod:`~rfstream.solvers.sgd.newton`).  Deviation: the intercept is regularized, as in
liblinear.  docs/sgd.md.
"""
from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import dask.array as da
import numpy as np
from dask.base import is_dask_collection
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ..._validation import check_X_y
from ...cluster import compute
from ...features.source import feature_source
from ...options import ParameterError
from ...random import STREAM_SGD_CHUNKS, check_seed
from ...reductions import whole_sum
from ..linear import LinearClassifierMixin, LinearPredictMixin, classifier_state, regressor_state
from ..passes import fused_row_sum
from ..targets import check_targets, class_weights, find_classes
from ..weights import check_sample_weight, weight_summary, weight_terms
from .epochs import (
    LEARNING_RATES,
    EpochSpec,
    StepSpec,
    epoch_layout,
    epoch_pass,
    epoch_rows,
    n_blocks,
)
from .losses import LogLossProbaMixin, ball_radius
from .newton import newton_chunk, newton_fit

#: losses of ``solver="newton"`` (binary and one-vs-rest, and the squared loss)
NEWTON_LOSSES = ("hinge", "squared_hinge", "log_loss", "squared")
#: ``solver="auto"`` runs Newton passes up to this many features (a pass costs
#: O(n D^2) flops against O(n D) for an SGD epoch of Python-level mini-batch steps;
#: measured: docs/sgd.md, "solver='auto'"), SGD steps above.
AUTO_NEWTON_MAX_FEATURES = 128


def weight_task(n, w, terms=None):
    """The task entries for sample weights ``w`` (checked, or None) of ``n`` rows:
    ``weight_scale`` = n / sum(w) (weights of mean 1) and ``max_sample_weight`` (scaled).
    ``terms``: their (sum, max) when already computed."""
    if w is None:
        return {}
    total, top = weight_summary(w, terms)
    return {"weight_scale": n / total, "max_sample_weight": top * n / total}


class _BaseStreamingSGD(LinearPredictMixin, BaseEstimator):
    _parameter_constraints: ClassVar[dict] = {
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="left"), None],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left")],
        "early_stopping": ["boolean"],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "learning_rate": [StrOptions(set(LEARNING_RATES))],
        "eta0": [Interval(Real, 0, None, closed="neither")],
        "fit_intercept": ["boolean"],
        "average": ["boolean"],
        "intercept_scaling": [Interval(Real, 0, None, closed="neither")],
        "chunks_per_round": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
    }
    #: one alpha, one gamma: no search by cross-validation
    searches_alpha = False
    searches_gamma = False
    #: fitted by epochs of steps (or Newton), not from a Gram
    solves_by_gram = False

    def check_parameters(self, n_features=None):
        """Raise what ``fit`` would raise for the parameters alone (scikit-learn's
        parameter checks); ``n_features`` is not needed.  Returns None."""
        self._validate_params()

    # -- subclass hooks: _task(y) -> task dict, _n_outputs(task), _loss_name()
    def _intercept_scale(self):
        """The constant feature the intercept multiplies (0 without an intercept)."""
        return float(self.intercept_scaling) if self.fit_intercept else 0.0

    def _spec(self, task, K):
        loss = self._loss_name()
        s = self._intercept_scale()
        cw = task.get("class_weight")
        max_w = (float(np.max(cw)) if cw is not None else 1.0) * task.get("max_sample_weight", 1.0)
        if loss == "squared":
            radius = np.sqrt(task["y_sq"] / self.alpha) if task.get("y_sq") is not None else np.inf
        else:
            radius = ball_radius(loss, self.alpha, task.get("n_classes", 2), max_w)
        return StepSpec(loss, float(self.alpha), self.learning_rate, float(self.eta0), s, radius,
                     loss == "multinomial", bool(self.average))

    def _init_state(self, K, D):
        self._W, self._v = np.zeros((K, D)), np.zeros(K)  # the SGD iterate
        self._Wb, self._vb = self._W, self._v  # the averaged iterate: the model
        self.t_ = 0
        self.n_epochs_ = 0
        self.objective_path_ = []
        self.validation_path_ = []

    def _epoch_spec(self, steps, task, layout, train, fused):
        """The :class:`rfstream.solvers.sgd.epochs.EpochSpec` of an epoch from the current state."""
        return EpochSpec(
            layout=layout, W=self._W, v=self._v, Wbar=self._Wb, vbar=self._vb, t=self.t_,
            epoch=self.n_epochs_, seed=check_seed(self.random_state), steps=steps, task=task,
            batch_size=self.batch_size,
            validation_fraction=self.validation_fraction if self.early_stopping else 0.0,
            train=train, **fused,
        )

    def _solver_for(self, n_features):
        """``solver``, with "auto" resolved: Newton for its losses on at most
        :data:`AUTO_NEWTON_MAX_FEATURES` features (and no ``early_stopping`` or
        ``chunks_per_round``), else SGD steps."""
        solver = getattr(self, "solver", "auto")
        if solver != "auto":
            return solver
        newton = (self._loss_name() in NEWTON_LOSSES and not self.early_stopping
                  and self.chunks_per_round is None and n_features <= AUTO_NEWTON_MAX_FEATURES)
        return "newton" if newton else "sgd"

    def _fit_solver(self, Z, y, task, w=None):
        """Fit with the resolved solver (stored as ``solver_``)."""
        self.solver_ = self._solver_for(Z.shape[1])
        if self.solver_ == "newton":
            return self._fit_newton(Z, y, task, w)
        return self._fit_loop(Z, y, task, w)

    def _one_epoch(self, Z, y, spec, task, layout, w=None):
        """One pass (or ``chunks_per_round`` rounds) over the data; updates the state.

        Returns the evaluation of the incoming model when the epoch is a single
        round over every block (the exact objective), else None.
        """
        seed = check_seed(self.random_state)
        fused, rows = epoch_rows(Z)  # Z = map.transform(X): features made in the tasks
        blocks = n_blocks(rows)
        k = self.chunks_per_round
        if k is None or k >= blocks:
            rounds = [None]
        else:
            perm = np.random.default_rng([seed, STREAM_SGD_CHUNKS, self.n_epochs_]).permutation(blocks)
            rounds = [perm[i : i + k] for i in range(0, blocks, k)]
        evaluation = None
        for ids in rounds:
            res = layout.unpack(epoch_pass(rows, y, self._epoch_spec(spec, task, layout, True, fused), ids, w))
            if not all(np.isfinite(v).all() for v in res.values()):
                raise ValueError(
                    "X or y contains NaN or infinity (the SGD epoch's sums are not finite; with "
                    "learning_rate='constant' the steps may also have diverged: lower eta0); "
                    "remove or impute them first."
                )
            n = float(res["n"])
            if n == 0:
                raise ValueError(
                    "no training rows: X is empty or every row was held out "
                    f"(validation_fraction={self.validation_fraction})."
                )
            if ids is None:
                evaluation = self._evaluation(res)
            self._W, self._v = res["W"] / n, res["v"] / n
            self._Wb, self._vb = res["Wbar"] / n, res["vbar"] / n
            self.t_ += round(float(res["steps"]) / n)
        self.n_epochs_ += 1
        self.n_samples_seen_ = getattr(self, "n_samples_seen_", 0) + int(Z.shape[0])
        return evaluation

    def _partial_epoch(self, X, y, first, w=None):
        """``partial_fit``'s epoch: from the current model, or from zero on the first call;
        sample weights ``w`` as they are, not over their mean (docs/sgd.md)."""
        self.solver_ = "sgd"
        task = self._task()
        if w is not None:
            task["max_sample_weight"] = weight_summary(w)[1]
        K = self._n_outputs(task)
        if first:
            self._init_state(K, X.shape[1])
        else:
            self._restore_state()
        ev = self._one_epoch(X, y, self._spec(task, K), task, epoch_layout(K, X.shape[1]), w)
        if ev is not None:
            self._record(ev)
        self._set_public(task)
        return self

    def _evaluation(self, res, W=None, v=None):
        W = self._Wb if W is None else W
        v = self._vb if v is None else v
        n = max(float(res["n"]), 1.0)
        reg = 0.5 * self.alpha * (np.sum(W**2) + np.sum(v**2))
        n_val = float(res["n_val"])
        return {
            "objective": reg + float(res["loss"]) / n,
            "validation_loss": float(res["loss_val"]) / n_val if n_val else np.nan,
            "validation_error": float(res["err_val"]) / n_val if n_val else np.nan,
        }

    def _evaluate(self, Z, y, spec, task, layout, w=None):
        """One pass that evaluates the current model (no training)."""
        fused, rows = epoch_rows(Z)
        ev = epoch_pass(rows, y, self._epoch_spec(spec, task, layout, False, fused), w=w)
        return self._evaluation(layout.unpack(ev))

    def _fit_loop(self, Z, y, task, w=None):
        K = self._n_outputs(task)
        D = Z.shape[1]
        layout = epoch_layout(K, D)
        spec = self._spec(task, K)
        self._init_state(K, D)
        key = "validation_loss" if self.early_stopping else "objective"
        evaluated = []  # (evaluation, W, v) of every model whose objective is known
        best = np.inf
        no_change = 0
        evaluated_zero = self._Wb
        for _ in range(self.max_iter):
            start = (self._Wb, self._vb)
            ev = self._one_epoch(Z, y, spec, task, layout, w)
            if ev is None:
                continue
            self._record(ev)
            if start[0] is evaluated_zero:
                continue  # the initial (zero) model is no candidate
            evaluated.append((ev, *start))
            if ev[key] < best - (self.tol or 0.0) * abs(best) or not np.isfinite(best):
                best = ev[key]
                no_change = 0
            else:
                no_change += 1
                if self.tol is not None and no_change >= self.n_iter_no_change:
                    break
        self.n_iter_ = self.n_epochs_
        ev = self._evaluate(Z, y, spec, task, layout, w)  # the final model: one more pass
        self._record(ev)
        evaluated.append((ev, self._Wb, self._vb))
        # the best evaluated model (the last one on ties)
        i = min(range(len(evaluated)), key=lambda j: (evaluated[j][0][key], -j))
        ev, self._Wb, self._vb = evaluated[i]
        self.objective_ = ev["objective"]
        self.validation_score_ = ev["validation_error"]
        self._set_public(task)
        return self

    def _fit_newton(self, Z, y, task, w=None):
        """``solver="newton"``: damped Newton passes (:mod:`rfstream.solvers.sgd.newton`)."""
        loss = self._loss_name()
        if loss not in NEWTON_LOSSES:
            raise ValueError(
                f"solver='newton' supports the binary and one-vs-rest losses hinge, squared_hinge "
                f"and log_loss, and the squared loss; got the {loss!r} loss. Use solver='sgd' or "
                "multi_class='ovr'."
            )
        if self.early_stopping:
            raise ValueError("early_stopping=True needs solver='sgd'; solver='newton' stops on the "
                             "estimated gap to the optimum (tol).")
        K, D = self._n_outputs(task), Z.shape[1]
        s = self._intercept_scale()

        def newton_pass(spec, size):
            # Z = map.transform(X): the pass reduces over X and makes the features
            # in its tasks, a sub-block at a time (as every pass)
            spans = spec.layout.square_spans("H")  # the Hessians travel as triangles
            return whole_sum(compute(fused_row_sum(newton_chunk, size, Z, spec, y=y, w=w, symmetric=spans)),
                             size, spans)

        res = newton_fit(newton_pass, task, K, D, loss=loss, alpha=float(self.alpha), intercept_scaling=s,
                         max_iter=self.max_iter, tol=self.tol)
        self._init_state(K, D)
        self._W, self._v = res["W"], res["v"]
        self._Wb, self._vb = self._W, self._v
        self.objective_path_ = res["path"]
        self.validation_path_ = [np.nan] * len(res["path"])
        self.objective_ = res["objective"]
        self.gap_ = res["gap"]
        self.validation_score_ = np.nan
        self.n_iter_ = self.n_epochs_ = res["n_iter"]
        self.n_samples_seen_ = int(Z.shape[0]) * res["n_iter"]
        self._set_public(task)
        return self

    def _restore_state(self):
        """The SGD state from the public attributes (e.g. after load_model)."""
        s = self._intercept_scale()
        Wb = np.atleast_2d(np.asarray(self.coef_, dtype=np.float64)).copy()
        vb = np.atleast_1d(np.asarray(self.intercept_, dtype=np.float64)) / (s or 1.0)
        if not s:
            vb = np.zeros_like(vb)
        same = getattr(self, "_Wb", None) is not None and np.array_equal(self._Wb, Wb)
        if not same:  # e.g. a loaded model: continue from the model itself
            self._W, self._v, self._Wb, self._vb = Wb, vb, Wb, vb

    def _record(self, ev):
        self.objective_path_.append(float(ev["objective"]))
        self.validation_path_.append(float(ev["validation_error"]))

    def _set_public(self, task):
        s = self._intercept_scale()
        self.coef_ = self._Wb.copy()
        self.intercept_ = s * self._vb

    # -- input ----------------------------------------------------------------
    def _check_X_y(self, X, y, reset, sample_weight=None):
        """``(X, y, sample_weight)``: numpy/pandas through ``validate_data``; a dask ``X``
        (array or DataFrame, converted lazily) with ``y`` and ``sample_weight`` aligned to
        its row chunks (:func:`rfstream.solvers.weights.check_sample_weight`).  The stacked
        features of a map fitted with a gamma grid are refused: ridge searches a grid."""
        if getattr(feature_source(X), "grid", None) is not None:
            raise ParameterError(f"{type(self).__name__} takes the features of one gamma; the map was fitted "
                                 "with a gamma grid, which the ridge solver searches (StreamingRidge, "
                                 "StreamingRidgeClassifier; {solver='ridge'}). Give the map one {gamma}.",
                                 gamma=None, solver=None)
        X, y = check_X_y(self, X, y, reset=reset, accept_sparse="csr",
                         y_numeric=isinstance(self, RegressorMixin))
        if is_dask_collection(X):
            y = check_targets(X, y)
        return X, y, check_sample_weight(X, sample_weight)

    def objective(self, X, y, sample_weight=None):
        """The exact regularized objective f of the current model on (X, y): one pass.

        With ``sample_weight`` the losses are weighted by it over its mean, as
        ``fit`` weights them (docs/sgd.md).
        """
        check_is_fitted(self)
        X, y, w = self._check_X_y(X, y, reset=False, sample_weight=sample_weight)
        task = {**self._task(), **weight_task(X.shape[0], w)}
        K = np.atleast_2d(self.coef_).shape[0]
        layout = epoch_layout(K, X.shape[1])
        spec = self._spec(task, K)
        s = spec.intercept_scaling
        W, v = np.atleast_2d(self.coef_), np.atleast_1d(self.intercept_) / (s or 1.0)
        fused, rows = epoch_rows(X)
        at = EpochSpec(layout=layout, W=W, v=v if s else np.zeros(K), t=0, epoch=0, seed=0, steps=spec,
                       task=task, batch_size=self.batch_size, validation_fraction=0.0, train=False, **fused)
        res = layout.unpack(epoch_pass(rows, y, at, w=w))
        return self._evaluation(res, W, v if s else 0.0)["objective"]


__all__ = ["StreamingSGDClassifier", "StreamingSGDRegressor"]


class StreamingSGDClassifier(LogLossProbaMixin, LinearClassifierMixin, ClassifierMixin,
                             _BaseStreamingSGD):
    """Linear classifier trained by streaming, data-parallel Pegasos-style SGD or Newton passes.

    Minimizes ``alpha/2 (||W||^2 + ||b/s||^2) + 1/S sum_i s_i c_i L(y_i, W z_i + b)``
    (docs/sgd.md: the steps, the data parallelism, and how the
    result depends on seeds, workers and chunks).  Equivalent to
    ``LinearSVC(C=1/(alpha S))`` for the (squared) hinge and to
    ``LogisticRegression(C=1/(alpha S), solver="liblinear")`` for the log loss,
    with the same ``intercept_scaling`` and ``sample_weight`` (S = their sum, n
    without).  ``loss="log_loss"`` models have ``predict_proba`` and
    ``predict_log_proba`` (:mod:`rfstream.solvers.sgd.losses`).

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
        (:mod:`rfstream.solvers.sgd.newton`): each pass is one reduction computing
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

    _fitted_rule = staticmethod(classifier_state)  # what a saved model's fitted state must hold

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

    _fitted_rule = staticmethod(regressor_state)  # what a saved model's fitted state must hold

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
