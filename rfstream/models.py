"""Deprecated: the old name of :mod:`rfstream.pipeline`, kept so that scripts keep working.

``from rfstream.models import make_model`` was the README's way to build a model
before the application layer became :mod:`rfstream.pipeline`; ``onehot_columns``
(dataset metadata) is now :func:`rfstream.io.onehot_columns`.  Importing this
module warns; it will be removed in a later release.
"""
import warnings

from .io import onehot_columns
from .pipeline import FEATURES, SOLVERS, make_model

__all__ = ["FEATURES", "SOLVERS", "make_model", "onehot_columns"]

warnings.warn("rfstream.models is now rfstream.pipeline (and onehot_columns is rfstream.io.onehot_columns); "
              "import from there", DeprecationWarning, stacklevel=2)
