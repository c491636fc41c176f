"""The application layer: fit / evaluate / predict / transform on a dataset.

A model is a scikit-learn Pipeline, standardizer -> feature map -> solver (or ending
in the map: a transformer).  The registries, the one router of a fit's named options
and the checks before data are in :mod:`rfstream.catalog` (re-exported here); the one
fit path is :class:`rfstream.jobs.FitJob`; model selection is :mod:`rfstream.selection`.
For dask input the pipeline is lazy up to the solver, whose passes make the features
inside their tasks (:func:`rfstream.features.feature_source`), so the feature matrix
is never stored.

The command line (:mod:`rfstream.cli`), the benchmark harness
(:mod:`rfstream.bench`), ``examples/`` and ``benchmarks/`` all call this module;
it knows nothing of argparse.
"""
from __future__ import annotations

import time

import numpy as np

from . import io
from .catalog import (
    FEATURES,
    FIT_DEFAULTS,
    PARAMETERS,
    SOLVERS,
    TASKS,
    NotApplicable,
    check_model,
    feature_map_class,
    make_model,
    route,
    solver_class,
)
from .cluster import ensure_run_context
from .jobs import FitJob, dataset_metadata, open_data, open_weights
from .io.location import redact_url
from .io.model_files import load_model_document
from .metrics import classification_metrics, regression_metrics

__all__ = ["FEATURES", "FIT_DEFAULTS", "PARAMETERS", "SOLVERS", "TASKS", "NotApplicable", "check_model",
           "class_names", "data_bytes", "dataset_metadata", "evaluate_dataset", "feature_map_class",
           "fit_dataset", "load_fitted", "make_model", "open_data", "open_weights", "predict_dataset",
           "route", "route_params", "solver_class", "transform_dataset"]

#: the router's former name
route_params = route


def data_bytes(data, *, storage_options=None, x_array="X"):
    """X's bytes, uncompressed, from the dataset's metadata (nothing is read)."""
    info = io.dataset_info(data, x=x_array, y=None, storage_options=storage_options)
    return int(np.prod(info["shape"], dtype=np.int64)) * np.dtype(info["dtype"]).itemsize


def fit_dataset(data, *, features="rff", solver="ridge", standardize=True, out=None, overwrite=False,
                X=None, y=None, attrs=None, feature_params=None, solver_params=None,
                storage_options=None, x_array="X", y_array="y", task=None, model=None,
                sample_weight=None, checkpoint=None, restart=False, report=None, progress=None, **params):
    """Fit a model on a Zarr dataset (or on given dask arrays) and save it to ``out``.

    ``data`` and ``out`` are local paths or URLs (``storage_options`` for their
    filesystems; ``x_array``/``y_array``/``task`` as in :func:`open_data`).  ``params``
    are the named options of :data:`rfstream.catalog.PARAMETERS` (every option of
    ``rfstream fit``, by the flag's name: ``n_components=2000, alpha=[0.1, 1, 10],
    ridge_solver="pcg", epochs=5``) or any parameter of the map or the solver, routed by
    :func:`rfstream.catalog.route`; ``feature_params`` and ``solver_params`` name the
    receiver explicitly.  ``solver=None`` fits a transformer (the pipeline ends in the map;
    no labels needed).  ``standardize=False`` is ``--no-standardize``.  ``model`` is a
    Pipeline built already; then those arguments are not used.  ``X, y, attrs`` replace the
    dataset's own arrays and attributes (e.g. a training split).  ``sample_weight`` names
    an array of the dataset (or is an array) of row weights.  Every parameter is checked
    (:func:`check_model`) before the first pass.  ``checkpoint`` (a path or URL): each pass
    is stored there and a rerun resumes after the last completed one
    (:mod:`rfstream.io.checkpoints`; ``restart`` starts over); removed once the model is
    saved.  ``report``: the CV heat map beside the model (None: when matplotlib is
    installed).  ``progress``: "auto", "always" or "never" for this fit's passes (default:
    the process's, :func:`rfstream.cluster.set_progress`).  Runs on the current scheduler
    (:func:`rfstream.cluster.connect`).  Returns ``(model, metadata)``.
    """
    job = FitJob(data, features=features, solver=solver, standardize=standardize, out=out,
                 overwrite=overwrite, X=X, y=y, attrs=attrs, feature_params=feature_params,
                 solver_params=solver_params, storage_options=storage_options, x_array=x_array,
                 y_array=y_array, task=task, model=model, sample_weight=sample_weight, checkpoint=checkpoint,
                 restart=restart, report=report, **params)
    with ensure_run_context(progress), job.resumable():
        model, meta = job.fit()
    job.save()
    return model, meta


