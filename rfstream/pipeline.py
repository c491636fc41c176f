"""The application layer: fit / evaluate / predict / transform on a dataset.

A model is a scikit-learn Pipeline, standardizer -> feature map -> solver (or ending in the map:
a transformer), built and checked by :mod:`rfstream.catalog` (whose :func:`make_model` and
:func:`check_model` are importable from here too) and fitted by :class:`rfstream.jobs.FitJob`.
For dask input the solver's passes make the features inside their tasks
(:func:`rfstream.features.source.feature_source`).  The CLI, :mod:`rfstream.bench`,
``examples/`` and ``benchmarks/`` call this module; it knows nothing of argparse.
Narrative: docs/design-notes.md, "The application layer".
"""
from __future__ import annotations

import inspect
import time

import numpy as np
from sklearn.base import is_classifier

from . import io
from .catalog import STANDARDIZE_DEFAULT, check_model, make_model  # public here too (README)
from .cluster import ensure_run_context
from .devices import check_device, check_model_on_device, host_blocks, on_device
from .io.location import redact_url
from .io.model_files import load_model_document
from .io.staging import check_apart
from .jobs import FitJob, open_data
from .metrics import classification_metrics, regression_metrics
from .options import TASKS, ParameterError

__all__ = ["INTERVAL_LEVEL", "check_model", "class_names", "data_bytes", "evaluate_dataset", "fit_dataset",
           "has_posterior", "load_fitted", "make_model", "model_task", "posterior_outputs", "predict_dataset",
           "prediction_interval", "predictive_std", "score_holdout", "transform_dataset"]

#: the level of the prediction intervals that evaluate_dataset scores by default
INTERVAL_LEVEL = 0.9


def data_bytes(data, *, storage_options=None, x_array="X"):
    """X's bytes, uncompressed, from the dataset's metadata (nothing is read)."""
    info = io.dataset_info(data, x=x_array, y=None, storage_options=storage_options)
    return int(np.prod(info["shape"], dtype=np.int64)) * np.dtype(info["dtype"]).itemsize


