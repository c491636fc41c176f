"""Streaming SGD: Pegasos (hinge), logistic, squared hinge and squared loss.

The problem is the regularized risk of Shalev-Shwartz et al.'s Pegasos (the
w-step of CNM, Yu et al. 2015, eqs. 5-7; EERF eq. (8) with the quadratic
regularizer its authors use in practice):

    f(W) = alpha/2 (||W||_F^2 + ||b / s||^2) + 1/n sum_i c_i L(y_i, W z_i + b)

where ``alpha`` is the paper's lambda, ``c_i`` the class weight of row i and
``s = intercept_scaling``: the intercept is the weight of a constant feature of
value ``s`` and is regularized with the rest, exactly as in liblinear.  The
objective is therefore *the same* as scikit-learn's ``LinearSVC`` (hinge,
squared hinge) and ``LogisticRegression(solver="liblinear")`` (log loss) with

    C = 1 / (alpha * n),   the same intercept_scaling,

(multiply f by 1/alpha: 1/2 ||w||^2 + C sum_i c_i L_i).

Steps (Pegasos, Algorithm 1 of the CNM paper): on a mini-batch A at step t,
``W <- (1 - eta_t alpha) W - eta_t / |A| sum_{i in A} c_i L'(p_i) z_i'`` with
``eta_t = 1 / (alpha t)``, then the projection of each problem's (w, b/s)
onto the ball that holds the optimum: radius 1/sqrt(alpha) for the hinge
(Pegasos' Theorem 1), sqrt(2 L(0) / alpha) for the other losses
(:func:`rfstream.solvers._losses.ball_radius`).

Data parallelism: parameter averaging
-------------------------------------
An epoch is one pass over the data (one distributed reduction, computed with
:func:`rfstream.cluster.compute`).  In that pass every row block (one dask
chunk, i.e. one task; the feature map is fused into the same task) starts from
the current model, runs mini-batch Pegasos on its own training rows in an order
drawn from (seed, epoch, global row index), and returns its model times its
number of rows; the sum over blocks divided by the rows is the new model
(Zinkevich et al. 2010's parameter mixing, repeated every epoch: "local SGD").
The step counter advances by the row-weighted mean number of local steps, so
the averaged model is on the 1/(alpha t) schedule of one SGD with a mini-batch
that is the union of the blocks' mini-batches.

Why averaging rather than a synchronous gradient reduction: a gradient
reduction makes one step per pass over the data (full-batch subgradient
descent, hopeless for the non-smooth hinge at small lambda), whereas each
averaging round makes n / (n_chunks * batch_size) Pegasos steps for the same
single read of the data.  Measured (docs/sgd.md): on Adult 10 epochs reach
scikit-learn's optimum within 0.5% (hinge) and 0.005% (log loss).  Averaging
needs blocks that look alike: on KDD99, whose rows come sorted in runs of one
attack type, the averaged model stays 50-140% above the optimum after 6
epochs, while ``chunks_per_round=1`` (sequential over the blocks) gets to
1.2% (log loss); shuffle such data when converting it, use rounds, or use
``solver="newton"`` (:mod:`rfstream.solvers._newton`: damped Newton steps, each
one fused gradient + Hessian pass; exact whatever the row order, for the
log loss, the squared hinge and, through a smoothing, the hinge).

The same pass also evaluates the incoming model: the exact regularized
objective on the training rows and the loss and error on the held-out rows,
so the stopping rules cost no extra pass (one more pass evaluates the final
model).

Determinism
-----------
Every random choice is a function of (seed, epoch, global row index) or
(seed, epoch): the order of rows inside a block, the held-out rows, the order
of the chunks.  The result therefore does not depend on the number of workers
or on where the tasks run (threads and a 2-process LocalCluster give the same
model, see tests/test_sgd.py).  It *does* depend on the chunking, as any
parameter averaging does: each block's local SGD sees only its rows, so
blocks of other sizes give other local models (a numpy input is processed as
blocks of :data:`rfstream.reductions.NUMPY_BLOCK` rows, so it equals a dask
input with the same chunks).  Making it chunk-invariant would need fixed
virtual blocks whose rows straddle chunk boundaries, i.e. moving feature rows
between tasks; Zarr datasets have fixed chunks (65,536 rows by default from
``rfstream convert``), so a given dataset always trains the same model.

Chunk order: with the default ``chunks_per_round=None`` all blocks of an epoch
start from the same model, so their order is irrelevant.  With
``chunks_per_round=k`` an epoch is split into rounds of k blocks, in an order
drawn from (seed, epoch); each round averages its blocks and the next round
starts from that model (more model synchronizations per pass, less
parallelism).  Only the blocks of the round are computed (the others are culled
from the graph).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from numbers import Integral, Real

import dask.array as da
import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._validation import check_dask_array
from ..cluster import compute
from ..random import (
    STREAM_SGD_CHUNKS,
    STREAM_SGD_HOLDOUT,
    STREAM_SGD_ORDER,
    check_seed,
    row_uniform,
)
from ..reductions import NUMPY_BLOCK, Layout, sum_rows
from ._gram import fused_rows
from ._linear import LinearClassifierMixin, LinearPredictMixin
from ._losses import CLASS_INDEX_LOSSES, LOSSES, ball_radius
from ._newton import newton_chunk, newton_fit, newton_fused_chunk
from .targets import check_targets, class_weights, encode_classes, find_classes, signed

LEARNING_RATES = ("pegasos", "optimal", "constant")
# Losses whose gradient grows with the margin: a step larger than
# 1 / (c max ||z||^2) on a mini-batch overshoots (c = the loss's curvature).
SMOOTHNESS = {"squared_hinge": 2.0, "squared": 1.0}


# ------------------------------------------------------------------ the steps
@dataclass(frozen=True)
class _Spec:
    """What a step needs besides the model: loss, lambda, schedule, intercept."""

    loss: str
    alpha: float
    learning_rate: str = "pegasos"
    eta0: float = 0.01
    intercept_scaling: float = 1.0  # 0: no intercept
    radius: float = np.inf
    joint_ball: bool = False  # class-index losses: one ball for the whole matrix
    average: bool = True  # polynomial-decay averaging of the iterates

    def eta(self, t):
        if self.learning_rate == "pegasos":
            return 1.0 / (self.alpha * t)
        if self.learning_rate == "optimal":  # Bottou's 1/(alpha (t + t0)), eta_1 ~ eta0
            return 1.0 / (self.alpha * (t + 1.0 / (self.alpha * self.eta0)))
        return self.eta0


def _scores(z, W, v, s):
    p = z @ W.T.astype(z.dtype, copy=False)
    p = p.astype(np.float64, copy=False)
    return p + s * v if s else p


def _project(W, v, spec):
    if not np.isfinite(spec.radius):
        return W, v
    if spec.joint_ball:
        norm = np.sqrt(np.sum(W**2) + np.sum(v**2))
        scale = min(1.0, spec.radius / norm) if norm > 0 else 1.0
        return W * scale, v * scale
    norm = np.sqrt(np.sum(W**2, axis=1) + v**2)
    scale = np.minimum(1.0, spec.radius / np.maximum(norm, 1e-300))
    return W * scale[:, None], v * scale


def _run_steps(W, v, z, target, weight, batches, t, spec, avg=None, offset=None):
    """Mini-batch steps over ``batches`` (row index arrays into z); returns (W, v, t, avg).

    ``W`` (K, D) and ``v`` (K,) are float64; ``v`` is the intercept over
    ``spec.intercept_scaling`` (the weight of the constant feature).  ``avg``
    = (Wbar, vbar) is the running polynomial-decay average of the iterates
    (Shamir & Zhang 2013, eta = 3): Wbar_t = (1 - 4/(t+3)) Wbar_{t-1} + 4/(t+3) W_t.
    ``offset`` (K,) is a fixed intercept added to the scores (``sgd_steps`` with
    intercept_scaling=0).
    """
    fn = LOSSES[spec.loss]
    s = spec.intercept_scaling
    curvature = SMOOTHNESS.get(spec.loss)
    for idx in batches:
        zb = z[idx]
        t += 1
        eta = spec.eta(t)
        if curvature:  # unbounded gradients: keep eta below 1 / (batch smoothness)
            sq = zb.multiply(zb).sum(axis=1) if sp.issparse(zb) else np.einsum("ij,ij->i", zb, zb)
            lip = curvature * (np.max(sq) + s * s)
            eta = min(eta, 1.0 / max(lip, 1e-12))
        p = _scores(zb, W, v, s)
        _, g = fn(p if offset is None else p + offset, target[idx])
        if weight is not None:
            g *= weight[idx, None]
        g /= len(idx)
        shrink = 1.0 - eta * spec.alpha
        gW = g.T.astype(zb.dtype) @ zb
        gv = s * g.sum(axis=0)
        W = shrink * W - eta * gW
        if s:
            v = shrink * v - eta * gv
        W, v = _project(W, v, spec)
        if avg is not None:
            rho = 4.0 / (t + 3.0)
            avg = ((1.0 - rho) * avg[0] + rho * W, (1.0 - rho) * avg[1] + rho * v)
    return W, v, t, avg


def sgd_steps(coef, intercept, batches, *, loss="hinge", alpha=1e-4, t0=0,
              learning_rate="pegasos", eta0=0.01, intercept_scaling=1.0, project=True):
    """Run one SGD step per mini-batch from a given model: the w-step of CNM.

    Algorithm 1 of Yu et al. (2015) (Pegasos) with the defaults: for each batch
    (Z, y), step t = t0 + 1, t0 + 2, ... with eta_t = 1/(alpha t), then the
    projection onto the ball that holds the optimum.

    Parameters
    ----------
    coef : array of shape (K, D) or (D,)
        Current weights (K = 1 for a binary problem, K classes for OvR or
        multinomial).
    intercept : array of shape (K,) or float
    batches : iterable of (Z, y)
        Features ``Z`` (m, D) (numpy, any float dtype) and targets: +-1 of
        shape (m,) or (m, K) for "hinge", "squared_hinge", "log_loss" (one
        binary problem per column); class indices (m,) for "multinomial" and
        "crammer_singer";
        real values for "squared".
    loss : {"hinge", "squared_hinge", "log_loss", "multinomial", "crammer_singer", "squared"}
    alpha : float
        lambda of the objective (see the module docstring).
    t0 : int
        Steps already taken (continue a schedule: pass the returned ``t``).
    learning_rate, eta0 : as :class:`StreamingSGDClassifier`.
    intercept_scaling : float
        Value of the constant feature whose weight is intercept / scaling
        (regularized like the other weights); 0 keeps the intercept fixed.
    project : bool
        Project onto the ball of radius :func:`_losses.ball_radius`.

    Returns
    -------
    coef, intercept, t : the updated weights (same shapes as given, float64) and
        the step counter after the last step.
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}; got {loss!r}.")
    if learning_rate not in LEARNING_RATES:
        raise ValueError(f"learning_rate must be one of {LEARNING_RATES}; got {learning_rate!r}.")
    if not alpha > 0:
        raise ValueError(f"alpha must be > 0; got {alpha!r}.")
    coef = np.asarray(coef, dtype=np.float64)
    one = coef.ndim == 1
    W = np.atleast_2d(coef).copy()
    s = float(intercept_scaling)
    v = np.broadcast_to(np.asarray(intercept, dtype=np.float64), (W.shape[0],)) / (s or 1.0)
    v = v.copy() if s else np.zeros(W.shape[0])
    b_fixed = np.broadcast_to(np.asarray(intercept, dtype=np.float64), (W.shape[0],)).copy()
    radius = ball_radius(loss, alpha, max(W.shape[0], 2)) if project else np.inf
    spec = _Spec(loss, float(alpha), learning_rate, float(eta0), s, radius, loss in CLASS_INDEX_LOSSES)
    t = int(t0)
    for Z, y in batches:
        Z = np.asarray(Z)
        if Z.dtype not in (np.float32, np.float64):
            Z = Z.astype(np.float64)
        y = np.asarray(y)
        if loss not in CLASS_INDEX_LOSSES and y.ndim == 1:
            y = y[:, None]
        batch = [np.arange(Z.shape[0])]
        W, v, t, _ = _run_steps(W, v, Z, y, None, batch, t, spec, offset=None if s else b_fixed)
    b = s * v if s else b_fixed
    return (W[0], b[0], t) if one else (W, b, t)


