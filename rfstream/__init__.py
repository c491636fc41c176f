"""rfstream: kernel machines with random features on Dask.

Data arrives as dask arrays (usually a Zarr dataset opened with
:func:`rfstream.io.open_dataset`), feature maps are applied block by block and
every pass over the rows is a distributed reduction.  See README.md.
"""
from ._version import __version__
from .datadriven import (
    TEFM,
    CompactNonlinearMap,
    EERFFeatures,
    LKRFFeatures,
    NystroemFeatures,
    SESFeatures,
)
from .features import (
    AdditiveChi2Sampler,
    ArcCosineFeatures,
    CirculantFeatures,
    FourierBinningFeatures,
    PolynomialCountSketch,
    RandomBinningFeatures,
    RandomFourierFeatures,
    SkewedChi2Sampler,
)
from .io import load_model, save_model
from .preprocess import Standardizer, encode_labels, train_test_split
from .solvers import (
    StreamingRidge,
    StreamingRidgeClassifier,
    StreamingSGDClassifier,
    StreamingSGDRegressor,
)
from .solvers.kpca import KernelPCA

__all__ = [
    "__version__",
    "TEFM",
    "AdditiveChi2Sampler",
    "KernelPCA",
    "ArcCosineFeatures",
    "CirculantFeatures",
    "CompactNonlinearMap",
    "EERFFeatures",
    "FourierBinningFeatures",
    "LKRFFeatures",
    "NystroemFeatures",
    "PolynomialCountSketch",
    "RandomBinningFeatures",
    "RandomFourierFeatures",
    "SESFeatures",
    "SkewedChi2Sampler",
    "Standardizer",
    "StreamingRidge",
    "StreamingRidgeClassifier",
    "StreamingSGDClassifier",
    "StreamingSGDRegressor",
    "encode_labels",
    "load_model",
    "save_model",
    "train_test_split",
]
