"""Data-dependent feature maps: fitted by passes over the rows (reductions).

Each is a :class:`rfstream.features.FeatureMap` whose inherited ``fit`` checks
the input, draws the random part (``_draw``) and then calls the map's data-pass
hook ``_fit_data(X, y, seed)`` with the checked ``X`` (and ``y`` for the maps
that need labels, checked by :mod:`rfstream.solvers.targets`).

* :class:`TEFM` -- TEFM-G / TEFM-S (Chen et al. 2015): a randomized range
  finder over the random Fourier feature matrix, ``d -> l`` features.
* :class:`CompactNonlinearMap` -- CNM (Yu et al. 2015): random Fourier
  features learned with a linear SVM by alternating SGD on sampled rows.
* :class:`EERFFeatures` / :class:`LKRFFeatures` -- EERF (Shahrampour et al.
  2018) and LKRF (Sinha & Duchi 2016): candidates scored against the labels.
* :class:`SESFeatures` -- SES (Chang et al. 2017): Stein-effect shrinkage
  weights on random Fourier features (and the Bayesian Quadrature baseline).
* :class:`NystroemFeatures` -- Nystroem (Williams & Seeger 2001): the kernel
  against landmark rows sampled in one pass, whitened by ``K_mm^{-1/2}``.
"""
from .cnm import CompactNonlinearMap
from .eerf import EERFFeatures
from .lkrf import LKRFFeatures
from .nystroem import NystroemFeatures
from .ses import SESFeatures
from .tefm import TEFM, fold_projection

__all__ = ["TEFM", "CompactNonlinearMap", "EERFFeatures", "LKRFFeatures", "NystroemFeatures", "SESFeatures",
           "fold_projection"]
