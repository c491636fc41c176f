"""The application layer: which maps and solvers exist, and fit / evaluate / predict on a dataset.

A model is a scikit-learn Pipeline, standardizer -> feature map -> solver.  The
registries below are the extension points: a feature map or solver added here is
available to ``rfstream fit --features/--solver``, to ``rfstream bench``, to the
shared contract tests and to every script that calls :func:`fit_dataset`.  For
dask input the pipeline is lazy up to the solver, whose passes make the features
inside their tasks (:func:`rfstream.features.feature_source`), so the feature
matrix is never stored.

The command line (:mod:`rfstream.cli`), the benchmark harness
(:mod:`rfstream.bench`), ``examples/`` and ``benchmarks/`` all call this module;
it knows nothing of argparse.
"""
from __future__ import annotations

import time
from functools import partial

from sklearn.pipeline import Pipeline

from . import datadriven as dd
from . import features as ft
from . import io
from . import solvers as sv
from .cluster import compute
from .metrics import error_counts, squared_error_sums
from .preprocess import Standardizer

#: ``--features`` name -> feature map (a class, or a class with some parameters fixed).
FEATURES = {
    "rff": ft.RandomFourierFeatures,
    "tefm-g": partial(dd.TEFM, method="gaussian"),  # n_components is l, n_random_features d
    "tefm-s": partial(dd.TEFM, method="srht"),
    "eerf": dd.EERFFeatures,  # n_components is M, n_candidates M0
    "lkrf": dd.LKRFFeatures,
    "arccos": ft.ArcCosineFeatures,
    "ses": dd.SESFeatures,  # n_components is M frequencies (2 M columns)
    "binning": ft.RandomBinningFeatures,  # Laplacian kernel, sparse; no n_components
    "rff+binning": ft.FourierBinningFeatures,
    "cnm": dd.CompactNonlinearMap,  # learned with the labels, then the solver is refitted on it
    "circulant": ft.CirculantFeatures,
    "nystroem": ft.NystroemFeatures,
}
#: ``--solver`` name -> estimator per task.
SOLVERS = {
    "ridge": {"classification": sv.StreamingRidgeClassifier, "regression": sv.StreamingRidge},
    "sgd": {"classification": sv.StreamingSGDClassifier, "regression": sv.StreamingSGDRegressor},
}
TASKS = ("classification", "regression")
#: Parameters whose default for a fit on a dataset differs from the estimators' own
#: (applied to whichever of the map and the solver takes them).
FIT_DEFAULTS = {"n_components": 1000, "gamma": "auto", "random_state": 0}


def feature_map_class(features):
    """The class behind the ``features`` name (the class of a ``partial``)."""
    _check_name("features", features, FEATURES)
    factory = FEATURES[features]
    return factory.func if isinstance(factory, partial) else factory


def solver_class(solver, task):
    """The estimator of ``solver`` for ``task``."""
    _check_name("solver", solver, SOLVERS)
    _check_task(task)
    return SOLVERS[solver][task]


def make_model(task, *, features="rff", solver="ridge", standardize=True, passthrough=None,
               feature_params=None, solver_params=None):
    """A Pipeline for ``task`` ("classification" or "regression").

    ``passthrough`` lists columns the standardizer leaves as they are (one-hot
    columns, see :func:`rfstream.io.onehot_columns`); ``feature_params`` and
    ``solver_params`` go to the feature map's and the solver's constructors.
    """
    _check_name("features", features, FEATURES)
    _check_name("solver", solver, SOLVERS)
    _check_task(task)
    steps = [("standardize", Standardizer(passthrough=passthrough or None))] if standardize else []
    steps.append(("features", FEATURES[features](**(feature_params or {}))))
    steps.append(("solver", SOLVERS[solver][task](**(solver_params or {}))))
    return Pipeline(steps)


def route_params(features, solver, task, params):
    """Split ``params`` into ``(feature_params, solver_params)`` by who takes each name.

    None values are dropped; :data:`FIT_DEFAULTS` fill what is not given, for the
    estimators that take them.  A name both take goes to the solver (CNM's own
    ``alpha`` and ``max_iter`` are set through ``feature_params``), except
    ``random_state``, which goes to both.  A name that neither
    the map nor the solver takes is a ``ValueError`` naming it.
    """
    map_params = FEATURES[features]().get_params() if features in FEATURES else {}
    solver_params = solver_class(solver, task)().get_params()
    given = {k: v for k, v in {**FIT_DEFAULTS, **params}.items() if v is not None}
    to_map, to_solver = {}, {}
    for key, value in given.items():
        if key in solver_params:
            to_solver[key] = value
        if key in map_params and (key not in solver_params or key == "random_state"):
            to_map[key] = value
        if key not in map_params and key not in solver_params and key not in FIT_DEFAULTS:
            raise ValueError(f"{key!r} is a parameter of neither features={features!r} nor "
                             f"solver={solver!r} ({task}).")
    return to_map, to_solver


def open_data(data, *, storage_options=None, x_array="X", y_array="y", task=None):
    """``(X, y, attrs)`` of a dataset: a local path, a URL, a zarr store or Group, or an
    xarray Dataset (:func:`rfstream.io.open_dataset`), arrays chosen by name.

    ``task`` ("classification" or "regression") overrides the dataset's own (or the
    one inferred from y's dtype for a store without rfstream's attributes).
    """
    names = {"x": x_array, "y": y_array, "storage_options": storage_options}
    X, y = io.open_dataset(data, **names)
    attrs = io.dataset_info(data, **names)["attrs"]
    if task is not None:
        _check_task(task)
        attrs = {**attrs, "task": task}
    return X, y, attrs