# ------------------------------------------------------------------ one pass
def _layout(K, D):
    return Layout(n=(), W=(K, D), v=(K,), Wbar=(K, D), vbar=(K,), steps=(), loss=(), n_val=(),
                  loss_val=(), err_val=())


def _encode(y, task):
    """(target, class index or None, weight) for one block of raw labels."""
    if task["kind"] == "regression":
        return np.asarray(y, dtype=np.float64)[:, None], None, None
    classes = task["classes"]
    idx = encode_classes(y, classes, fix="pass every class in the first partial_fit call (classes=...)")
    weight = task["class_weight"][idx] if task["class_weight"] is not None else None
    if task["multinomial"]:
        return idx, idx, weight
    return signed(idx, classes.size), idx, weight


def _epoch_chunk(z, y, *, offset, W, v, t, epoch, seed, spec, task, batch_size,
                 validation_fraction, train, layout, Wbar=None, vbar=None):
    """Partials of one block: local SGD from (W, v) and the incoming model's losses.

    The model evaluated (and reported) is the averaged iterate (Wbar, vbar)
    when given, else (W, v).
    """
    if Wbar is None:
        Wbar, vbar = W, v
    out = layout.empty()
    m = z.shape[0]
    if m == 0:
        return out
    if z.dtype not in (np.float32, np.float64):
        z = z.astype(np.float64)
    parts = layout.unpack(out)
    target, idx, weight = _encode(y, task)
    if validation_fraction > 0:
        val = row_uniform(seed, STREAM_SGD_HOLDOUT, offset, offset + m) < validation_fraction
    else:
        val = np.zeros(m, dtype=bool)
    # the incoming model: exact loss on training rows, loss and errors held out
    p = _scores(z, Wbar, vbar, spec.intercept_scaling)
    loss, _ = LOSSES[spec.loss](p, target)
    if weight is not None:
        loss = loss * weight
    parts["loss"][...] = loss[~val].sum()
    if val.any():
        parts["n_val"][...] = val.sum()
        parts["loss_val"][...] = loss[val].sum()
        if idx is None:
            parts["err_val"][...] = np.sum((p[val] - target[val]) ** 2)
        else:
            pred = (p[:, 0] > 0).astype(np.intp) if p.shape[1] == 1 else np.argmax(p, axis=1)
            parts["err_val"][...] = np.sum(pred[val] != idx[val])
    rows = np.flatnonzero(~val)
    parts["n"][...] = rows.size
    if rows.size == 0:
        return out
    if train:
        # in-block order from (seed, epoch, global row): a global permutation restricted to the block
        keys = row_uniform(seed, (STREAM_SGD_ORDER << 32) + epoch, offset, offset + m)[rows]
        order = rows[np.argsort(keys, kind="stable")]
        batches = [order[i : i + batch_size] for i in range(0, order.size, batch_size)]
        avg = (Wbar, vbar) if spec.average else None
        W, v, t_end, avg = _run_steps(W, v, z, target, weight, batches, t, spec, avg)
        if avg is not None:
            Wbar, vbar = avg
        parts["steps"][...] = rows.size * (t_end - t)
    parts["W"][...] = rows.size * W
    parts["v"][...] = rows.size * v
    parts["Wbar"][...] = rows.size * (Wbar if spec.average else W)
    parts["vbar"][...] = rows.size * (vbar if spec.average else v)
    return out


