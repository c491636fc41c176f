"""The one fit path: a fit on a dataset, from its checks to the saved model.

:class:`FitJob` is what ``rfstream fit`` and :func:`rfstream.pipeline.fit_dataset` both run, in
three steps a caller may separate: ``FitJob(data, ...)`` opens the dataset lazily, builds the model
(:func:`rfstream.catalog.route`) and checks all that needs no data; ``with job.resumable():
job.fit()`` fits under the job's checkpoint; ``job.save()`` writes the model staged and removes the
checkpoint.  The steps, the checkpoint's fingerprint and the holdout: docs/robustness.md,
"rfstream/jobs.py".
"""
from __future__ import annotations

import contextlib
import time

import dask.array as da
import numpy as np

from . import io, selection
from ._version import __version__
from .catalog import STANDARDIZE_DEFAULT, check_model, is_transformer, make_model, route
from .cluster import announce, current_run, expect_passes, prefetch, shows_progress
from .devices import check_device, check_model_on_device, check_precision, on_device, running_on
from .io.checkpoints import dataset_identity, fingerprint_of, identity_summary, model_identity, resumable
from .io.location import redact_url
from .io.witness import content_witness
from .io.zarr_source import lazy_array, open_source
from .options import FIT_DEFAULTS, TASKS, OutputExistsError, ParameterError
from .features.base import FeatureMap
from .features.grid import auto_rows
from .fit_plan import plan_fit
from .preprocess import Standardizer, train_test_split
from .random import check_seed
from .reductions import moments
from .selection.curves import at_size, report_files
from .selection.heatmap import surface_title
from .selection.summary import calibration_summary
from .solvers import StreamingRidgeClassifier
from .solvers.targets import planned_targets


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
        if task not in TASKS:
            raise ValueError(f"task must be 'classification' or 'regression'; got {task!r}.")
        attrs = {**attrs, "task": task}
    return X, y, attrs


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
    return {"path": redact_url(str(data)), "n_rows": int(X.shape[0]), "n_features": int(X.shape[1]),
            "task": attrs.get("task"), "classes": attrs.get("classes"),
            "feature_names": attrs.get("feature_names"), "categorical": attrs.get("categorical")}


def first_look(model, X, y):
    """What the model's first passes read from the rows alone, built as its steps build it, for
    one pass (:func:`rfstream.cluster.prefetch`): a Standardizer's moments, the rows that
    ``gamma="auto"`` samples (the map's ``random_state`` spawns the sampler, as
    :func:`rfstream.features.grid.auto_value` does), and a classifier's classes.  A collection
    its step then builds otherwise is computed by that step as before (docs/design-notes.md,
    "A fit's first look at the rows")."""
    steps = [step for _, step in getattr(model, "steps", [])]
    wanted = []
    if not isinstance(X, da.Array) or not steps:
        return wanted
    first = 0
    if isinstance(steps[0], Standardizer):
        wanted.append(moments(X, extrema=True))  # the Standardizer's own reduction (its fit computes the same)
        first = 1
    fmap = steps[first] if len(steps) > first else None
    rows = auto_rows(fmap, int(X.shape[0])) if isinstance(fmap, FeatureMap) and not np.isnan(X.shape[0]) else None
    if rows is not None:
        wanted.append(X[rows])
    solver = steps[-1]
    if isinstance(y, da.Array) and isinstance(solver, StreamingRidgeClassifier):
        wanted.extend(da.unique(y, return_counts=True) if isinstance(solver.class_weight, str)
                      else (da.unique(y),))
    return wanted


