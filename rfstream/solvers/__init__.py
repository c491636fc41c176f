"""Solvers: ridge through one Gram reduction (or CG); streaming SGD (Pegasos, logistic, ...) and Newton.

Modules: ``ridge`` (estimators), ``gram`` (the one-pass statistics), ``ridge_cv``
(the (gamma, alpha) path scored per fold), ``cv_scores`` (the scoring pass),
``grid_pass`` (one pass over every gamma of a grid), ``cg``
(conjugate gradients), ``folds`` (the CV folds of the Gram pass), ``sgd``
(estimators), ``sgd_base`` (their training loop), ``epochs`` (one
parameter-averaging pass), ``pegasos`` (the step kernel, ``sgd_steps``),
``newton``, ``losses``, ``proba`` (``predict_proba`` of log-loss models),
``targets`` (label checks and encodings), ``weights`` (``sample_weight`` checks
and the weight of each row), ``passes`` (the one shape of a pass's chunk function,
``chunk(x, *rows, offset, spec)``, and its ``RowSpec``).  Every pass computes the features inside its tasks through
:mod:`rfstream.features.fused`.
"""
from .pegasos import sgd_steps
from .ridge import StreamingRidge, StreamingRidgeClassifier
from .sgd import StreamingSGDClassifier, StreamingSGDRegressor

__all__ = [
    "StreamingRidge",
    "StreamingRidgeClassifier",
    "StreamingSGDClassifier",
    "StreamingSGDRegressor",
    "sgd_steps",
]