def fit_dataset(data, *, features="rff", solver="ridge", standardize=STANDARDIZE_DEFAULT, out=None, overwrite=False,
                X=None, y=None, attrs=None, feature_params=None, solver_params=None,
                storage_options=None, x_array="X", y_array="y", task=None, model=None,
                sample_weight=None, checkpoint=None, restart=False, report=None, progress=None, holdout=None,
                device="cpu", precision=None, **params):
    """Fit a model on a Zarr dataset (or on given dask arrays) and save it to ``out``.

    Every parameter is checked (:func:`check_model`) before the first pass; the fit runs on the
    current scheduler (:func:`rfstream.cluster.connect`).

    Parameters
    ----------
    data : str, Path, URL, zarr group or xarray Dataset
        The dataset (:func:`rfstream.jobs.open_data`).
    features, solver : str
        The feature map and the solver by their names in :mod:`rfstream.catalog`;
        ``solver=None`` fits a transformer (the pipeline ends in the map; no labels needed).
    standardize : bool or "auto"
        Standardize the columns first (False is ``--standardize no``); "auto": unless they
        already share one scale, decided from the same moments pass, the decision in the metadata's
        ``standardize`` (docs/accuracy.md).  Default :data:`rfstream.catalog.STANDARDIZE_DEFAULT`.
    out : str, Path or URL, optional
        Where the model is saved, staged (None: not saved).
    overwrite : bool
        Replace an existing model at ``out``.
    X, y, attrs : optional
        Arrays and attributes that replace the dataset's own (e.g. a training split).
    feature_params, solver_params : dict, optional
        Parameters of the map and of the solver, the receiver named explicitly.
    storage_options : dict, optional
        For the filesystems of ``data``, ``out`` and ``checkpoint``.
    x_array, y_array, task : str
        The arrays' names and the task, as in :func:`rfstream.jobs.open_data`.
    model : Pipeline, optional
        A Pipeline built already; then ``features`` to ``solver_params`` are not used.
    sample_weight : str or array, optional
        Row weights: the name of an array of the dataset, or an array.
    checkpoint : str, Path or URL, optional
        Each pass is stored there and a rerun resumes after the last completed one
        (:mod:`rfstream.io.checkpoints`); removed once the model is saved.
    restart : bool
        Start over instead of resuming from ``checkpoint``.
    report : bool or None
        Save the CV heat map beside the model (None: when matplotlib is installed).
    progress : "auto", "always" or "never", optional
        This fit's display of its passes (default: the process's,
        :func:`rfstream.cluster.set_progress`).
    holdout : float, optional
        A fraction in (0, 1): fit on the other rows and score these with
        :func:`evaluate_dataset`, in the metadata's ``holdout`` (:func:`score_holdout`); the
        rows are those of :func:`rfstream.train_test_split` (and ``rfstream split``) seeded
        by ``random_state``.
    device : {"cpu", "cuda", "auto"}
        Where the passes' products happen: "cuda" moves each task's rows to the worker's GPU
        after the read (cupy) and runs the passes that have a device form there; a model with
        a step that has none is refused before the first pass (docs/gpu.md).  "auto": cuda
        where cupy finds a device, else cpu.
    precision : {"fp32", "tf32"}, optional
        The device's matrix products (default fp32; tf32: tensor cores, docs/gpu.md).
    **params
        The named options of :data:`rfstream.options.OPTIONS` by the flag's name
        (``n_components=2000, alpha=[0.1, 1, 10], ridge_solver="pcg", epochs=5``) or any
        parameter of the map or the solver, routed by :func:`rfstream.catalog.route`.

    Returns
    -------
    model : Pipeline
        The fitted model.
    metadata : dict
        What is saved with it: the dataset, the fit's seconds and passes, the search.

    Raises
    ------
    ValueError
        A bad parameter, a dataset without labels or with too few rows or classes, or a fit
        whose memory plan exceeds the workers'.
    FileExistsError
        ``out`` exists and ``overwrite`` is False.
    """
    job = FitJob(data, features=features, solver=solver, standardize=standardize, out=out,
                 overwrite=overwrite, X=X, y=y, attrs=attrs, feature_params=feature_params,
                 solver_params=solver_params, storage_options=storage_options, x_array=x_array,
                 y_array=y_array, task=task, model=model, sample_weight=sample_weight, checkpoint=checkpoint,
                 restart=restart, report=report, holdout=holdout, device=device, precision=precision, **params)
    with ensure_run_context(progress), job.resumable():
        model, meta = job.fit()
        score_holdout(job)
    job.save()
    return model, meta


