"""Assemble a model: standardizer -> feature map -> solver, as a sklearn Pipeline.

The registries below are the extension points the CLI reads: a new feature map
or solver becomes available to ``rfstream fit --features/--solver`` by adding
an entry.  For dask input the pipeline is lazy up to the solver, whose single
reduction pulls every row block through the standardizer and the feature map
inside one task (blockwise fusion), so the feature matrix is never stored.
"""
from __future__ import annotations

from functools import partial

from sklearn.pipeline import Pipeline

from .datadriven import TEFM
from .features import RandomFourierFeatures
from .preprocess import Standardizer
from .solvers import (
    StreamingRidge,
    StreamingRidgeClassifier,
    StreamingSGDClassifier,
    StreamingSGDRegressor,
)

FEATURES = {
    "rff": RandomFourierFeatures,
    # TEFM-G / TEFM-S: n_components is l; n_random_features (d) and n_power_iter
    # are TEFM-only; sampler and variant go to the inner random Fourier features.
    "tefm-g": partial(TEFM, method="gaussian"),
    "tefm-s": partial(TEFM, method="srht"),
}
#: feature-map parameters set by their own CLI flags (parameter -> flag).  A map
#: that does not take one refuses it with an error naming the flag.
FEATURE_OPTIONS = {
    "kernel": "--kernel",
    "gamma": "--gamma",
    "sampler": "--sampler",
    "variant": "--variant",
    "n_random_features": "--n-random-features",
    "n_power_iter": "--power-iter",
}
SOLVERS = {
    "ridge": {"classification": StreamingRidgeClassifier, "regression": StreamingRidge},
    "sgd": {"classification": StreamingSGDClassifier, "regression": StreamingSGDRegressor},
}


def onehot_columns(attrs):
    """Indices of the one-hot columns of a dataset (from its ``categorical`` attrs)."""
    categorical = attrs.get("categorical") or {}
    names = attrs.get("feature_names") or []
    prefixes = tuple(f"{col}=" for col in categorical)
    return [i for i, name in enumerate(names) if prefixes and name.startswith(prefixes)]


def make_model(task, *, features="rff", solver="ridge", standardize=True, passthrough=None,
               feature_params=None, solver_params=None):
    """A Pipeline for ``task`` ("classification" or "regression").

    ``passthrough`` lists columns the standardizer leaves as they are (one-hot
    columns, see :func:`onehot_columns`); ``feature_params`` and
    ``solver_params`` go to the feature map's and the solver's constructors.
    """
    if features not in FEATURES:
        raise ValueError(f"features must be one of {sorted(FEATURES)}; got {features!r}.")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {sorted(SOLVERS)}; got {solver!r}.")
    if task not in ("classification", "regression"):
        raise ValueError(
            f"task must be 'classification' or 'regression'; got {task!r} (a dataset "
            "without labels cannot be fitted)."
        )
    steps = [("standardize", Standardizer(passthrough=passthrough or None))] if standardize else []
    steps.append(("features", FEATURES[features](**(feature_params or {}))))
    steps.append(("solver", SOLVERS[solver][task](**(solver_params or {}))))
    return Pipeline(steps)
