"""Data-dependent feature maps: fitted by passes over the rows (reductions).

Each is a :class:`rfstream.features.FeatureMap` whose ``_fit_data(X, y, seed)`` hook makes the
passes after the inherited ``fit`` has checked the input and drawn the random part:
:class:`TEFM` (Chen et al. 2015, docs/tefm.md), :class:`CompactNonlinearMap` (Yu et al. 2015,
docs/cnm.md), :class:`EERFFeatures` and :class:`LKRFFeatures` (Shahrampour et al. 2018; Sinha
& Duchi 2016, docs/eerf.md), :class:`SESFeatures` (Chang et al. 2017, docs/ses.md) and
:class:`NystroemFeatures` (Williams & Seeger 2001, docs/nystroem.md).
"""
from .cnm import CompactNonlinearMap
from .eerf import EERFFeatures
from .lkrf import LKRFFeatures
from .nystroem import NystroemFeatures
from .ses import SESFeatures
from .tefm import TEFM, fold_projection

__all__ = ["TEFM", "CompactNonlinearMap", "EERFFeatures", "LKRFFeatures", "NystroemFeatures", "SESFeatures",
           "fold_projection"]
