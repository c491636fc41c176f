"""Solvers: ridge through one Gram reduction; streaming SGD (Pegasos, logistic, ...)."""
from .ridge import StreamingRidge, StreamingRidgeClassifier
from .sgd import StreamingSGDClassifier, StreamingSGDRegressor, sgd_steps

__all__ = [
    "StreamingRidge",
    "StreamingRidgeClassifier",
    "StreamingSGDClassifier",
    "StreamingSGDRegressor",
    "sgd_steps",
]
