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

from .datadriven import (
    TEFM,
    CompactNonlinearMap,
    EERFFeatures,
    LKRFFeatures,
    SESFeatures,
)
from .features import (
    ArcCosineFeatures,
    CirculantFeatures,
    FourierBinningFeatures,
    RandomBinningFeatures,
    RandomFourierFeatures,
)
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
    # EERF / LKRF: n_components is M; n_candidates (M0), subsample (N0/N), base,
    # score_mode (and rho for LKRF) have their own flags.
    "eerf": EERFFeatures,
    "lkrf": LKRFFeatures,
    "arccos": ArcCosineFeatures,  # --degree 0, 1 or 2
    # SES: n_components is M frequencies (2 M columns); --n-pairs, --reg, --weights ses|bq|uniform.
    "ses": SESFeatures,
    # Random binning (Laplacian kernel, sparse): --n-grids P, --n-bins per grid;
    # rff+binning concatenates both (n_components Fourier features + the grids).
    "binning": RandomBinningFeatures,
    "rff+binning": FourierBinningFeatures,
    # CNM (Yu et al. 2015): --objective classification|kernel, --structure dense|circulant,
    # --theta-step; the map is learned with the labels, then the solver is refitted on it.
    "cnm": CompactNonlinearMap,
    "circulant": CirculantFeatures,  # randomized circulant map (FFT), O(k) parameters
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
    "n_candidates": "--n-candidates",
    "subsample": "--subsample",
    "base": "--base",
    "score_mode": "--score-mode",
    "rho": "--rho",
    "degree": "--degree",
    "n_pairs": "--n-pairs",
    "reg": "--reg",
    "weights": "--weights",
    "n_grids": "--n-grids",
    "n_bins": "--n-bins",
    "objective": "--objective",
    "structure": "--structure",
    "theta_step": "--theta-step",
    "multiclass": "--multiclass",
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
