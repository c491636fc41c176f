"""One SGD epoch as one reduction: local Pegasos steps per row block, then parameter averaging.

The steps are Algorithm 1 of Yu et al. (2015) (CNM's w-step; Pegasos, Shalev-Shwartz et al.
2011), projected onto the ball that holds the optimum and averaged with polynomial decay
(Shamir & Zhang 2013); each block's model, times its rows, is summed into the next one
(Zinkevich et al. 2010's parameter mixing, every epoch), and the same pass evaluates the
incoming model.  Deviation: the result depends on the chunking; the smooth losses' steps are
capped.  docs/sgd.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import dask.array as da
import numpy as np
import scipy.sparse as sp

from ...cluster import compute
from ...features.fused import FUSED_SUB_BLOCK, make_features
from ...features.source import fused_rows
from ...random import STREAM_SGD_HOLDOUT, STREAM_SGD_ORDER, row_uniform
from ...reductions import NUMPY_BLOCK, Layout
from ..passes import RowSpec, row_sum
from ..targets import encode_classes, signed
from ..weights import check_weight_block
from .losses import CLASS_INDEX_LOSSES, LOSSES, ball_radius

LEARNING_RATES = ("pegasos", "optimal", "constant")
# Losses whose gradient grows with the margin: a step larger than
# 1 / (c max_i w_i ||z_i||^2) on a mini-batch overshoots (c = the loss's curvature,
# w_i the row weight).
SMOOTHNESS = {"squared_hinge": 2.0, "squared": 1.0}


@dataclass(frozen=True)
class StepSpec:
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
        """Step size at step t: 1/(alpha t) (Pegasos); Bottou's 1/(alpha (t + t0)); eta0."""
        if self.learning_rate == "pegasos":
            return 1.0 / (self.alpha * t)
        if self.learning_rate == "optimal":  # eta_1 ~ eta0
            return 1.0 / (self.alpha * (t + 1.0 / (self.alpha * self.eta0)))
        return self.eta0


def scores(z, W, v, s):
    """Float64 scores ``z W' + s v`` (a product in z's dtype)."""
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


def run_steps(W, v, take, target, weight, batches, t, spec, avg=None, offset=None):
    """Mini-batch steps over ``batches`` (row index arrays); returns (W, v, t, avg).

    ``take(idx)`` returns the feature rows ``idx`` (stored rows, or features made
    for the batch: :mod:`rfstream.features.fused`); ``target`` and ``weight`` are
    indexed by the same rows.  ``W`` (K, D) and ``v`` (K,) are float64; ``v`` is
    the intercept over ``spec.intercept_scaling`` (the weight of the constant
    feature).  ``avg`` = (Wbar, vbar) is the running polynomial-decay average of
    the iterates (Shamir & Zhang 2013; docs/sgd.md).  ``offset`` (K,) is a fixed
    intercept added to the scores (``sgd_steps`` with intercept_scaling=0).
    """
    fn = LOSSES[spec.loss]
    s = spec.intercept_scaling
    curvature = SMOOTHNESS.get(spec.loss)
    for idx in batches:
        zb = take(idx)
        t += 1
        eta = spec.eta(t)
        if curvature:  # unbounded gradients: keep eta below 1 / (batch smoothness)
            sq = np.asarray(zb.multiply(zb).sum(axis=1)).ravel() if sp.issparse(zb) else np.einsum(
                "ij,ij->i", zb, zb)
            lip = curvature * (np.max(sq + s * s) if weight is None else np.max(weight[idx] * (sq + s * s)))
            eta = min(eta, 1.0 / max(lip, 1e-12))
        p = scores(zb, W, v, s)
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
        "crammer_singer"; real values for "squared".
    loss : {"hinge", "squared_hinge", "log_loss", "multinomial", "crammer_singer", "squared"}
    alpha : float
        lambda of the objective (docs/sgd.md).
    t0 : int
        Steps already taken (continue a schedule: pass the returned ``t``).
    learning_rate, eta0 : as :class:`rfstream.StreamingSGDClassifier`.
    intercept_scaling : float
        Value of the constant feature whose weight is intercept / scaling
        (regularized like the other weights); 0 keeps the intercept fixed.
    project : bool
        Project onto the ball of radius :func:`rfstream.solvers.sgd.losses.ball_radius`.

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
    spec = StepSpec(loss, float(alpha), learning_rate, float(eta0), s, radius, loss in CLASS_INDEX_LOSSES)
    t = int(t0)
    for Z, y in batches:
        Z = np.asarray(Z)
        if Z.dtype not in (np.float32, np.float64):
            Z = Z.astype(np.float64)
        y = np.asarray(y)
        if loss not in CLASS_INDEX_LOSSES and y.ndim == 1:
            y = y[:, None]
        batch = [np.arange(Z.shape[0])]
        W, v, t, _ = run_steps(W, v, Z.__getitem__, y, None, batch, t, spec,
                               offset=None if s else b_fixed)
    b = s * v if s else b_fixed
    return (W[0], b[0], t) if one else (W, b, t)


