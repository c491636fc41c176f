"""Class probabilities of log-loss models: ``predict_proba`` and ``predict_log_proba``.

A model fitted with the logistic loss (docs/sgd.md; the log loss of
:mod:`rfstream.solvers.losses`) estimates probabilities from its decision
values ``p = W z + b``:

* two classes: ``P(classes_[1] | z) = sigmoid(p)`` (logistic regression);
* the multinomial loss: ``softmax(p)`` over the K class scores;
* one-vs-rest: each class's ``sigmoid(p_k)``, normalized to sum to one over the
  classes, as scikit-learn's ``SGDClassifier`` and liblinear's
  ``predict_probability`` do (Zadrozny & Elkan 2002).

Logarithms are computed from the scores (``log_expit``, ``log_softmax``), not
as the log of a rounded probability.  Numpy (or pandas) in, numpy out; dask in,
a lazy dask array out (``map_blocks`` of the decision values, with explicit
chunks and meta): for ``X = map.transform(rows)`` the features are made inside
the tasks, as for ``decision_function`` (:class:`rfstream.solvers.linear.LinearPredictMixin`).
"""
from __future__ import annotations

import dask.array as da
import numpy as np
from scipy.special import log_expit, log_softmax, logsumexp
from sklearn.utils.metaestimators import available_if


def log_proba_block(scores, kind):
    """Log-probabilities (m, K) of decision values ``scores`` ((m,) for two classes).

    ``kind``: "binary", "multinomial" or "ovr" (see the module docstring).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if kind == "binary":
        return np.stack([log_expit(-scores), log_expit(scores)], axis=1)
    if kind == "multinomial":
        return log_softmax(scores, axis=1)
    log_p = log_expit(scores)  # one-vs-rest: normalize the K sigmoids
    return log_p - logsumexp(log_p, axis=1, keepdims=True)


def proba_block(scores, kind):
    """Probabilities (m, K) of decision values ``scores``; rows sum to one."""
    return np.exp(log_proba_block(scores, kind))


def _has_proba(estimator):
    return getattr(estimator, "loss", None) == "log_loss"


class LogLossProbaMixin:
    """``predict_proba`` / ``predict_log_proba`` for a linear classifier fitted with
    ``loss="log_loss"``; absent (``AttributeError``, as scikit-learn) for other losses."""

    def _proba_kind(self):
        if self.classes_.size == 2:
            return "binary"
        return "multinomial" if self.multi_class == "multinomial" else "ovr"

    def _scores_to(self, fn, X):
        scores = self.decision_function(X)
        kind, K = self._proba_kind(), self.classes_.size
        if isinstance(scores, da.Array):
            return scores.map_blocks(
                fn, kind, dtype=np.float64, chunks=(scores.chunks[0], (K,)),
                new_axis=[1] if scores.ndim == 1 else None,
                meta=np.empty((0, 0), dtype=np.float64),
            )
        return fn(scores, kind)

    @available_if(_has_proba)
    def predict_proba(self, X):
        """Class probabilities (n, n_classes), columns in the order of ``classes_``.

        Sigmoid of the decision value for two classes, softmax of the class scores
        for the multinomial loss, normalized one-vs-rest sigmoids otherwise (as
        scikit-learn's ``SGDClassifier``).  Numpy in, numpy out; dask in, lazy dask
        out with ``X``'s row chunks.  Only for ``loss="log_loss"``.
        """
        return self._scores_to(proba_block, X)

    @available_if(_has_proba)
    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`, computed from the decision values
        (finite where the probability underflows to 0).  Only for ``loss="log_loss"``."""
        return self._scores_to(log_proba_block, X)
