"""Solvers: ridge through one Gram reduction (SGD solvers come in a later issue)."""
from .ridge import StreamingRidge, StreamingRidgeClassifier

__all__ = ["StreamingRidge", "StreamingRidgeClassifier"]