def dataset_metadata(data, X, attrs):
    """What a saved model records of the dataset it was fitted on."""
    return {"path": str(data), "n_rows": int(X.shape[0]), "n_features": int(X.shape[1]),
            "task": attrs.get("task"), "classes": attrs.get("classes"),
            "feature_names": attrs.get("feature_names"), "categorical": attrs.get("categorical")}


def fit_dataset(data, *, features="rff", solver="ridge", standardize=True, out=None, overwrite=False,
                X=None, y=None, attrs=None, feature_params=None, solver_params=None,
                storage_options=None, x_array="X", y_array="y", task=None, **params):
    """Fit a model on a Zarr dataset (or on given dask arrays) and save it to ``out``.

    ``data`` and ``out`` are local paths or URLs (``storage_options`` for their
    filesystems; ``x_array``/``y_array``/``task`` as in :func:`open_data`).
    ``params`` (e.g. ``n_components=2000, alpha=[0.1, 1, 10]``) go to the feature map
    or the solver, whichever takes them (:func:`route_params`); ``feature_params``
    and ``solver_params`` name the receiver explicitly (needed for a name both take,
    such as SGD's ``solver``).  ``X, y, attrs`` replace the dataset's own arrays and
    attributes (e.g. a training split).  Returns ``(model, metadata)``.
    """
    if X is None:
        X, y, attrs = open_data(data, storage_options=storage_options, x_array=x_array,
                                y_array=y_array, task=task)
    task = attrs.get("task")
    if y is None or task not in TASKS:
        raise ValueError(f"{data} has no labels (task={task!r}); fit needs a labelled dataset "
                         "(name the label array with y_array= / --y-array, the task with --task).")
    if out is not None and not overwrite and io.as_location(out, storage_options).exists():
        raise FileExistsError(f"{out} already exists; pass --overwrite to replace it.")
    routed_map, routed_solver = route_params(features, solver, task, params)
    model = make_model(task, features=features, solver=solver, standardize=standardize,
                       passthrough=io.onehot_columns(attrs),
                       feature_params={**routed_map, **(feature_params or {})},
                       solver_params={**routed_solver, **(solver_params or {})})
    t0 = time.perf_counter()
    model.fit(X, y)
    meta = {"dataset": dataset_metadata(data, X, attrs), "fit_seconds": round(time.perf_counter() - t0, 3)}
    if out is not None:
        io.save_model(model, out, metadata=meta, overwrite=overwrite, storage_options=storage_options)
    return model, meta


def load_fitted(model_path, *, storage_options=None):
    """``(model, metadata)`` of a model directory written by :func:`fit_dataset`."""
    root = io.model_root(model_path, storage_options)
    return io.load_model(root), io.read_model_json(root).get("metadata", {})


def check_schema(meta, attrs, X, data_path):
    """Refuse a dataset whose columns differ from the model's training data."""
    trained = meta.get("dataset", {})
    names = trained.get("feature_names")
    if X.shape[1] != trained.get("n_features", X.shape[1]):
        raise ValueError(
            f"{data_path} has {X.shape[1]} features but the model was trained on "
            f"{trained.get('n_features')}; convert it with `rfstream convert SRC DST --like TRAIN.zarr`."
        )
    if names and attrs.get("feature_names") and list(attrs["feature_names"]) != list(names):
        raise ValueError(
            f"{data_path} has different feature columns than the training data; convert it "
            "with `rfstream convert SRC DST --like TRAIN.zarr`."
        )


def evaluate_dataset(model, meta, data, *, X=None, y=None, attrs=None, storage_options=None,
                     x_array="X", y_array="y"):
    """Error rate (classification) or relative RMSE (regression) on a dataset, one pass."""
    if X is None:
        X, y, attrs = open_data(data, storage_options=storage_options, x_array=x_array, y_array=y_array)
    if y is None:
        raise ValueError(f"{data} has no labels; use `rfstream predict` instead of evaluate.")
    check_schema(meta, attrs, X, data)
    task = meta.get("dataset", {}).get("task")
    t0 = time.perf_counter()
    pred = model.predict(X)
    if task == "classification":
        wrong, n = error_counts(y, pred)
        result = {"metric": "error_rate", "value": float(compute(wrong)) / max(n, 1)}
    else:
        sse, norm = compute(*squared_error_sums(y, pred))
        result = {"metric": "relative_rmse", "value": float((sse / norm) ** 0.5)}
    result.update({"task": task, "rows": int(X.shape[0]), "n_unseen_labels": attrs.get("n_unseen_labels", 0),
                   "predict_seconds": round(time.perf_counter() - t0, 3),
                   "fit_seconds": meta.get("fit_seconds"), "data": str(data)})
    return result


def predict_dataset(model_path, data, out, *, overwrite=False, storage_options=None, x_array="X"):
    """Predict every row of a dataset with a saved model; write them to the Zarr ``out``.

    Every location may be a URL (``storage_options`` for its filesystem); the
    workers read their rows and write their predictions themselves.  Returns the
    number of rows.
    """
    model, meta = load_fitted(model_path, storage_options=storage_options)
    X, _, attrs = open_data(data, storage_options=storage_options, x_array=x_array, y_array=None)
    check_schema(meta, attrs, X, data)
    trained = meta.get("dataset", {})
    io.write_predictions(model.predict(X), out, overwrite=overwrite, storage_options=storage_options,
                         attrs={"model": str(model_path), "data": str(data), "task": trained.get("task"),
                                "classes": trained.get("classes")})
    return int(X.shape[0])


def _check_name(kind, name, registry):
    if name not in registry:
        raise ValueError(f"{kind} must be one of {sorted(registry)}; got {name!r}.")


def _check_task(task):
    if task not in TASKS:
        raise ValueError(f"task must be 'classification' or 'regression'; got {task!r} (a dataset "
                         "without labels cannot be fitted).")