def load_fitted(model_path, *, storage_options=None):
    """``(model, metadata)`` of a model directory written by :func:`fit_dataset`."""
    model, doc = load_model_document(model_path, storage_options=storage_options)
    return model, doc.get("metadata", {})


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
                   "fit_seconds": meta.get("fit_seconds"), "data": redact_url(str(data))})
    return result


def class_names(classes, meta):
    """The names of the model's class codes: the training dataset's ``classes``, when it has them."""
    names = meta.get("dataset", {}).get("classes")
    codes = [c.item() if hasattr(c, "item") else c for c in classes]
    if names and all(isinstance(c, int) and 0 <= c < len(names) for c in codes):
        return [names[c] for c in codes]
    return codes


def predict_dataset(model_path, data, out, *, overwrite=False, storage_options=None, x_array="X",
                    scores=False, outputs=None):
    """Predict every row of a dataset with a saved model; write them to the Zarr ``out``.

    Every location may be a URL (``storage_options`` for its filesystem); the
    workers read their rows and write their predictions themselves.  Array ``y_pred``
    holds the predictions.  ``scores`` (classifiers) also writes array ``scores``: the
    class probabilities (n, K) of a model with ``predict_proba``, else its decision
    values ((n,) for two classes, positive ``classes[1]``; (n, K) otherwise), from the
    same computation of the features as the labels.  ``outputs`` maps more array names
    to functions ``(model, X) -> array`` with X's rows (e.g. ``{"std": ...}``), written
    beside them by the same tasks.  Returns the number of rows.
    """
    model, meta = load_fitted(model_path, storage_options=storage_options)
    if not hasattr(model, "predict"):
        raise ValueError(f"{model_path} is a transformer, which does not predict; use "
                         "transform_dataset (rfstream transform) to write its output.")
    X, _, attrs = open_data(data, storage_options=storage_options, x_array=x_array, y_array=None)
    check_schema(meta, attrs, X, data)
    trained = meta.get("dataset", {})
    extra = {"model": redact_url(str(model_path)), "data": redact_url(str(data)), "task": trained.get("task"),
             "classes": trained.get("classes")}
    arrays = {}
    if scores:
        if trained.get("task") != "classification" or not hasattr(model, "decision_function"):
            raise ValueError(f"scores=True needs a classifier; {model_path} is a {trained.get('task')} "
                             "model, whose predictions are its values.")
        kind = "predict_proba" if hasattr(model, "predict_proba") else "decision_function"
        arrays["scores"] = getattr(model, kind)(X)
        extra.update(scores=kind, score_classes=class_names(np.asarray(model.classes_), meta))
    arrays.update({name: make(model, X) for name, make in (outputs or {}).items()})
    with ensure_run_context():
        io.write_predictions(model.predict(X), out, arrays=arrays, overwrite=overwrite,
                             storage_options=storage_options, attrs=extra)
    return int(X.shape[0])


def transform_dataset(model_path, data, out, *, overwrite=False, storage_options=None, x_array="X",
                      rows_per_chunk=None):
    """Write a saved transformer's output (a model fitted with ``solver=None``) for every row
    of a dataset as the X of a new Zarr dataset ``out`` (staged; local or a URL), by the
    workers, block by block; the dataset's labels, when it has them, are kept as its y.
    Returns the output's shape."""
    model, meta = load_fitted(model_path, storage_options=storage_options)
    if hasattr(model, "predict") or not hasattr(model, "transform"):
        raise ValueError(f"{model_path} ends in a solver; transform_dataset needs a transformer "
                         "(fitted with solver=None); use predict_dataset for predictions.")
    X, y, attrs = open_data(data, storage_options=storage_options, x_array=x_array)
    check_schema(meta, attrs, X, data)
    Z = model.transform(X)
    if getattr(Z, "_meta", None) is not None and not isinstance(Z._meta, np.ndarray):
        raise ValueError(f"{model_path} makes sparse features, which a Zarr dataset does not hold; "
                         "transform with a dense feature map.")
    keep = {k: attrs[k] for k in ("task", "classes") if k in attrs and y is not None}
    with ensure_run_context():
        io.write_dataset(out, Z, y, attrs={**keep, "transformed_by": redact_url(str(model_path)), "source": redact_url(str(data)),
                                           "feature_names": [f"z{j}" for j in range(Z.shape[1])]},
                         rows_per_chunk=rows_per_chunk or max(X.chunks[0][0], 1), overwrite=overwrite,
                         storage_options=storage_options)
    return tuple(int(s) for s in Z.shape)
