"""Data-dependent feature maps: fitted by passes over the rows (reductions).

* :class:`TEFM` -- TEFM-G / TEFM-S (Chen et al. 2015): a randomized range
  finder over the random Fourier feature matrix, ``d -> l`` features.
"""
from .tefm import TEFM, fold_projection

__all__ = ["TEFM", "fold_projection"]
