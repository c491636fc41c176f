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

import contextlib
import time
from functools import partial

import numpy as np
from sklearn.base import clone
from sklearn.pipeline import Pipeline

from . import datadriven as dd
from . import features as ft
from . import io
from . import solvers as sv
from .datadriven.gamma_loop import fit_gamma_loop
from .features.grid import gamma_items, item_label
from .features.width import planned_features
from .io.checkpoints import dataset_identity, fingerprint_of, model_identity, resumable
from .io.zarr_source import lazy_array, open_source
from .metrics import classification_metrics, regression_metrics
from .preprocess import Standardizer
from .solvers.cg import check_single_candidate
from .solvers.memory import check_ridge_memory
from .solvers.ridge_cv import selection_summary
from .solvers.targets import planned_targets

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


def check_model(model, n_features, n_targets=None):
    """Validate every parameter of ``model`` (a Pipeline or one estimator) without data.

    Each step's scikit-learn parameter constraints (``_validate_params``) and a
    feature map's cross-parameter checks for ``n_features`` input columns
    (``_check_params``, :class:`rfstream.features.FeatureMap`): the errors ``fit``
    would raise, raised before the first pass over the data instead of after it.
    Given ``n_targets`` (:func:`rfstream.solvers.targets.planned_targets`), also the
    memory of a ridge solver on the map's planned width (a Gram that cannot fit:
    :func:`rfstream.solvers.memory.check_ridge_memory`, with the workers connected).
    """
    steps = [step for _, step in model.steps] if isinstance(model, Pipeline) else [model]
    if has_gamma_grid(model) and not hasattr(model.named_steps["solver"], "scoring"):
        raise ValueError(f"a gamma grid (gamma={model.named_steps['features'].gamma!r}) is searched by "
                         "cross-validation of the ridge solver; use --solver ridge, or give one gamma.")
    solver = model.named_steps["solver"] if isinstance(model, Pipeline) else model
    if hasattr(solver, "pcg_rank"):  # ridge: cg and pcg solve one (alpha, gamma)
        check_single_candidate(solver, grid=has_gamma_grid(model))
    if loops_over_gamma(model):  # fitted once per gamma: check the map with each
        fmap = model.named_steps["features"]
        items, _ = gamma_items(fmap.gamma)
        maps = [clone(fmap).set_params(gamma=item if isinstance(item, float) else item_label(item))
                for item in items]
        steps = [step for step in steps if step is not fmap] + maps
    for step in steps:
        if hasattr(step, "_parameter_constraints"):
            step._validate_params()
        if hasattr(step, "_check_params"):
            clone(step)._check_params(int(n_features))
    fmap = model.named_steps.get("features") if isinstance(model, Pipeline) else None
    if n_targets is not None and hasattr(solver, "pcg_rank"):
        width, groups, sparse = planned_features(fmap, n_features) if fmap else (n_features, 1, False)
        if width is not None:
            check_ridge_memory(solver, width, n_targets, n_groups=groups, sparse=sparse)
    return model


def loops_over_gamma(model):
    """Whether ``model`` (a Pipeline) has a gamma grid on a map that draws per gamma
    (:mod:`rfstream.datadriven.gamma_loop`: one fit per gamma) rather than scaling
    one draw (:mod:`rfstream.features.grid`: one pass for the whole grid)."""
    return has_gamma_grid(model) and not hasattr(model.named_steps["features"], "_at_gamma")


def has_gamma_grid(model):
    """Whether the feature map of ``model`` (a Pipeline) is given a list of gammas."""
    fmap = model.named_steps.get("features") if isinstance(model, Pipeline) else None
    gamma = fmap.get_params().get("gamma") if fmap is not None else None
    return isinstance(gamma, (list, tuple, np.ndarray)) or (isinstance(gamma, str) and "," in gamma)


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


def data_bytes(data, *, storage_options=None, x_array="X"):
    """X's bytes, uncompressed, from the dataset's metadata (nothing is read)."""
    info = io.dataset_info(data, x=x_array, y=None, storage_options=storage_options)
    return int(np.prod(info["shape"], dtype=np.int64)) * np.dtype(info["dtype"]).itemsize


