"""Data-independent random feature maps.

All maps share :class:`FeatureMap`: parameters are drawn once in ``fit`` and
``transform`` applies a pure numpy block function, to numpy arrays directly and
to dask arrays block by block (lazily).
"""
from .arccos import ArcCosineFeatures
from .base import FeatureMap
from .binning import FourierBinningFeatures, RandomBinningFeatures
from .chi2 import AdditiveChi2Sampler, SkewedChi2Sampler
from .circulant import CirculantFeatures
from .fastfood import CompactRandomFeatures, FastfoodFeatures
from .fourier import RandomFourierFeatures
from .polysketch import PolynomialCountSketch
from .source import FeatureSource, feature_source

__all__ = [
           "AdditiveChi2Sampler",
           "ArcCosineFeatures",
           "CirculantFeatures",
           "CompactRandomFeatures",
           "FastfoodFeatures",
           "FeatureMap",
           "FeatureSource",
           "FourierBinningFeatures",
           "PolynomialCountSketch",
           "RandomBinningFeatures",
           "RandomFourierFeatures",
           "SkewedChi2Sampler",
           "feature_source",
]
