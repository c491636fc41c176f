"""Linear models trained by streaming SGD (Pegasos, logistic, squared hinge) or Newton's method.

``estimators`` (the estimators and their training loop), ``epochs`` (one epoch as one
reduction, with the Pegasos step kernel), ``newton`` (one fused pass per Newton step),
``losses`` (each loss, its derivatives, and the probabilities of log-loss models); docs/sgd.md.
"""
from .epochs import sgd_steps
from .estimators import StreamingSGDClassifier, StreamingSGDRegressor

__all__ = ["StreamingSGDClassifier", "StreamingSGDRegressor", "sgd_steps"]
