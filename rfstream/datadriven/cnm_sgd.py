"""The alternating SGD of Compact Nonlinear Maps (Yu, Kumar, Rowley & Chang 2015, Algorithm 3).

What :class:`rfstream.CompactNonlinearMap` runs on each mini-batch, pure numpy in float64:
the map ``Z(x) = sqrt(2/k) cos(u)``, ``u = Theta' x + b`` (dense, eq. 4) or ``circ(r) D x + b``
(circulant, eq. 13); the classification loss (eq. 5, eq. 8 for the hinge) and the kernel
error (eq. 10) with their derivatives in ``Z``; one chain rule to the map's parameters
(eqs. 9, 11, 16-17); the mini-batch rows; and :class:`Iterate`, the state of Algorithm 3 with
its w-step (Algorithm 1) and map step (Algorithm 2).  Deviations: docs/cnm.md.
"""
from __future__ import annotations

import math

import dask.array as da
import numpy as np

from ..cluster import compute
from ..features.circulant import circulant_grad, circulant_project, dense_rows
from ..kernels import kernel_matrix
from ..solvers import sgd_steps
from ..solvers.linear import scores_to_labels
from ..solvers.sgd.losses import crammer_singer, hinge, multinomial

__all__ = ["Iterate", "classification_objective", "features", "gather_rows", "hinge_objective",
           "kernel_objective", "map_gradient", "theta_step_size", "train_index"]

#: theta_schedule=None per objective: the decay for classification, the constant for the kernel
#: objective (docs/cnm.md, "The default schedule, decided again")
DEFAULT_SCHEDULE = {"classification": "decay", "kernel": "constant"}
#: theta_step=None: the (first) map step per (objective, schedule); the constants: the step sweep's
DEFAULT_STEP = {("classification", "decay"): 1.0, ("classification", "constant"): 0.2,
                ("kernel", "decay"): 2.0, ("kernel", "constant"): 2.0}
#: held-out rows whose pairs give the validation kernel MSE (objective="kernel")
KERNEL_VALIDATION_ROWS = 1000


def theta_step_size(c, t, schedule="decay", t0=500.0):
    """Step of the ``t``-th Theta-step (``t = 0, 1, ...``): ``c``, or for ``"decay"`` Algorithm
    2's ``1/(lambda t)`` decay with ``c`` for ``1/lambda``, shifted by ``t0``: ``c / (1 + t / t0)``."""
    return c if schedule == "constant" else c / (1.0 + t / t0)


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
    """Gradient of ``sum(dZ * Z(x))`` in the learned parameters, a dict with their keys.

    ``dU = -sqrt(2/k) sin(u) dZ``, then ``d/dTheta = x' dU`` (eq. 9 for the hinge, eq. 11
    for the kernel MSE), ``d/db = sum_rows dU``, or the FFT cross-correlation of eqs. 16-17
    (:func:`rfstream.features.circulant.circulant_grad`) for the circulant map.
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
    """Mean loss of ``w' Z(x)`` (eq. 8 for "ovr") and ``dLoss/dZ = g W / m``, ``g = dL/dscores``;
    ``Y`` is +-1 (m, K) for "ovr", class indices (m,) otherwise."""
    Z, u = features(x, params, k)
    loss, g = CLASS_LOSSES[multiclass](Z @ coef.T + intercept, Y)  # g = dL/dscores (m, K)
    m = x.shape[0]
    return loss.mean(), (g @ coef) / m, u


def hinge_objective(x, Y, params, k, coef, intercept):
    """Mean OvR hinge loss (eq. 8) and ``dLoss/dZ`` for a batch; ``Y`` is +-1 (m, K)."""
    return classification_objective(x, Y, params, k, coef, intercept, "ovr")


def kernel_objective(x, params, k, kernel, gamma):
    """Mean squared kernel error over the batch's pairs (eq. 10) and its derivative
    ``4 E Z / m^2`` in ``Z``, ``E = Z Z' - K`` (the pair sum of eq. 11)."""
    Z, u = features(x, params, k)
    E = Z @ Z.T - kernel_matrix(x, kernel=kernel, gamma=gamma)
    m = x.shape[0]
    return float(np.mean(E**2)), 4.0 * (E @ Z) / (m * m), u


# ------------------------------------------------------------ rows of the mini-batches
def gather_rows(X, y, idx):
    """Rows ``idx`` (sorted, distinct) of numpy or dask ``X`` (and ``y``), as numpy float64."""
    if isinstance(X, da.Array):
        xs, ys = compute(X[idx], None if y is None else y[idx])  # one graph, one pass
    else:
        xs, ys = X[idx], (None if y is None else np.asarray(y)[idx])
    return dense_rows(xs, np.float64), ys


def train_index(j, holdout):
    """The ``j``-th row that is not held out (``holdout`` sorted), vectorized over ``j``."""
    if holdout.size == 0:
        return j
    return j + np.searchsorted(holdout - np.arange(holdout.size), j, side="right")


# ------------------------------------------------------------ the iterate
class Iterate:
    """The iterate of Algorithm 3: map parameters (float64), ``w``, Pegasos' ``t``.

    Parameters
    ----------
    params : dict of ndarray
        The map's parameters, float64 (``theta`` or ``r`` and ``signs``, and
        ``offset``); updated in place by :meth:`map_step`.
    est : CompactNonlinearMap
        The estimator being fitted: its hyper-parameters, ``gamma_`` and
        ``classes_`` (``objective="classification"``).
    """

    def __init__(self, params, est):
        self.params = params
        self.k = est.n_components
        self.alpha = float(est.alpha)
        self.schedule = est.theta_schedule or DEFAULT_SCHEDULE[est.objective]
        self.step = float(est.theta_step if est.theta_step is not None
                          else DEFAULT_STEP[est.objective, self.schedule])
        self.t0 = float(est.theta_t0)
        self.t_theta = 0
        self.steps = []  # the step of every Theta-step taken, in order
        self.kernel = est.kernel
        self.gamma = est.gamma_
        K = 0
        if est.objective == "classification":
            K = 1 if est.classes_.size == 2 else est.classes_.size
        # two classes: the binary hinge of the paper whatever ``multiclass`` says
        self.multiclass = est.multiclass if K > 1 else "ovr"
        self.coef = np.zeros((K, self.k))
        self.intercept = np.zeros(K)
        self.t = 0
        self.w, self.b = self.coef, self.intercept
        self.average = est.average
        self._val_kernel = None

    def copy(self):
        new = object.__new__(Iterate)
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
            eta = theta_step_size(self.step, self.t_theta, self.schedule, self.t0)
            self.steps.append(eta)
            self.t_theta += 1
            for key, g in map_gradient(x, self.params, self.k, u, dZ).items():
                self.params[key] -= eta * g

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
        pred = scores_to_labels(s[:, 0] if s.shape[1] == 1 else s, est.classes_)
        return float(np.mean(pred == y))
