"""Solvers: ``ridge/`` (one Gram pass, or CG past its memory), ``sgd/`` (SGD and Newton), ``kpca``.

What both solver families share: ``passes`` (the one shape of a pass's chunk function and its
``RowSpec``), ``targets`` (label checks and encodings), ``weights`` (``sample_weight`` and each
row's weight), ``folds`` (the CV folds), ``linear`` (prediction of a fitted linear model) and
``memory`` (the memory plan and the refusals made before the first pass).
"""
from .ridge import StreamingRidge, StreamingRidgeClassifier
from .sgd import StreamingSGDClassifier, StreamingSGDRegressor, sgd_steps

__all__ = [
    "StreamingRidge",
    "StreamingRidgeClassifier",
    "StreamingSGDClassifier",
    "StreamingSGDRegressor",
    "sgd_steps",
]