def epoch_layout(K, D):
    """Partials of one epoch: rows, rows x (W, v, Wbar, vbar), steps, and the evaluation sums."""
    return Layout(n=(), W=(K, D), v=(K,), Wbar=(K, D), vbar=(K,), steps=(), loss=(), n_val=(),
                  loss_val=(), err_val=())


def sample_weights(w, task, offset=0):
    """A block of sample weights, checked and scaled by ``task["weight_scale"]``, or None."""
    if w is None:
        return None
    return check_weight_block(w, offset) * task.get("weight_scale", 1.0)


def encode_targets(y, task, w=None, offset=0):
    """(target, class index or None, row weight or None) for one block of raw labels.

    ``task``: {"kind": "regression"} or the classifier's {"kind", "classes",
    "class_weight", "multinomial"}, with "weight_scale" when fitting with sample
    weights ``w``.  Targets are +-1 per one-vs-rest problem
    (:func:`rfstream.solvers.targets.signed`), class indices (multinomial) or real
    values; the row weight is the class weight times the scaled sample weight.
    """
    sw = sample_weights(w, task, offset)
    if task["kind"] == "regression":
        return np.asarray(y, dtype=np.float64)[:, None], None, sw
    classes = task["classes"]
    idx = encode_classes(y, classes, fix="pass every class in the first partial_fit call (classes=...)")
    weight = task["class_weight"][idx] if task["class_weight"] is not None else None
    if sw is not None:
        weight = sw if weight is None else weight * sw
    if task["multinomial"]:
        return idx, idx, weight
    return signed(idx, classes.size), idx, weight


def epoch_rows(Z):
    """``(fused, rows)``: what an epoch reduces over and the :class:`EpochSpec` fields for it.

    For ``Z = map.transform(X)``: ``X`` with ``Z``'s row chunks and
    ``{"features", "dtype", "width"}``; otherwise ``Z`` and ``{}``.
    """
    features, rows = fused_rows(Z, even=False)
    if features is None:
        return {}, Z
    return {"features": features, "dtype": Z.dtype, "width": Z.shape[1]}, rows


class BatchWindows:
    """``take(idx)`` for mini-batches that follow one another along ``order`` (run_steps' batches):
    the features of ``window`` rows of ``order`` made by one call of ``made`` (a few thousand rows,
    not 16: a call's fixed costs, the one-hot split's patterns among them, were most of an epoch),
    each batch a slice of them.  The same rows' features as one call per batch would make, up to
    the rounding of a GEMM of another height."""

    def __init__(self, made, order, window):
        self.made, self.order, self.window = made, order, window
        self.pos = self.start = self.stop = 0
        self.z = None

    def __call__(self, idx):
        n = idx.size
        if n and idx[0] != self.order[self.pos]:
            raise ValueError("mini-batches must follow the order the windows were made for")
        if self.pos + n > self.stop:
            self.start, self.stop = self.pos, min(self.pos + max(self.window, n), self.order.size)
            self.z = self.made(self.order[self.start : self.stop])
        zb = self.z[self.pos - self.start : self.pos - self.start + n]
        self.pos += n
        return zb


@dataclass(frozen=True, eq=False, kw_only=True)
class EpochSpec(RowSpec):
    """An epoch's :class:`rfstream.solvers.passes.RowSpec`: the incoming SGD iterate ``W``
    (K, D), ``v`` (K,) and the averaged one ``Wbar``, ``vbar`` (None: the iterate), the
    step count ``t``, the ``epoch`` and ``seed`` of the row order and held-out rows, the
    step kernel's ``steps`` (:class:`rfstream.solvers.sgd.epochs.StepSpec`), the ``task``
    (:func:`encode_targets`), ``batch_size``, ``validation_fraction``, whether to
    ``train`` (else only evaluate), and the features' ``width`` when the task makes them."""

    W: np.ndarray
    v: np.ndarray
    Wbar: np.ndarray | None = None
    vbar: np.ndarray | None = None
    t: int
    epoch: int
    steps: StepSpec
    task: dict
    batch_size: int
    validation_fraction: float
    train: bool
    width: int | None = None