def score_holdout(job):
    """The metrics of a fitted :class:`rfstream.jobs.FitJob`'s held-out rows (``holdout=``),
    by :func:`evaluate_dataset` in one pass, added to its metadata's ``holdout`` (saved with
    the model) and returned; None for a job without a holdout."""
    if job.held_out is None:
        return None
    X, y = job.held_out
    result = evaluate_dataset(job.model, job.meta, job.data, X=X, y=y, attrs=job.attrs, device=job.device)
    for key in ("data", "fit_seconds", "task", "n_unseen_labels"):  # the fit's, or the whole dataset's
        result.pop(key, None)
    job.meta["holdout"].update(result)
    return job.meta["holdout"]


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
                     x_array="X", y_array="y", interval_level=None, device="cpu"):
    """The model's metrics on a labelled dataset, in one pass over its rows.

    All are sums over the rows' blocks in one reduction (nothing of length n reaches the
    client); :mod:`rfstream.metrics` defines them.

    Parameters
    ----------
    model : Pipeline or estimator
        A fitted model.
    meta : dict
        Its metadata (:func:`load_fitted`; ``{}`` for none).
    data : str, Path, URL, zarr group or xarray Dataset
        The labelled dataset, with the training data's columns.
    X, y, attrs : optional
        Arrays and attributes that replace the dataset's own.
    storage_options : dict, optional
        For ``data``'s filesystem.
    x_array, y_array : str
        The arrays' names.
    interval_level : float, optional
        The level of the prediction intervals scored for a model with a posterior
        (:func:`has_posterior`; default :data:`INTERVAL_LEVEL`).
    device : {"cpu", "cuda", "auto"}
        Where the features and decisions are made (as :func:`fit_dataset`'s ``device``).

    Returns
    -------
    dict
        Classification: ``error_rate``, ``balanced_error``, ``confusion_matrix`` (rows: true
        classes, columns: predicted, in the order of ``classes``), ``auc`` with its
        ``auc_error_bound`` (two classes, from the decision values), and for a model with
        ``predict_proba`` ``log_loss`` and the ``reliability`` table (10 bins of the predicted
        label's probability: count, mean probability, accuracy; its ``calibration_error``).
        Regression: ``rmse``, ``relative_rmse``, ``mae``, ``r2``, and for a model with a
        posterior ``interval_coverage`` and ``interval_width``.  ``metric``/``value`` name the
        headline one (error rate, relative RMSE); also ``task``, ``rows``, ``n_unseen_labels``,
        ``predict_seconds``, ``fit_seconds`` and ``data``.

    Raises
    ------
    ValueError
        A dataset without labels or with other columns, or ``interval_level`` for a model
        without a posterior.
    """
    if X is None:
        X, y, attrs = open_data(data, storage_options=storage_options, x_array=x_array, y_array=y_array)
    if y is None:
        raise ValueError(f"{data} has no labels; use `rfstream predict` instead of evaluate.")
    check_schema(meta, attrs, X, data)
    X = rows_on_device(model, X, device)
    task = model_task(model, meta)
    if interval_level is not None and task != "regression":
        raise ParameterError("{interval_level} scores a regressor's prediction intervals; "
                             f"the model is a {task} model (its probabilities are scored by log_loss and the "
                             "reliability table).", interval_level=interval_level)
    t0 = time.perf_counter()
    if task == "classification":
        classes = np.asarray(model.classes_)
        binary = classes.size == 2 and hasattr(model, "decision_function")
        proba = model.predict_proba(X) if hasattr(model, "predict_proba") else None
        metrics = classification_metrics(y, host_blocks(model.predict(X)), classes, proba=host_blocks(proba),
                                         scores=host_blocks(model.decision_function(X)) if binary else None)
        result = {"metric": "error_rate", "value": metrics["error_rate"], **metrics,
                  "classes": class_names(classes, meta)}
    else:
        level = interval_level
        bounds = {}
        y_pred = None
        if level is not None or has_posterior(model):  # predictions and bounds from one product
            level = INTERVAL_LEVEL if level is None else level
            y_pred, _, (lower, upper) = posterior_outputs(model, X, level)
            bounds = {"lower": lower, "upper": upper}
        metrics = regression_metrics(y, host_blocks(model.predict(X) if y_pred is None else y_pred), **bounds)
        result = {"metric": "relative_rmse", "value": metrics["relative_rmse"], **metrics}
        if bounds:
            result["interval_level"] = float(level)
    result.update({"task": task, "rows": int(X.shape[0]), "n_unseen_labels": attrs.get("n_unseen_labels", 0),
                   "predict_seconds": round(time.perf_counter() - t0, 3),
                   "fit_seconds": meta.get("fit_seconds"), "data": redact_url(str(data))})
    return result


def model_task(model, meta):
    """The model's task: the one its metadata records (:func:`fit_dataset`), else the
    estimator's own kind (a model saved by :func:`rfstream.save_model` without metadata):
    a saved classifier is evaluated as a classifier whichever door made it."""
    task = meta.get("dataset", {}).get("task")
    if task in TASKS:
        return task
    return "classification" if is_classifier(model) else "regression"


def class_names(classes, meta):
    """The names of the model's class codes: the training dataset's ``classes``, when it has them."""
    names = meta.get("dataset", {}).get("classes")
    codes = [c.item() if hasattr(c, "item") else c for c in classes]
    if names and all(isinstance(c, int) and 0 <= c < len(names) for c in codes):
        return [names[c] for c in codes]
    return codes