def open_weights(data, name, X, *, storage_options=None):
    """The dataset's array ``name`` as row weights: lazy, 1-D, with ``X``'s row chunks."""
    w = lazy_array(open_source(data, storage_options), name)
    if w.ndim == 2 and w.shape[1] == 1:
        w = w[:, 0]
    if w.shape != (X.shape[0],):
        raise ValueError(f"{data}: the weight array {name!r} has shape {w.shape}; sample weights need "
                         f"one number per row of X, shape ({X.shape[0]},).")
    return w.rechunk({0: X.chunks[0]}) if hasattr(X, "chunks") and w.chunks[0] != X.chunks[0] else w


def dataset_metadata(data, X, attrs):
    """What a saved model records of the dataset it was fitted on."""
    return {"path": str(data), "n_rows": int(X.shape[0]), "n_features": int(X.shape[1]),
            "task": attrs.get("task"), "classes": attrs.get("classes"),
            "feature_names": attrs.get("feature_names"), "categorical": attrs.get("categorical")}


def fit_dataset(data, *, features="rff", solver="ridge", standardize=True, out=None, overwrite=False,
                X=None, y=None, attrs=None, feature_params=None, solver_params=None,
                storage_options=None, x_array="X", y_array="y", task=None, model=None,
                sample_weight=None, checkpoint=None, restart=False, **params):
    """Fit a model on a Zarr dataset (or on given dask arrays) and save it to ``out``.

    ``data`` and ``out`` are local paths or URLs (``storage_options`` for their
    filesystems; ``x_array``/``y_array``/``task`` as in :func:`open_data`).
    ``params`` (e.g. ``n_components=2000, alpha=[0.1, 1, 10]``) go to the feature map
    or the solver, whichever takes them (:func:`route_params`); ``feature_params``
    and ``solver_params`` name the receiver explicitly (needed for a name both take,
    such as SGD's ``solver``).  ``model`` is a Pipeline built already (the CLI builds
    and checks it before connecting); then those arguments are not used.
    ``X, y, attrs`` replace the dataset's own arrays and attributes (e.g. a training
    split).  ``sample_weight`` names an array of the dataset (or is an array) of row
    weights, passed as ``model.fit(X, y, solver__sample_weight=w)``.  Every parameter
    is checked (:func:`check_model`) before the first pass.  ``checkpoint`` (a path or URL):
    each pass is stored there and a rerun resumes after the last completed one
    (:mod:`rfstream.io.checkpoints`; ``restart`` starts over); removed once the fit is done
    and saved.  Returns ``(model, metadata)``.
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
    if model is None:
        routed_map, routed_solver = route_params(features, solver, task, params)
        model = make_model(task, features=features, solver=solver, standardize=standardize,
                           passthrough=io.onehot_columns(attrs),
                           feature_params={**routed_map, **(feature_params or {})},
                           solver_params={**routed_solver, **(solver_params or {})})
    check_model(model, X.shape[1], planned_targets(task, attrs.get("classes"), y))
    fit_params = {}
    if sample_weight is not None:
        weights = sample_weight
        if isinstance(sample_weight, str):
            weights = open_weights(data, sample_weight, X, storage_options=storage_options)
        fit_params["solver__sample_weight"] = weights
    t0 = time.perf_counter()
    store = contextlib.nullcontext() if checkpoint is None else resumable(
        checkpoint, fingerprint_of(model_identity(model), dataset_identity(X, attrs)), restart=restart,
        description=f"fit_dataset({data}, {model!r})"[:400], storage_options=storage_options)
    with store as stored:
        model = fit_gamma_loop(model, X, y, **fit_params) if loops_over_gamma(model) else model.fit(
            X, y, **fit_params)  # a gamma grid on a map that cannot share its passes: one fit per gamma
    meta = {"dataset": dataset_metadata(data, X, attrs), "fit_seconds": round(time.perf_counter() - t0, 3)}
    selection = selection_summary(model.named_steps["solver"], model.named_steps.get("features"))
    if selection:
        meta["selection"] = selection
    if isinstance(sample_weight, str):
        meta["sample_weight"] = sample_weight
    meta.update(passes_reused=stored.reused) if stored is not None else None
    if out is not None:
        io.save_model(model, out, metadata=meta, overwrite=overwrite, storage_options=storage_options)
    if stored is not None:
        stored.remove()
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
    """The model's metrics on a labelled dataset, in one pass over its rows.

    Classification: ``error_rate``, ``balanced_error``, ``confusion_matrix`` (rows:
    true classes, columns: predicted, in the order of ``classes``), ``auc`` with its
    ``auc_error_bound`` (two classes, from the decision values) and ``log_loss``
    (a model with ``predict_proba``); regression: ``rmse``, ``relative_rmse``,
    ``mae``, ``r2`` (:mod:`rfstream.metrics`).  ``metric``/``value`` name the
    headline one (error rate, relative RMSE).  The decision values, labels and
    probabilities come from one computation of the features per block.
    """
    if X is None:
        X, y, attrs = open_data(data, storage_options=storage_options, x_array=x_array, y_array=y_array)
    if y is None:
        raise ValueError(f"{data} has no labels; use `rfstream predict` instead of evaluate.")
    check_schema(meta, attrs, X, data)
    task = meta.get("dataset", {}).get("task")
    t0 = time.perf_counter()
    if task == "classification":
        classes = np.asarray(model.classes_)
        binary = classes.size == 2 and hasattr(model, "decision_function")
        proba = model.predict_proba(X) if hasattr(model, "predict_proba") else None
        metrics = classification_metrics(y, model.predict(X), classes, proba=proba,
                                         scores=model.decision_function(X) if binary else None)
        result = {"metric": "error_rate", "value": metrics["error_rate"], **metrics,
                  "classes": class_names(classes, meta)}
    else:
        metrics = regression_metrics(y, model.predict(X))
        result = {"metric": "relative_rmse", "value": metrics["relative_rmse"], **metrics}
    result.update({"task": task, "rows": int(X.shape[0]), "n_unseen_labels": attrs.get("n_unseen_labels", 0),
                   "predict_seconds": round(time.perf_counter() - t0, 3),
                   "fit_seconds": meta.get("fit_seconds"), "data": str(data)})
    return result


def class_names(classes, meta):
    """The names of the model's class codes: the training dataset's ``classes``, when it has them."""
    names = meta.get("dataset", {}).get("classes")
    codes = [c.item() if hasattr(c, "item") else c for c in classes]
    if names and all(isinstance(c, int) and 0 <= c < len(names) for c in codes):
        return [names[c] for c in codes]
    return codes


def predict_dataset(model_path, data, out, *, overwrite=False, storage_options=None, x_array="X",
                    scores=False):
    """Predict every row of a dataset with a saved model; write them to the Zarr ``out``.

    Every location may be a URL (``storage_options`` for its filesystem); the
    workers read their rows and write their predictions themselves.  ``scores``
    (classifiers) also writes array ``scores``: the class probabilities (n, K) of a
    model with ``predict_proba``, else its decision values ((n,) for two classes,
    positive ``classes[1]``; (n, K) otherwise), from the same computation of the
    features as the labels.  Returns the number of rows.
    """
    model, meta = load_fitted(model_path, storage_options=storage_options)
    X, _, attrs = open_data(data, storage_options=storage_options, x_array=x_array, y_array=None)
    check_schema(meta, attrs, X, data)
    trained = meta.get("dataset", {})
    extra = {"model": str(model_path), "data": str(data), "task": trained.get("task"),
             "classes": trained.get("classes")}
    values = None
    if scores:
        if trained.get("task") != "classification" or not hasattr(model, "decision_function"):
            raise ValueError(f"--scores needs a classifier; {model_path} is a {trained.get('task')} "
                             "model, whose predictions are its values.")
        kind = "predict_proba" if hasattr(model, "predict_proba") else "decision_function"
        values = getattr(model, kind)(X)
        extra.update(scores=kind, score_classes=class_names(np.asarray(model.classes_), meta))
    io.write_predictions(model.predict(X), out, scores=values, overwrite=overwrite,
                         storage_options=storage_options, attrs=extra)
    return int(X.shape[0])


def _check_name(kind, name, registry):
    if name not in registry:
        raise ValueError(f"{kind} must be one of {sorted(registry)}; got {name!r}.")


def _check_task(task):
    if task not in TASKS:
        raise ValueError(f"task must be 'classification' or 'regression'; got {task!r} (a dataset "
                         "without labels cannot be fitted).")