def _pass(Z, y, fn, size, chunk_ids=None):
    """Sum of ``fn`` partials over the row blocks (all, or those in ``chunk_ids``)."""
    return compute(sum_rows(fn, size, Z, y, blocks=chunk_ids))


def _n_blocks(Z):
    return Z.numblocks[0] if isinstance(Z, da.Array) else max(1, -(-Z.shape[0] // NUMPY_BLOCK))


# ------------------------------------------------------------------ estimators
class _BaseStreamingSGD(LinearPredictMixin, BaseEstimator):
    _parameter_constraints = {
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

    # -- subclass hooks: _task(y) -> task dict, _n_outputs(task), _loss_name()
    def _spec(self, task, K):
        loss = self._loss_name()
        s = float(self.intercept_scaling) if self.fit_intercept else 0.0
        cw = task.get("class_weight")
        max_w = float(np.max(cw)) if cw is not None else 1.0
        if loss == "squared":
            radius = np.sqrt(task["y_sq"] / self.alpha) if task.get("y_sq") is not None else np.inf
        else:
            radius = ball_radius(loss, self.alpha, task.get("n_classes", 2), max_w)
        return _Spec(loss, float(self.alpha), self.learning_rate, float(self.eta0), s, radius,
                     loss == "multinomial", bool(self.average))

    def _init_state(self, K, D):
        self._W, self._v = np.zeros((K, D)), np.zeros(K)  # the SGD iterate
        self._Wb, self._vb = self._W, self._v  # the averaged iterate: the model
        self.t_ = 0
        self.n_epochs_ = 0
        self.objective_path_ = []
        self.validation_path_ = []

    def _epoch_fn(self, spec, task, layout, t, epoch, train):
        return partial(
            _epoch_chunk, W=self._W, v=self._v, Wbar=self._Wb, vbar=self._vb, t=t, epoch=epoch,
            seed=check_seed(self.random_state),
            spec=spec, task=task, batch_size=self.batch_size,
            validation_fraction=self.validation_fraction if self.early_stopping else 0.0,
            train=train, layout=layout,
        )

    def _one_epoch(self, Z, y, spec, task, layout):
        """One pass (or ``chunks_per_round`` rounds) over the data; updates the state.

        Returns the evaluation of the incoming model when the epoch is a single
        round over every block (the exact objective), else None.
        """
        seed = check_seed(self.random_state)
        n_blocks = _n_blocks(Z)
        k = self.chunks_per_round
        if k is None or k >= n_blocks:
            rounds = [None]
        else:
            perm = np.random.default_rng([seed, STREAM_SGD_CHUNKS, self.n_epochs_]).permutation(n_blocks)
            rounds = [perm[i : i + k] for i in range(0, n_blocks, k)]
        evaluation = None
        for ids in rounds:
            fn = self._epoch_fn(spec, task, layout, self.t_, self.n_epochs_, True)
            res = layout.unpack(_pass(Z, y, fn, layout.size, ids))
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

    def _evaluate(self, Z, y, spec, task, layout):
        """One pass that evaluates the current model (no training)."""
        fn = self._epoch_fn(spec, task, layout, self.t_, self.n_epochs_, False)
        return self._evaluation(layout.unpack(_pass(Z, y, fn, layout.size)))

    def _fit_loop(self, Z, y, task):
        K = self._n_outputs(task)
        D = Z.shape[1]
        layout = _layout(K, D)
        spec = self._spec(task, K)
        self._init_state(K, D)
        key = "validation_loss" if self.early_stopping else "objective"
        evaluated = []  # (evaluation, W, v) of every model whose objective is known
        best, no_change = np.inf, 0
        evaluated_zero = self._Wb
        for _ in range(self.max_iter):
            start = (self._Wb, self._vb)
            ev = self._one_epoch(Z, y, spec, task, layout)
            if ev is None:
                continue
            self._record(ev)
            if start[0] is evaluated_zero:
                continue  # the initial (zero) model is no candidate
            evaluated.append((ev, *start))
            if ev[key] < best - (self.tol or 0.0) * abs(best) or not np.isfinite(best):
                best, no_change = ev[key], 0
            else:
                no_change += 1
                if self.tol is not None and no_change >= self.n_iter_no_change:
                    break
        self.n_iter_ = self.n_epochs_
        ev = self._evaluate(Z, y, spec, task, layout)  # the final model: one more pass
        self._record(ev)
        evaluated.append((ev, self._Wb, self._vb))
        # the best evaluated model (the last one on ties)
        i = min(range(len(evaluated)), key=lambda j: (evaluated[j][0][key], -j))
        ev, self._Wb, self._vb = evaluated[i]
        self.objective_ = ev["objective"]
        self.validation_score_ = ev["validation_error"]
        self._set_public(task)
        return self

    def _fit_newton(self, Z, y, task):
        """``solver="newton"``: damped Newton passes (:mod:`rfstream.solvers._newton`)."""
        loss = self._loss_name()
        if loss not in ("hinge", "squared_hinge", "log_loss"):
            raise ValueError(
                f"solver='newton' supports the binary and one-vs-rest losses hinge, squared_hinge "
                f"and log_loss; got the {loss!r} loss. Use solver='sgd' or multi_class='ovr'."
            )
        if self.early_stopping:
            raise ValueError("early_stopping=True needs solver='sgd'; solver='newton' stops on the "
                             "estimated gap to the optimum (tol).")
        K, D = self._n_outputs(task), Z.shape[1]
        s = float(self.intercept_scaling) if self.fit_intercept else 0.0
        chunk = partial(newton_chunk, loss=loss, intercept_scaling=s,
                        encode=partial(_encode, task=task))

        # Z = map.transform(X): each pass reduces over X and makes the features in its
        # tasks, a sub-block at a time (as the ridge pass)
        features, rows = fused_rows(Z)

        def chunk_fn(**kw):
            if features is None:
                return partial(chunk, **kw)
            return partial(newton_fused_chunk, features=features, dtype=Z.dtype, n_features=D,
                           chunk=partial(chunk, **kw), layout=kw["layout"])

        res = newton_fit(lambda fn, size: _pass(rows, y, fn, size), chunk_fn,
                         K, D, loss=loss, alpha=float(self.alpha), intercept_scaling=s,
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
        s = float(self.intercept_scaling) if self.fit_intercept else 0.0
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
        s = float(self.intercept_scaling) if self.fit_intercept else 0.0
        self.coef_ = self._Wb.copy()
        self.intercept_ = s * self._vb

    # -- input ----------------------------------------------------------------
    def _check_X_y(self, X, y, reset):
        if isinstance(X, da.Array):
            X = check_dask_array(X, self, reset=reset)
            return X, check_targets(X, y)
        X, y = validate_data(self, X, y, reset=reset, dtype=[np.float64, np.float32],
                             y_numeric=isinstance(self, RegressorMixin), accept_sparse="csr")
        return X, y

    def objective(self, X, y):
        """The exact regularized objective f of the current model on (X, y): one pass."""
        check_is_fitted(self)
        X, y = self._check_X_y(X, y, reset=False)
        task = self._task()
        K = np.atleast_2d(self.coef_).shape[0]
        layout = _layout(K, X.shape[1])
        spec = self._spec(task, K)
        s = spec.intercept_scaling
        W, v = np.atleast_2d(self.coef_), np.atleast_1d(self.intercept_) / (s or 1.0)
        fn = partial(_epoch_chunk, W=W, v=v if s else np.zeros(K), t=0, epoch=0, seed=0, spec=spec,
                     task=task, batch_size=self.batch_size, validation_fraction=0.0, train=False,
                     layout=layout)
        return self._evaluation(layout.unpack(_pass(X, y, fn, layout.size)), W, v if s else 0.0)["objective"]


class StreamingSGDClassifier(LinearClassifierMixin, ClassifierMixin, _BaseStreamingSGD):
    """Linear classifier trained by streaming, data-parallel Pegasos-style SGD.

    Minimizes ``alpha/2 (||W||^2 + ||b/s||^2) + 1/n sum_i c_i L(y_i, W z_i + b)``
    (see the module docstring for the steps, the data parallelism, and how
    the result depends on seeds, workers and chunks).  Equivalent to
    ``LinearSVC(C=1/(alpha n))`` for the (squared) hinge and to
    ``LogisticRegression(C=1/(alpha n), solver="liblinear")`` for the log loss,
    with the same ``intercept_scaling``.

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
        row's own class weight in every binary problem, as SGDClassifier).
        "balanced": n / (n_classes * count(class)).
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
    solver : {"sgd", "newton"}, default="sgd"
        "sgd": the streaming steps above.  "newton": damped Newton passes
        (:mod:`rfstream.solvers._newton`): each pass is one reduction computing
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
    """

    _parameter_constraints = {
        **_BaseStreamingSGD._parameter_constraints,
        "solver": [StrOptions({"sgd", "newton"})],
        "loss": [StrOptions({"hinge", "log_loss", "squared_hinge"})],
        "multi_class": [StrOptions({"ovr", "multinomial"})],
        "class_weight": [dict, StrOptions({"balanced"}), None],
    }

    def __init__(self, loss="hinge", *, alpha=1e-4, multi_class="ovr", class_weight=None,
                 max_iter=20, batch_size=16, tol=1e-3, n_iter_no_change=3, early_stopping=False,
                 validation_fraction=0.1, learning_rate="pegasos", eta0=0.01, average=True,
                 fit_intercept=True, intercept_scaling=1.0, chunks_per_round=None, random_state=0,
                 solver="sgd"):
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

    def fit(self, X, y):
        """Fit on numpy or dask ``X`` (n, D) and labels ``y`` (n,)."""
        self._validate_params()
        X, y = self._check_X_y(X, y, reset=True)
        classes, counts = find_classes(y, name=type(self).__name__, return_counts=True)
        self.classes_ = classes
        task = self._make_task(classes, counts)
        if self.solver == "newton":
            return self._fit_newton(X, y, task)
        return self._fit_loop(X, y, task)

    def partial_fit(self, X, y, classes=None):
        """One epoch (one pass) over (X, y), continuing from the current model.

        ``classes`` (every label that will ever appear) is required on the first call.
        """
        first = not hasattr(self, "classes_")
        if self.solver != "sgd":
            raise ValueError(f"partial_fit needs solver='sgd'; got solver={self.solver!r} (Newton "
                             "passes need all the data: call fit).")
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
        X, y = self._check_X_y(X, y, reset=first)
        task = self._task()
        K = self._n_outputs(task)
        layout = _layout(K, X.shape[1])
        if first:
            self._init_state(K, X.shape[1])
        else:
            self._restore_state()
        ev = self._one_epoch(X, y, self._spec(task, K), task, layout)
        if ev is not None:
            self._record(ev)
        self._set_public(task)
        return self


class StreamingSGDRegressor(RegressorMixin, _BaseStreamingSGD):
    """Linear regression (squared loss) by streaming, data-parallel SGD.

    Minimizes ``alpha/2 (||w||^2 + (b/s)^2) + 1/(2n) sum_i (y_i - w z_i - b)^2``,
    i.e. ``sklearn.linear_model.Ridge(alpha=alpha * n)`` on [Z, s] without a
    separate intercept.  Steps and projection as :class:`StreamingSGDClassifier`
    (the ball radius is sqrt(mean(y^2) / alpha), from f(w*) <= f(0)).
    Parameters and attributes as the classifier, without ``loss``,
    ``multi_class`` and ``class_weight``; ``validation_score_`` is the
    held-out mean squared error.
    """

    def __init__(self, *, alpha=1e-4, max_iter=20, batch_size=16, tol=1e-3, n_iter_no_change=3,
                 early_stopping=False, validation_fraction=0.1, learning_rate="pegasos", eta0=0.01,
                 average=True, fit_intercept=True, intercept_scaling=1.0,
                 chunks_per_round=None, random_state=0):
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

    def _loss_name(self):
        return "squared"

    def _n_outputs(self, task):
        return 1

    def _make_task(self, y):
        y_sq = compute((y.astype(np.float64) ** 2).mean()) if isinstance(y, da.Array) else np.mean(
            np.asarray(y, dtype=np.float64) ** 2)
        self.target_scale_ = float(y_sq)
        return self._task()

    def _task(self):
        return {"kind": "regression", "y_sq": self.target_scale_}

    def fit(self, X, y):
        """Fit on numpy or dask ``X`` (n, D) and targets ``y`` (n,)."""
        self._validate_params()
        X, y = self._check_X_y(X, y, reset=True)
        return self._fit_loop(X, y, self._make_task(y))

    def partial_fit(self, X, y):
        """One epoch over (X, y) from the current model.  The projection radius
        comes from the first call's targets (times 4, for later data)."""
        first = not hasattr(self, "coef_")
        if first:
            self._validate_params()
        X, y = self._check_X_y(X, y, reset=first)
        if first:
            self._make_task(y)
            self.target_scale_ *= 4.0
            self._init_state(1, X.shape[1])
        else:
            self._restore_state()
        task = self._task()
        layout = _layout(1, X.shape[1])
        ev = self._one_epoch(X, y, self._spec(task, 1), task, layout)
        if ev is not None:
            self._record(ev)
        self._set_public(task)
        return self

    def _set_public(self, task):
        s = float(self.intercept_scaling) if self.fit_intercept else 0.0
        self.coef_ = self._Wb[0].copy()
        self.intercept_ = float(s * self._vb[0])

    def predict(self, X):
        """Predictions: numpy in, numpy out; dask in, lazy dask out."""
        return self._decision(X)
