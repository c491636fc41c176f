"""Solvers: ridge through one Gram reduction (or CG); streaming SGD (Pegasos, logistic, ...) and Newton.

Modules: ``ridge`` (estimators), ``gram`` (the one-pass statistics), ``cg``
(conjugate gradients), ``sgd`` (estimators), ``sgd_base`` (their training
loop), ``epochs`` (one parameter-averaging pass), ``pegasos`` (the step
kernel, ``sgd_steps``), ``newton``, ``losses``, ``targets`` (label checks and
encodings).  Every pass computes the features inside its tasks through
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