def epoch_chunk(z, *arrays, offset, spec):
    """Partials of one block: local SGD from (W, v) and the incoming model's losses.

    ``arrays``: the block's labels, then its sample weights when they travel; ``spec``
    an :class:`EpochSpec`.  The model evaluated (and reported) is the averaged
    iterate (Wbar, vbar) when given, else (W, v).  With ``spec.features``
    (:func:`epoch_rows`) ``z`` holds the input rows and the features are made here,
    ``spec.dtype`` and ``spec.width`` wide.
    """
    W, v, Wbar, vbar, t, seed = spec.W, spec.v, spec.Wbar, spec.vbar, spec.t, spec.seed
    features, task, layout, steps, batch_size = spec.features, spec.task, spec.layout, spec.steps, spec.batch_size
    y, w = (spec.take(arrays)[name] for name in ("y", "w"))
    if Wbar is None:
        Wbar, vbar = W, v
    out = layout.empty()
    m = z.shape[0]
    if m == 0:
        return out
    parts = layout.unpack(out)
    target, idx, weight = encode_targets(y, task, w, offset)
    if spec.validation_fraction > 0:
        val = row_uniform(seed, STREAM_SGD_HOLDOUT, offset, offset + m) < spec.validation_fraction
    else:
        val = np.zeros(m, dtype=bool)
    rows = np.flatnonzero(~val)
    s = steps.intercept_scaling
    if features is None:  # stored rows: the incoming model scored on the block at once
        if z.dtype not in (np.float32, np.float64):
            z = z.astype(np.float64)
        p = scores(z, Wbar, vbar, s)
        take = z.__getitem__
    else:  # features made a window of mini-batches at a time; the incoming model scored on each window
        p = np.empty((m, W.shape[0]))
        buf = np.empty((min(m, max(batch_size, FUSED_SUB_BLOCK)), spec.width), dtype=spec.dtype)
        W_in, v_in = Wbar, vbar

        def made(ix):
            zb = make_features(features, z[ix], buf)
            p[ix] = scores(zb, W_in, v_in, s)
            return zb

    parts["n"][...] = rows.size
    trained = spec.train and rows.size > 0
    if trained:
        # in-block order from (seed, epoch, global row): a global permutation restricted to the block
        keys = row_uniform(seed, (STREAM_SGD_ORDER << 32) + spec.epoch, offset, offset + m)[rows]
        order = rows[np.argsort(keys, kind="stable")]
        batches = [order[i : i + batch_size] for i in range(0, order.size, batch_size)]
        if features is not None:
            take = BatchWindows(made, order, max(batch_size, buf.shape[0] // batch_size * batch_size))
        avg = (Wbar, vbar) if steps.average else None
        W_end, v_end, t_end, avg = run_steps(W, v, take, target, weight, batches, t, steps, avg)
        parts["steps"][...] = rows.size * (t_end - t)
    if features is not None:  # rows no mini-batch made: the held-out ones, or all
        rest = np.flatnonzero(val) if trained else np.arange(m)
        for start in range(0, rest.size, FUSED_SUB_BLOCK):
            made(rest[start : start + FUSED_SUB_BLOCK])
    _evaluate_block(p, target, idx, weight, val, parts, steps.loss, sample_weights(w, task, offset))
    if rows.size == 0:
        return out
    if trained:
        W, v = W_end, v_end
        if avg is not None:
            Wbar, vbar = avg
    parts["W"][...] = rows.size * W
    parts["v"][...] = rows.size * v
    parts["Wbar"][...] = rows.size * (Wbar if steps.average else W)
    parts["vbar"][...] = rows.size * (vbar if steps.average else v)
    return out


def _evaluate_block(p, target, idx, weight, val, parts, loss_name, sw=None):
    """The incoming model's loss on the training rows, loss and errors on the held-out
    ones (the errors and their count weighted by the sample weights ``sw``)."""
    loss, _ = LOSSES[loss_name](p, target)
    if weight is not None:
        loss = loss * weight
    parts["loss"][...] = loss[~val].sum()
    if val.any():
        parts["loss_val"][...] = loss[val].sum()
        if idx is None:
            err = ((p[val] - target[val]) ** 2).sum(axis=1)
        else:
            pred = (p[:, 0] > 0).astype(np.intp) if p.shape[1] == 1 else np.argmax(p, axis=1)
            err = pred[val] != idx[val]
        parts["n_val"][...] = val.sum() if sw is None else sw[val].sum()
        parts["err_val"][...] = np.sum(err) if sw is None else sw[val] @ err


def epoch_pass(rows, y, spec, chunk_ids=None, w=None):
    """The reduced partials of :func:`epoch_chunk` with ``spec`` over the row blocks (all,
    or those in ``chunk_ids``); ``w``: sample weights aligned with ``rows``, or None."""
    return compute(row_sum(epoch_chunk, spec.layout.size, rows, spec, blocks=chunk_ids, y=y, w=w))


def n_blocks(Z):
    """Row blocks of a pass: dask chunks, or :data:`rfstream.reductions.NUMPY_BLOCK`-row slices."""
    return Z.numblocks[0] if isinstance(Z, da.Array) else max(1, -(-Z.shape[0] // NUMPY_BLOCK))