def predict_dataset(model_path, data, out, *, overwrite=False, storage_options=None, x_array="X",
                    scores=False, std=False, interval=None, outputs=None, device="cpu"):
    """Predict every row of a dataset with a saved model; write them to the Zarr ``out``.

    The workers read their rows and write their predictions themselves; every array comes
    from one computation of the features per block.

    Parameters
    ----------
    model_path : str, Path or URL
        A model directory written by :func:`fit_dataset`.
    data : str, Path, URL, zarr group or xarray Dataset
        The rows to predict, with the training data's columns.
    out : str, Path or URL
        The predictions' Zarr group (staged); its array ``y_pred`` holds the predictions.
    overwrite : bool
        Replace an existing group at ``out``.
    storage_options : dict, optional
        For every location of the call.
    x_array : str
        The name of X's array.
    scores : bool
        A classifier's array ``scores`` too: the class probabilities (n, K) of a model with
        ``predict_proba``, else its decision values ((n,) for two classes, positive
        ``classes[1]``; (n, K) otherwise).
    std : bool
        A calibrated regressor's array ``std``: the posterior predictive standard deviation
        (:func:`predictive_std`).
    interval : float, optional
        A level in (0, 1): a calibrated regressor's arrays ``lower`` and ``upper``, its
        conformal prediction interval (:func:`prediction_interval`).
    outputs : dict, optional
        More array names, each mapped to a function ``(model, X) -> array`` with X's rows.
    device : {"cpu", "cuda", "auto"}
        Where the features and decisions are made (as :func:`fit_dataset`'s ``device``); the
        predictions are written from the host.

    Returns
    -------
    int
        The number of rows.

    Raises
    ------
    ValueError
        A transformer, ``scores`` of a regressor, ``std`` or ``interval`` of a model without a
        posterior, a dataset with other columns, or ``out`` on DATA or MODEL.
    """
    check_apart(out, {"DATA": data, "MODEL": model_path}, storage_options)
    model, meta = load_fitted(model_path, storage_options=storage_options)
    if not hasattr(model, "predict"):
        raise ValueError(f"{model_path} is a transformer, which does not predict; use "
                         "transform_dataset (rfstream transform) to write its output.")
    trained = meta.get("dataset", {})
    if (std or interval is not None) and trained.get("task") != "regression":
        raise ParameterError("{std=True} and {interval=*} are a regressor's; " f"{model_path} is a "
                             f"{trained.get('task')} model, whose class probabilities " "{scores=True} writes.",
                             std=std, interval=interval, scores=scores)
    X, _, attrs = open_data(data, storage_options=storage_options, x_array=x_array, y_array=None)
    check_schema(meta, attrs, X, data)
    X = rows_on_device(model, X, device)
    extra = {"model": redact_url(str(model_path)), "data": redact_url(str(data)), "task": trained.get("task"),
             "classes": trained.get("classes")}
    arrays = {}
    if scores:
        if trained.get("task") != "classification" or not hasattr(model, "decision_function"):
            raise ParameterError("{scores=True} needs a classifier; " f"{model_path} is a {trained.get('task')} "
                                 "model, whose predictions are its values.", scores=scores)
        kind = "predict_proba" if hasattr(model, "predict_proba") else "decision_function"
        arrays["scores"] = getattr(model, kind)(X)
        extra.update(scores=kind, score_classes=class_names(np.asarray(model.classes_), meta))
    y_pred = None
    if std or interval is not None:  # y_pred, std and the bounds from one product per block
        y_pred, spread, bounds = posterior_outputs(model, X, interval)
        if std:
            arrays["std"] = spread
        if interval is not None:
            arrays["lower"], arrays["upper"] = bounds
            extra["interval_level"] = float(interval)
    arrays.update({name: make(model, X) for name, make in (outputs or {}).items()})
    with ensure_run_context():
        arrays = {name: host_blocks(array) for name, array in arrays.items()}
        io.write_predictions(host_blocks(model.predict(X) if y_pred is None else y_pred), out, arrays=arrays,
                             overwrite=overwrite, storage_options=storage_options, attrs=extra)
    return int(X.shape[0])


def rows_on_device(model, X, device):
    """``X`` with its blocks moved to ``device`` in their tasks, after the model's steps are
    checked to run there (:func:`rfstream.devices.check_model_on_device`): before any pass."""
    device = check_device(device)
    check_model_on_device(model, device)
    return on_device(X, device)