class FitJob:
    """One fit on a dataset; see the module docstring.  The keywords are those of
    :func:`rfstream.pipeline.fit_dataset`, which documents them."""

    def __init__(self, data, *, features="rff", solver="ridge", standardize=STANDARDIZE_DEFAULT, out=None,
                 overwrite=False, X=None, y=None, attrs=None, feature_params=None, solver_params=None,
                 storage_options=None, x_array="X", y_array="y", task=None, model=None, sample_weight=None,
                 checkpoint=None, restart=False, report=None, holdout=None, device="cpu", precision=None, **params):
        self.transformer = is_transformer(solver) if model is None else not hasattr(model, "predict")
        self.device = check_device(device)
        self.precision = check_precision(precision, self.device)
        if X is None:
            X, y, attrs = open_data(data, storage_options=storage_options, x_array=x_array,
                                    y_array=None if self.transformer else y_array, task=task)
        attrs = dict(attrs or {})
        self.data = data
        self.X = X
        self.y = y
        self.attrs = attrs
        self.out = out
        self.overwrite = overwrite
        self.storage_options = storage_options
        self.report = report
        self.checkpoint = checkpoint
        self.restart = restart
        self.sample_weight = sample_weight
        task = attrs.get("task")
        if not self.transformer and (y is None or task not in TASKS):
            raise ParameterError(f"{data} has no labels (task={task!r}); fit needs a labelled dataset (name the "
                                 "label array with {y_array=*} and the task with {task=*}), or {solver=None} for a "
                                 "transformer.", y_array=None, task=task, solver=solver)
        if model is None:
            routed_map, routed_solver = route(features, solver, task, params)
            model = make_model(None if self.transformer else task, features=features, solver=solver,
                               standardize=standardize, passthrough=io.onehot_columns(attrs),
                               feature_params={**routed_map, **(feature_params or {})},
                               solver_params={**routed_solver, **(solver_params or {})})
        self.model = check_model(model, X.shape[1])
        check_model_on_device(self.model, self.device)
        self._check_rows(data, X, attrs)
        weights = sample_weight
        if isinstance(sample_weight, str):
            weights = open_weights(data, sample_weight, X, storage_options=storage_options)
        self.holdout = self._check_holdout(holdout, params.get("random_state"))
        self.held_out = None
        if self.holdout is not None:
            self.X, self.y, weights = self._hold_out(X, y, weights)
        self.X = on_device(self.X, self.device)  # each task moves its rows to the device after the read
        self.fit_params = {} if weights is None else {"solver__sample_weight": weights}
        if out is not None and not overwrite and io.as_location(out, storage_options).exists():
            raise OutputExistsError(f"{out} already exists; pass " "{overwrite=True} to replace it.",
                                    overwrite=overwrite)
        if report and not selection.have_matplotlib():
            raise ParameterError("{report=True} draws the CV heat map with matplotlib, which is not installed; "
                                 "pip install 'rfstream[plot]', or leave {report} out.", report=report)
        self.meta = {}
        self.stored = None

    def _check_rows(self, data, X, attrs):
        """Refuse before any pass what the dataset's metadata already says will fail: fewer
        than two rows, a classifier's dataset with fewer than two classes, a score of two
        classes (``roc_auc``) on another number of them."""
        if X.shape[0] < 2:
            raise ValueError(f"{data} has {X.shape[0]} sample(s) (rows); a fit needs at least 2.")
        classes = attrs.get("classes")
        if not self.transformer and attrs.get("task") == "classification" and classes is not None \
                and len(classes) < 2:
            raise ParameterError(f"{data} has {len(classes)} class ({classes!r:.80}); a classifier needs at "
                                 "least two (or {task='regression'} for numeric labels).", task=attrs.get("task"))
        solver = getattr(self.model, "named_steps", {}).get("solver")
        if getattr(solver, "scoring", None) == "roc_auc" and classes is not None and len(classes) != 2 \
                and attrs.get("task") == "classification":
            raise ParameterError("{scoring='roc_auc'} needs two classes; " f"{data} has {len(classes)} "
                                 f"({classes!r:.80}). Use " "{scoring='error_rate'} or {scoring='balanced_error'}, "
                                 "or convert with one class against the rest ({positive_class=*}).",
                                 scoring="roc_auc", positive_class=None)

    def _check_holdout(self, holdout, random_state):
        """``{"fraction", "random_state"}`` of a holdout (None without one)."""
        if holdout is None:
            return None
        if isinstance(holdout, bool) or not isinstance(holdout, (int, float)) or not 0 < holdout < 1:
            raise ParameterError("{holdout (CLI)} must be a fraction of the rows in (0, 1), e.g. 0.2; "
                                 f"got {holdout!r}.", holdout=holdout)
        if self.transformer:
            raise ParameterError("{holdout} scores a model on held-out rows; a transformer (fitted "
                                 "with {solver=None}) has no score: leave {holdout} out.", holdout=holdout,
                                 solver=None)
        seed = FIT_DEFAULTS["random_state"] if random_state is None else random_state
        return {"fraction": float(holdout), "random_state": check_seed(seed)}

    def _hold_out(self, X, y, weights):
        """``(X, y, weights)`` of the rows fitted on; the held-out ``(X, y)`` kept in
        ``held_out`` (their weights are not used: held-out metrics weigh every row 1)."""
        arrays = [X, y] + ([] if weights is None else [weights])
        parts = train_test_split(*arrays, test_size=self.holdout["fraction"],
                                 random_state=self.holdout["random_state"])
        self.held_out = (parts[1], parts[3])
        if parts[1].shape[0] == 0:
            raise ParameterError("{holdout=} holds out " f"none of the {X.shape[0]} rows of {self.data}; hold "
                                 "out a larger fraction.", holdout=self.holdout["fraction"])
        self._check_rows(self.data, parts[0], self.attrs)
        return parts[0], parts[2], (None if weights is None else parts[4])

    def fingerprint(self):
        """``(digest, description)`` of the job: the model's parameters, the dataset's
        identity (shape, chunks, dtype, attributes, and a witness of its content that any
        rewrite changes, :func:`rfstream.io.witness.content_witness`), the weights array's
        name and rfstream's version; never a credential, so rotating them keeps the job.
        The description names classes and the dataset's last path part only.  A holdout's
        fraction and seed are part of it: the rows fitted on."""
        return self._fingerprint(self._identity_parts())

    def _identity_parts(self):
        """``(model, dataset, extra)``: what :meth:`fingerprint` hashes."""
        extra = {"sample_weight": self.sample_weight if isinstance(self.sample_weight, str) else None,
                 "transformer": self.transformer, "holdout": self.holdout, "device": self.device,
                 "precision": self.precision}
        witness = content_witness(self.data, self.storage_options)  # None for a group given directly
        return model_identity(self.model), dataset_identity(self.X, self.attrs, witness), extra

    def identity(self, parts=None):
        """The job's identity part by part (:func:`rfstream.io.checkpoints.identity_summary`:
        a digest and a short text each, passwords hidden), stored in the checkpoint so that a
        refusal names the parts that differ."""
        model, dataset, extra = parts or self._identity_parts()
        return identity_summary({**model, "dataset": dataset, **extra, "rfstream version": __version__})

    def _fingerprint(self, parts):
        digest = fingerprint_of("fit", *parts)
        steps = " -> ".join(type(step).__name__ for _, step in self.model.steps)
        name = io.as_location(self.data).name if isinstance(self.data, str) or hasattr(self.data, "parts") \
            else type(self.data).__name__
        return digest, f"rfstream {__version__} fit of {steps} on {name} ({self.X.shape[0]:,} rows)"

    @contextlib.contextmanager
    def resumable(self):
        """The job's checkpoint for the block (nothing without ``checkpoint``); yields it."""
        if self.checkpoint is None:
            yield None
            return
        parts = self._identity_parts()
        digest, description = self._fingerprint(parts)
        with resumable(self.checkpoint, digest, restart=self.restart, description=description,
                       identity=self.identity(parts), storage_options=self.storage_options) as stored:
            self.stored = stored
            yield stored

    def check_memory(self):
        """Refuse, before any pass, what the connected workers or the client cannot hold
        (:func:`rfstream.catalog.check_model` with the planned targets)."""
        solver = None if self.transformer else self.model.named_steps.get("solver")
        targets = None if solver is None else planned_targets(self.attrs.get("task"), self.attrs.get("classes"),
                                                              self.y)
        check_model(self.model, self.X.shape[1], targets)

    def plan(self):
        """The fit's :class:`rfstream.fit_plan.FitPlan` (its passes, the client's work, the
        peak memory, the checkpoint's size), made from what needs no data, on the connected
        workers; the memory checks first (:meth:`check_memory`)."""
        self.check_memory()
        return plan_fit(self, first_look(self.model, self.X, None if self.transformer else self.y))

    def fit(self):
        """Check the memory on the connected workers, say the plan where the run shows
        progress (:func:`rfstream.cluster.announce`), fit, and gather the metadata; returns
        ``(model, metadata)``."""
        self.check_memory()
        run = current_run()
        if shows_progress():  # the plan, before the first pass; its passes number the progress
            plan = self.plan()
            announce(plan.lines())
            expect_passes(plan.passes, plan.n_passes)
        passes_before = None if run is None else run.passes
        t0 = time.perf_counter()
        with running_on(self.device, self.precision):
            prefetch(*first_look(self.model, self.X, None if self.transformer else self.y))
            self.model = selection.fit_model(self.model, self.X, None if self.transformer else self.y,
                                             **self.fit_params)
        meta = {"dataset": dataset_metadata(self.data, self.X, self.attrs),
                "fit_seconds": round(time.perf_counter() - t0, 3)}
        if run is not None:  # every pass over the rows, as the progress lines number them
            meta["passes"] = run.passes - passes_before
        solver = self.model.named_steps.get("solver")  # a loop over gammas returns the chosen Pipeline
        chosen = {} if self.transformer or solver is None else selection.selection_summary(
            solver, self.model.named_steps.get("features"))
        if chosen:
            meta["selection"] = chosen
        scaler = self.model.named_steps.get("standardize")
        if getattr(scaler, "auto", False):  # what standardize="auto" decided, and why
            meta["standardize"] = scaler.decision_
        calibrated = {} if self.transformer or solver is None else calibration_summary(solver)
        if calibrated:  # the noise variance of a regressor's posterior, a classifier's Platt scaling
            meta["calibration"] = calibrated
        if isinstance(self.sample_weight, str):
            meta["sample_weight"] = self.sample_weight
        if self.device != "cpu":
            meta["device"] = {"device": self.device, "precision": self.precision}
        if self.holdout is not None:  # its metrics: rfstream.pipeline.score_holdout
            meta["holdout"] = {**self.holdout, "rows": int(self.held_out[0].shape[0])}
        if self.stored is not None:
            meta["passes_reused"] = self.stored.reused
        self.meta = meta
        return self.model, meta

    def files(self, title=None):
        """The files saved beside the model: the heat map of the search (CV scores or log
        evidence; with a list of sizes, the chosen size's), the curve over ``n_components``
        and a calibrated regressor's calibration plot (:mod:`rfstream.selection.curves`),
        when there is a search and ``report`` (or, with ``report=None``, matplotlib is
        installed)."""
        chosen = self.meta.get("selection")
        if not chosen or self.report is False or (self.report is None and not selection.have_matplotlib()):
            return {}
        surface = at_size(chosen, chosen["n_components"]) if "n_components" in chosen else chosen
        title = title or surface_title(surface)
        solver = self.model.named_steps["solver"] if hasattr(self.model, "named_steps") else self.model
        return {selection.HEATMAP_FILE: selection.cv_heatmap_png(surface, title=title),
                **report_files(chosen, solver)}

    def save(self, title=None):
        """Save the model to ``out`` (staged) with its files, then remove the checkpoint."""
        self.saved_files = self.files(title) if self.out is not None else {}
        if self.out is not None:
            io.save_model(self.model, self.out, metadata=self.meta, overwrite=self.overwrite,
                          storage_options=self.storage_options, files=self.saved_files)
        if self.stored is not None:  # the model is safe: the passes are no longer needed
            self.stored.remove()

    def summary(self):
        """The fit's outcome as the CLI prints it: the model, rows, alpha, gamma, seconds,
        passes, the search's table (CV scores, or the evidence's log evidence, noise variance
        and effective parameters; with a list of sizes the chosen ``n_components`` and the
        one-standard-error rule's), a calibrated model's noise variance or Platt coefficients,
        a resumed checkpoint's reused passes, and a holdout's rows and metrics."""
        solver = self.model.named_steps.get("solver")
        fmap = self.model.named_steps.get("features")
        out = {"model": None if self.out is None else str(self.out), "rows": self.meta["dataset"]["n_rows"]}
        if not self.transformer:
            out["alpha"] = getattr(solver, "alpha_", getattr(solver, "alpha", None))
        out.update(gamma=getattr(fmap, "gamma_", None), fit_seconds=self.meta["fit_seconds"])
        if "standardize" in self.meta:
            out["standardize"] = self.meta["standardize"]
        if self.stored is not None and self.stored.reused:
            out.update(resumed=True, passes_reused=self.stored.reused)
        if "passes" in self.meta:  # all of the fit's passes: moments, gamma's sample, the map's, the solver's
            out["passes"] = self.meta["passes"]
        if getattr(solver, "n_iter_", None) is not None:  # ridge: 1-3, or 1 + the CG iterations
            out["solver_passes"] = int(np.max(solver.n_iter_))
        chosen = self.meta.get("selection")
        if chosen:  # lists of alphas or gammas: the table of the search (per candidate)
            out["cv"] = {"scoring": chosen["scoring"], **chosen["cv"], "best_score": chosen["best_score"]}
            out.update({key: chosen[key] for key in ("n_components", "smallest_n_components_within_1se", "edge",
                                                     "noise_variance_of") if key in chosen})
        if self.meta.get("calibration"):
            out["calibration"] = self.meta["calibration"]
        if self.meta.get("holdout"):  # its rows and scalar metrics (the model's metadata holds them all)
            out["holdout"] = {k: v for k, v in self.meta["holdout"].items()
                              if v is not None and not isinstance(v, (list, dict))}
        if hasattr(solver, "explained_variance_ratio_"):  # kernel PCA: what its components hold
            out["explained_variance_ratio"] = [round(float(v), 6) for v in solver.explained_variance_ratio_]
        return out
