"""rfstream: kernel machines with random features on Dask.

Data arrives as dask arrays (usually a Zarr dataset opened with
:func:`rfstream.io.open_dataset`), feature maps are applied block by block and
every pass over the rows is a distributed reduction.  See README.md.
"""
from __future__ import annotations

import importlib
import importlib.util

from ._version import __version__

#: each public name and the module it is imported from, on first use (PEP 562): ``import
#: rfstream`` and the command line's start import no estimator, scikit-learn or dask.array
_PUBLIC = {
    "TEFM": "datadriven",
    "CompactNonlinearMap": "datadriven",
    "EERFFeatures": "datadriven",
    "LKRFFeatures": "datadriven",
    "NystroemFeatures": "datadriven",
    "SESFeatures": "datadriven",
    "AdditiveChi2Sampler": "features",
    "ArcCosineFeatures": "features",
    "CirculantFeatures": "features",
    "FourierBinningFeatures": "features",
    "PolynomialCountSketch": "features",
    "RandomBinningFeatures": "features",
    "RandomFourierFeatures": "features",
    "SkewedChi2Sampler": "features",
    "load_model": "io",
    "save_model": "io",
    "Standardizer": "preprocess",
    "encode_labels": "preprocess",
    "train_test_split": "preprocess",
    "StreamingRidge": "solvers",
    "StreamingRidgeClassifier": "solvers",
    "StreamingSGDClassifier": "solvers",
    "StreamingSGDRegressor": "solvers",
    "KernelPCA": "solvers.kpca",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name):
    """A public name (imported from its module once, then an attribute), or a submodule
    (``rfstream.io``, as after ``import rfstream.io``)."""
    if name in _PUBLIC:
        value = getattr(importlib.import_module(f".{_PUBLIC[name]}", __name__), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