def _final_step(model, X):
    """``(final estimator, its input)``: ``X`` through every step of a Pipeline but the last
    (lazy for dask), so that methods a Pipeline does not pass on (``predict_interval``)
    reach the solver with the features they need."""
    steps = getattr(model, "steps", None)
    if not steps:
        return model, X
    return steps[-1][1], (model[:-1].transform(X) if len(steps) > 1 else X)


def has_posterior(model):
    """Whether ``model`` (a Pipeline or one estimator) gives a posterior std and prediction
    intervals: a ridge regressor fitted with ``calibrate`` (its ``predict_interval``)."""
    final = model.steps[-1][1] if getattr(model, "steps", None) else model
    return hasattr(final, "predict_interval")


def _check_posterior(final, Z):
    """Refuse a model without a posterior: the library's own message for a ridge regressor
    fitted without calibration, one naming the fix for a solver that has none."""
    if "return_std" not in inspect.signature(final.predict).parameters:
        raise ParameterError(f"{type(final).__name__} keeps no posterior: std and prediction intervals come from "
                             "a ridge regressor fitted with {calibrate=True}.", calibrate=None)
    if not hasattr(final, "predict_interval"):
        final.predict(Z, return_std=True)  # raises the solver's message (refit with calibrate=True)


def posterior_outputs(model, X, level=None):
    """``(prediction, std, (lower, upper) or None)`` of every row of ``X`` (each shaped as
    ``predict``'s output; lazy for dask) from one ``predict(X, return_std=True)`` of a
    ridge regressor fitted with ``calibrate``: the prediction equals ``predict``'s, and
    the conformal bounds at ``level`` (:mod:`rfstream.solvers.ridge.calibration`) reuse its std."""
    final, Z = _final_step(model, X)
    _check_posterior(final, Z)
    mean, std = final.predict(Z, return_std=True)
    return mean, std, (None if level is None else final.interval_from_moments(mean, std, level))


def predictive_std(model, X):
    """The posterior predictive std of every row of ``X`` (lazy for dask), :func:`posterior_outputs`'s."""
    return posterior_outputs(model, X)[1]


def prediction_interval(model, X, level):
    """``(lower, upper)`` of every row of ``X`` at ``level`` (lazy for dask), :func:`posterior_outputs`'s."""
    return posterior_outputs(model, X, level)[2]


def transform_dataset(model_path, data, out, *, overwrite=False, storage_options=None, x_array="X",
                      rows_per_chunk=None, device="cpu"):
    """Write a saved transformer's output for every row of a dataset as a new Zarr dataset.

    The workers write it block by block; the dataset's labels, when it has them, are kept as
    its y.

    Parameters
    ----------
    model_path : str, Path or URL
        A model fitted with ``solver=None`` (:func:`fit_dataset`).
    data : str, Path, URL, zarr group or xarray Dataset
        The rows to transform, with the training data's columns.
    out : str, Path or URL
        The new dataset (staged); its X is the transformer's output.
    overwrite, storage_options, x_array
        As in :func:`predict_dataset`.
    rows_per_chunk : int, optional
        Rows per Zarr chunk of ``out`` (default: the rows of ``data``'s first block).
    device : {"cpu", "cuda", "auto"}
        Where the features are made (as :func:`fit_dataset`'s ``device``); written from the host.

    Returns
    -------
    tuple of int
        The output's shape.

    Raises
    ------
    ValueError
        A model that ends in a solver, sparse features, a dataset with other columns, or
        ``out`` on DATA or MODEL.
    """
    check_apart(out, {"DATA": data, "MODEL": model_path}, storage_options)
    model, meta = load_fitted(model_path, storage_options=storage_options)
    if hasattr(model, "predict") or not hasattr(model, "transform"):
        raise ParameterError(f"{model_path} ends in a solver; transform_dataset needs a transformer "
                             "(fitted with {solver=None}); use predict_dataset for predictions.", solver=None)
    X, y, attrs = open_data(data, storage_options=storage_options, x_array=x_array)
    check_schema(meta, attrs, X, data)
    Z = host_blocks(model.transform(rows_on_device(model, X, device)))
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
