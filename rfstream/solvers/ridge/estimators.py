"""The ridge estimators, their search over (gamma, size, alpha), and the dispatch of ``solver``.

Rahimi & Recht (2007)'s "Fourier+LS": ``min sum_i c_i ||y_i - W' z_i - b||^2 + alpha ||W||_F^2``,
the objective of ``sklearn.linear_model.Ridge`` with ``sample_weight``, solved on the client
from one Gram pass (:mod:`rfstream.solvers.ridge.gram`); a list of alphas or gammas is searched
by CV (:mod:`~rfstream.solvers.ridge.cv`, :mod:`~rfstream.solvers.ridge.loo`) or the evidence
(:mod:`~rfstream.solvers.ridge.evidence`), then calibrated; past the Gram's memory, conjugate
gradients (:mod:`~rfstream.solvers.ridge.cg`).  The narrative: docs/ridge.md.
"""
from __future__ import annotations

import warnings
from functools import partial
from numbers import Integral, Real
from typing import ClassVar

import dask.array as da
import numpy as np
import scipy.linalg
import scipy.sparse
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    MultiOutputMixin,
    RegressorMixin,
    is_classifier,
)
from sklearn.utils._param_validation import Interval, StrOptions

from ..._validation import check_X_y
from ...cluster import compute
from ...features.source import feature_source
from ...io.pass_encoding import symmetric_blocks
from ...options import CALIBRATE_MAX_FEATURES, ParameterError
from ...random import check_seed
from ...reductions import whole_sum
from ..folds import check_cv
from ..linear import LinearClassifierMixin, LinearPredictMixin, classifier_state, regressor_state
from ..memory import check_gram_memory, use_loo_instead, uses_iterations
from ..passes import RowSpec, row_sum, weight_fields
from ..targets import (
    check_targets,
    class_weights,
    find_classes,
    ovr_targets,
    regression_targets,
)
from ..weights import check_sample_weight
from .calibration import (
    CalibratedProbaMixin,
    PosteriorPredictMixin,
    calibration_pass,
    cholesky_posterior,
    noise_variance,
    posterior_basis,
    posterior_state,
)
from .cg import fit_iterative
from .cg_search import cg_cross_validate
from .cv import (
    CLASSIFIER_SCORINGS,
    REGRESSOR_SCORINGS,
    check_alpha,
    check_totals,
    grid_cross_validate,
    normal_equations,
    solve,
    warn_on_edge,
    warn_on_largest_size,
)
from .evidence import (
    centred_target_energy,
    check_evidence_alphas,
    degrees_of_freedom,
    evidence_bases,
    evidence_table,
)
from .gram import (
    expand_sizes,
    feature_groups,
    gram_chunk,
    gram_layout,
    group_chunk,
    group_spec,
    symmetric_spans,
)
from .loo import loo_basis, loo_cross_validate, loo_solution
from .nystrom_pcg import PCG_RANK
from .platt import fit_platt, fits_beside_gram

#: What only the Gram solver gives: ``parameter: (its value asked, why, the other way out)``.
NEEDS_GRAM = {"select": ("evidence", "its eigendecomposition", "{select='cv'} with one alpha"),
              "calibrate": (True, "the posterior is its D x D factor", "{calibrate=False}")}


def refuse_without_gram(solver, *, evidence=False, calibrate=False):
    """Refuse ``select='evidence'`` (``evidence``) or ``calibrate=True`` (``calibrate``) with
    the iterative ridge ``solver``: the evidence and the posterior come from the Gram."""
    for asked, name in ((evidence, "select"), (calibrate, "calibrate")):
        if asked:
            value, why, instead = NEEDS_GRAM[name]
            raise ParameterError("{" + name + "=} needs the Gram solver (" + why + "); got {solver=}. Use "
                                 "{solver='gram'}, or " + instead + ".", **{name: value}, solver=solver)


class RidgeSearchMixin:
    """The search and calibration steps of the ridge estimators (docs/ridge.md)."""

    def _choose_cv(self, Z, y, n_groups, n_features, n_targets, widths=None):
        """``"loo"`` or :func:`check_cv`'s ``(n_folds, scored, folds)``: exact leave-one-out
        when asked, and instead of an int ``cv`` whose per-fold Grams would not fit a worker
        while one Gram does (:func:`rfstream.solvers.memory.use_loo_instead`), with a warning;
        ``(1, 1, None)`` for the evidence (no folds)."""
        if self.select == "evidence":
            return 1, 1, None
        if isinstance(self.cv, str):
            return "loo"
        cv = check_cv(self.cv, Z, y)
        if use_loo_instead(self.cv, n_groups, cv[0], n_features, n_targets, widths):
            warnings.warn(f"{cv[0]}-fold cross-validation needs {cv[0]} Grams of D={n_features} per "
                          "task, more than the workers' or the client's memory holds; using exact "
                          "leave-one-out from one Gram instead (cv='loo').", UserWarning, stacklevel=5)
            return "loo"
        return cv

    def _search(self, groups, y, stats, totals, alphas, cv, weights, target_fn, platt=False):
        """``(chosen group, basis or None, Platt histograms or None)``; sets ``cv_results_``,
        ``alphas_``, ``alpha_``, ``best_score_`` (``cv_mse_`` for CV), and with a gamma grid
        ``gammas_``, ``gamma_`` and the map set to the chosen gamma.  ``basis``: the chosen gamma's
        eigendecomposition when the route made one (evidence, leave-one-out: the fit is
        solved from it, no copy of the Gram).  ``platt``: the scoring pass (K-fold or leave-one-out)
        counts the chosen candidate's held-out decisions for Platt scaling (:meth:`_platt_from_scoring`)."""
        classes = getattr(self, "classes_", None)
        bases, platt_counts = None, None
        if self.select == "evidence":
            check_evidence_alphas(alphas)
            bases = evidence_bases(totals, alphas, self.fit_intercept)
            table, best = evidence_table(bases, totals, alphas, fit_intercept=self.fit_intercept,
                                         gammas=groups.gammas)
            table = {**table, "scoring": "log_evidence", "mean_score": table["log_evidence"],
                     "std_score": np.full(table["alpha"].size, np.nan), "cv": "evidence"}
            if hasattr(self, "cv_mse_"):
                del self.cv_mse_
        elif cv == "loo":
            table, self.cv_mse_, best, bases, platt_counts = loo_cross_validate(
                groups, y, totals, alphas, weights, target_fn=target_fn, scoring=self.scoring,
                classes=classes, fit_intercept=self.fit_intercept, platt=platt)
        else:
            table, self.cv_mse_, best, platt_counts = grid_cross_validate(
                groups, y, stats, totals, alphas, cv, weights, scoring=self.scoring, classes=classes,
                fit_intercept=self.fit_intercept, seed=check_seed(self.random_state), platt=platt)
        chosen = self._record_choice(groups, alphas, table, best)
        return chosen, None if bases is None else bases[chosen], platt_counts  # None: Cholesky, no eigh made

    def _record_choice(self, groups, alphas, table, best):
        """Set ``alphas_``, ``cv_results_``, ``alpha_`` and ``best_score_`` of the candidate
        ``best`` of ``table`` (warning when it is on a grid's edge), with a gamma grid
        ``gammas_``, ``gamma_`` and the map set to the chosen gamma, with a list of sizes
        ``n_components_``; returns the chosen group's index."""
        self.alphas_ = alphas
        self.cv_results_ = table
        chosen, a = divmod(best, alphas.size)
        self.alpha_, self.best_score_ = float(alphas[a]), float(table["mean_score"][best])
        warn_on_edge(alphas, a, "alpha")
        step = 1 if groups.sizes is None else len(np.unique(groups.sizes))
        if groups.gammas is not None:
            self.gammas_, self.gamma_ = groups.gammas[::step], float(groups.gammas[chosen])
            self.cv_results_["gamma_label"] = [groups.labels[i] for i in range(groups.n_groups)
                                               for _ in alphas]
            warn_on_edge(groups.gammas, chosen, "gamma", groups.labels)
        elif hasattr(self, "gammas_"):  # refit without a grid
            del self.gammas_, self.gamma_
        if groups.sizes is not None:
            self.cv_results_["n_components"] = np.repeat(groups.sizes, alphas.size)
            self.cv_results_["alpha"] = np.tile(alphas, groups.n_groups)  # one per candidate, as every column
            self.n_components_ = int(groups.sizes[chosen])
            warn_on_largest_size(groups.sizes, chosen)
        elif hasattr(self, "n_components_"):
            del self.n_components_
        if groups.select is not None:
            groups.select(chosen)
        return chosen

    def _solution(self, basis, total, solve_stats):
        """``(W, b)`` at the chosen alpha: the calibration's factor's
        (:func:`rfstream.solvers.ridge.calibration.cholesky_posterior`), from the eigendecomposition or
        tridiagonal reduction the search made (:func:`rfstream.solvers.ridge.loo.loo_solution`), else by
        Cholesky from the chosen gamma's totals (``solve_stats``)."""
        if basis is not None and "L" in basis:
            return basis["W"], basis["b"]
        if basis is not None:
            return loo_solution(basis, self.alpha_)
        return solve_stats(total, self.alpha_)

    def _calibrates(self, searching, n_features):
        """Whether this fit calibrates (``calibrate``, docs/ridge.md): by the calibration pass, or
        a classifier by its scoring pass's held-out decisions (:meth:`_platt_from_scoring`)."""
        if self.calibrate == "auto":
            return searching and n_features <= CALIBRATE_MAX_FEATURES
        return bool(self.calibrate)

    def _platt_from_scoring(self, n_grams, n_alphas, n_targets, n_features):
        """Whether a calibrating classifier takes Platt's sigmoid from its scoring pass's held-out
        decisions (Platt 1999, Section 2.2) instead of a calibration pass: K-fold CV's out-of-fold
        ones (``n_grams`` = K) or leave-one-out's exact ones (``n_grams`` = 1; None: no scoring
        pass), with a classification metric (the pass exists) and histograms no larger than the
        Gram's partials (:func:`rfstream.solvers.ridge.platt.fits_beside_gram`); docs/ridge.md."""
        return (is_classifier(self) and self.select == "cv" and n_grams is not None
                and self.scoring != "squared_error"
                and fits_beside_gram(n_alphas, n_targets, n_grams, n_features))

    def _calibrate(self, groups, chosen, y, target_fn, weights, W, b, basis, total):
        """The calibration pass and what the model keeps of it (docs/ridge.md); ``basis``: the
        chosen gamma's eigendecomposition, or :func:`cholesky_posterior`'s factor."""
        classifier = hasattr(self, "classes_")
        if "L" in basis:
            F, explained = basis["L"], basis["explained"]
        else:
            F = posterior_basis(basis, self.alpha_)
            explained = (1.0 / (basis["s"] + self.alpha_)) @ (basis["UC"] ** 2)
        noise = noise_variance(explained, centred_target_energy(total, self.fit_intercept),
                               degrees_of_freedom(total, self.fit_intercept))
        model = {"W": W, "b": b, "F": F, "mu": basis["mu"], "inv_n": float(basis["inv_n"]), "noise": noise}
        counts = calibration_pass(groups, chosen, y, target_fn, weights, model, classifier=classifier,
                                  seed=check_seed(self.random_state))
        if classifier:
            self.platt_ = np.array([fit_platt(column) for column in counts])
        else:
            self.posterior_factor_ = F
            self.feature_mean_ = basis["mu"]
            self.noise_variance_ = noise
            self.inverse_weight_ = float(basis["inv_n"])
            self.conformal_counts_ = counts

    def _forget_calibration(self):
        for name in ("platt_", "posterior_factor_", "feature_mean_", "noise_variance_", "inverse_weight_",
                     "conformal_counts_"):
            if hasattr(self, name):
                delattr(self, name)


class _BaseStreamingRidge(RidgeSearchMixin, LinearPredictMixin, BaseEstimator):
    searches_alpha = True  # a list of alphas is searched by cross-validation
    searches_gamma = True  # and a gamma grid of a map that shares its draw (features.grid)
    solves_by_gram = True  # from a D x D Gram: its memory is planned by solvers.memory
    _parameter_constraints: ClassVar[dict] = {
        "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
        "fit_intercept": ["boolean"],
        "cv": ["cv_object", StrOptions({"loo"})],
        "random_state": ["random_state"],
        "solver": [StrOptions({"auto", "gram", "cg", "pcg"})],
        "pcg_rank": [Interval(Integral, 1, None, closed="left")],
        "tol": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "scoring": [StrOptions(set(REGRESSOR_SCORINGS))],
        "select": [StrOptions({"cv", "evidence"})],
        "calibrate": ["boolean", StrOptions({"auto"})],
    }

    def __init__(self, alpha=1.0, *, fit_intercept=True, cv=5, random_state=0, solver="auto",
                 tol=1e-4, max_iter=200, pcg_rank=PCG_RANK, scoring="squared_error", select="cv",
                 calibrate="auto"):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.cv = cv
        self.random_state = random_state
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.pcg_rank = pcg_rank
        self.scoring = scoring
        self.select = select
        self.calibrate = calibrate

    def check_parameters(self, n_features=None):
        """Raise what ``fit`` would raise for the parameters alone (scikit-learn's
        parameter checks); ``n_features`` is not needed.  Returns None."""
        self._validate_params()

    # -- the pass -----------------------------------------------------------
    def _statistics(self, groups, n_features, y, target_fn, n_targets, n_folds, weights, folds):
        """The partials of the Gram pass, one dict per feature group (one per gamma of a
        grid, :mod:`rfstream.solvers.ridge.gram`), each with the fold axis first."""
        layout = gram_layout(n_features, n_targets, n_folds)
        w, weight_args = weights
        spec = RowSpec(layout=layout, targets=target_fn, n_folds=n_folds,
                       seed=check_seed(self.random_state), **weight_fields(weight_args))
        size, spans = groups.n_groups * layout.size, symmetric_spans(layout, groups.n_groups)
        lazy = row_sum(group_chunk, size, groups.rows, group_spec(gram_chunk, groups, spec), y=y, w=w,
                       folds=folds, symmetric=spans)  # over several blocks, each fold's Z'Z as its triangle
        with symmetric_blocks(spans if lazy.shape[0] == size else []):  # a checkpoint packs them
            vec = whole_sum(compute(lazy), size, spans)
        return [layout.unpack(part) for part in np.split(vec, groups.n_groups)]  # views: no copy

    def _fit_targets(self, Z, y, target_fn, n_targets, sample_weight=None, weight_args=None):
        """(W, b) of the weighted ridge problem (docs/ridge.md) for the targets
        ``target_fn(y)``; row weights: ``sample_weight`` (checked) times the class
        weights in ``weight_args`` (``classes``, ``class_weight``).  ``Z`` from a map
        fitted with a gamma grid: the grid is searched too and the map set to the
        chosen gamma (:mod:`rfstream.solvers.ridge.gram`)."""
        alphas = check_alpha(self.alpha)
        groups = feature_groups(Z)
        n_features = Z.shape[1] // groups.n_groups
        sparse = scipy.sparse.issparse(getattr(Z, "_meta", Z))
        self._forget_calibration()
        source = feature_source(Z)
        sizes = None if source is None else source.sizes
        # the dispatch, "auto" resolved: conjugate gradients for "cg", "pcg" and wide sparse
        # features of one gamma (memory.uses_iterations), else the Gram pass
        weights = (sample_weight, weight_args)
        if uses_iterations(self.solver, n_features, groups.n_groups, sparse):
            return self._fit_by_iterations(Z, y, target_fn, n_targets, alphas, groups, sizes, weights)
        return self._fit_by_gram(Z, y, target_fn, n_targets, alphas, groups, n_features, sizes, weights)

    def _fit_by_iterations(self, Z, y, target_fn, n_targets, alphas, groups, sizes, weights):
        """(W, b) by conjugate gradients (:mod:`rfstream.solvers.ridge.cg`); a list of alphas by
        :mod:`rfstream.solvers.ridge.cg_search`."""
        sample_weight, weight_args = weights
        if sizes is not None:
            raise ParameterError("a list of {n_components} is searched from the Gram; got {solver=}. "
                                 "Use {solver='gram'}, or give one {n_components}.", solver=self.solver,
                                 n_components=None)
        refuse_without_gram(self.solver, evidence=self.select == "evidence",
                            calibrate=self.calibrate != "auto" and bool(self.calibrate))
        if np.ndim(self.alpha) > 0:
            return self._search_iterative(Z, y, target_fn, n_targets, alphas, groups, sample_weight,
                                          weight_args)
        W, b, info = fit_iterative(self, Z, y, target_fn, n_targets, alphas, groups,
                                   sample_weight=sample_weight, weight_args=weight_args)
        self.alpha_ = float(alphas[0])
        self.n_samples_seen_ = int(info["m"])
        self.n_iter_ = 1 + info["n_iter"]
        return W, b

    def _fit_by_gram(self, Z, y, target_fn, n_targets, alphas, groups, n_features, sizes, weights):
        """(W, b) from one Gram pass (:mod:`rfstream.solvers.ridge.gram`), with the search (CV,
        leave-one-out or the evidence) and the calibration pass where asked."""
        searching = (np.ndim(self.alpha) > 0 or groups.gammas is not None or sizes is not None
                     or self.select == "evidence")
        widths = None if sizes is None else [len(columns) for columns in sizes.columns]
        cv = self._choose_cv(Z, y, groups.n_groups, n_features, n_targets, widths) if searching else (1, 1, None)
        n_folds, _, folds = (1, 1, None) if cv == "loo" else cv
        check_gram_memory(groups.n_groups, n_folds, n_features, n_targets, widths)
        stats = self._statistics(groups, n_features, y, target_fn, n_targets, n_folds,
                                 weights, folds)
        if sizes is not None:  # every listed size from the largest one's partials
            groups, stats = expand_sizes(groups, stats, sizes)
        totals = [{k: v.sum(axis=0) if n_folds > 1 else v[0] for k, v in group.items()} for group in stats]
        check_totals(totals)
        chosen = 0
        basis = platt_counts = None
        calibrating = self._calibrates(searching, n_features)
        n_grams = 1 if cv == "loo" else cv[0] if cv[0] > 1 else None  # the scoring pass's Grams
        from_scoring = calibrating and self._platt_from_scoring(n_grams, alphas.size, n_targets, n_features)
        if searching:
            chosen, basis, platt_counts = self._search(groups, y, stats, totals, alphas, cv,
                                                       weights, target_fn, platt=from_scoring)
        else:
            self.alpha_ = float(alphas[0])
        self.n_features_in_ = int(totals[chosen]["s"].shape[0])  # of the chosen gamma and size
        calibration_pass = calibrating and platt_counts is None
        if calibration_pass and (basis is None or "U" not in basis):  # the calibration's factor solves the fit too
            basis = (cholesky_posterior(totals[chosen], self.alpha_, self.fit_intercept)
                     or loo_basis(totals[chosen], self.fit_intercept))
        W, b = self._solution(basis, totals[chosen], self._solve_stats)
        scoring_pass = searching and (cv == "loo" or self.scoring != "squared_error") and self.select == "cv"
        if platt_counts is not None:  # Platt from the scoring pass's held-out decisions: no more pass
            self.platt_ = np.array([fit_platt(column) for column in platt_counts])
        elif calibrating:
            self._calibrate(groups, chosen, y, target_fn, weights, W, b, basis,
                            totals[chosen])
        self.n_samples_seen_ = int(totals[0]["m"])
        self.n_iter_ = 1 + scoring_pass + calibration_pass
        return W, b

    def _search_iterative(self, Z, y, target_fn, n_targets, alphas, groups, sample_weight, weight_args):
        """(W, b) of the alpha chosen by :func:`rfstream.solvers.ridge.cg_search.cg_cross_validate`:
        every (fold, alpha) solved in the same CG passes, then one scoring pass."""
        table, cv_mse, best, W, b, info = cg_cross_validate(
            self, Z, y, target_fn, n_targets, alphas, groups, sample_weight=sample_weight,
            weight_args=weight_args)
        self._record_choice(groups, alphas, table, best)
        if cv_mse is not None:
            self.cv_mse_ = cv_mse
        elif hasattr(self, "cv_mse_"):
            del self.cv_mse_
        self.n_samples_seen_ = int(info["m"])
        self.n_iter_ = info["n_iter"]
        cols = slice(best * n_targets, (best + 1) * n_targets)
        return W[:, cols], b[cols]

    def _solve_stats(self, stats, alpha):
        G, C, mu, nu = normal_equations(stats, self.fit_intercept)
        W = solve(G, C, alpha)
        return W, nu - mu @ W

    # -- shared input handling ------------------------------------------------
    def _check_fit_input(self, X, y, sample_weight=None, **y_checks):
        """``(X, y, sample_weight)``: numpy/pandas through ``validate_data``; a dask ``X``
        (array or DataFrame, converted lazily) with ``y`` and ``sample_weight`` aligned to
        its row chunks (:func:`rfstream.solvers.weights.check_sample_weight`)."""
        X, y = check_X_y(self, X, y, reset=True, accept_sparse="csr", **y_checks)
        if isinstance(X, da.Array):
            y = check_targets(X, y, multi_output=isinstance(self, MultiOutputMixin))
        return X, y, check_sample_weight(X, sample_weight)


class StreamingRidge(PosteriorPredictMixin, MultiOutputMixin, RegressorMixin, _BaseStreamingRidge):
    """Ridge regression from one streaming Gram reduction.

    Parameters
    ----------
    alpha : float or list of float, default=1.0
        Regularization strength, on the scale of ``sklearn.linear_model.Ridge``
        (sum of squared errors + alpha ||w||^2).  A list (even of one value) selects
        ``alpha_`` by ``cv``-fold cross-validation from the same single pass.

        Fitted on the features of a map given a list of gammas (``RandomFourierFeatures(
        gamma=["auto*0.25", "auto", "auto*4"])``, :mod:`rfstream.features.grid`), the
        solver searches every (gamma, alpha) by the same cross-validation: the Gram
        pass computes each gamma's features from the same rows, G x K x D^2 float64
        partials (refused before the pass when they cannot fit a worker,
        :func:`rfstream.solvers.memory.check_gram_memory`), and the map is set to
        the chosen gamma.  A choice on the edge of a grid of three or more values
        warns (:func:`rfstream.solvers.ridge.cv.warn_on_edge`).
    fit_intercept : bool, default=True
    cv : int, "loo", iterable of (train, test) index arrays, or a splitter, default=5
        Cross-validation when ``alpha`` is a list or gamma a grid: an int k gives k
        folds, each row's fold a function of (``random_state``, row index); splits (or
        a splitter's ``split(X, y)``, e.g. ``GroupKFold``) must have disjoint test sets,
        each with every other row as its training set (:mod:`rfstream.solvers.folds`).
        The Gram pass keeps k Grams per task; "loo": exact leave-one-out from one Gram
        (:mod:`rfstream.solvers.ridge.loo`, memory O(D^2) instead of O(k D^2)), also used, with
        a warning, when the k Grams of an int ``cv`` would not fit a worker.
    random_state : int, default=0
        Seed of the fold assignment (a function of the seed and the row index).
    solver : {"auto", "gram", "cg", "pcg"}, default="auto"
        "gram": the single Gram pass above.  "cg": Jacobi-preconditioned
        conjugate gradients on the implicit normal equations, one pass per
        iteration and only D x T arrays on the client, for wide (sparse)
        features such as random binning (:mod:`rfstream.solvers.ridge.cg`); a list of
        alphas is searched by k-fold CV with every (fold, alpha) system in the same
        passes, then one scoring pass (:mod:`rfstream.solvers.ridge.cg_search`; no gamma
        grid, no ``cv="loo"``).  "pcg": the same iterations with a Nystrom preconditioner of
        rank ``pcg_rank`` built from a uniform sample of rows
        (:mod:`rfstream.solvers.ridge.nystrom_pcg`): memory O(D x pcg_rank) instead of the
        Gram's O(D^2), for dense features past the Gram's memory.  "auto": "cg" for
        sparse features wider than ``rfstream.solvers.memory.CG_MIN_FEATURES`` (4096), "gram" otherwise.
    tol, max_iter : float, int, default=1e-4, 200
        CG stopping rule: relative residual of the normal equations, passes.
    pcg_rank : int, default=2048
        "pcg": the preconditioner's rank r (at most D), from 2 r rows sampled with
        ``random_state``.
    scoring : {"squared_error"}, default="squared_error"
        The CV score of an ``alpha`` list: held-out MSE, exact from the partials.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_targets, n_features)
    intercept_ : float or ndarray of shape (n_targets,)
    alpha_ : float
        The alpha used for ``coef_``.
    alphas_, cv_mse_ : ndarray
        Candidate alphas and the mean held-out squared error of every candidate (list
        alpha or gamma grid only; with solver "cg" or "pcg" a classifier has ``cv_mse_``
        only for ``scoring="squared_error"``: its scoring pass computes one metric).
    gammas_, gamma_ : ndarray, float
        The gammas of a grid and the chosen one (gamma grid only).
    cv_results_ : dict
        "alpha", "scoring", "mean_score", "std_score" (one per candidate) and
        "fold_scores" (candidates, K), with a gamma grid also "gamma" and "gamma_label"
        (the item as given), candidates gamma by gamma
        (:func:`rfstream.solvers.ridge.cv.cv_table`); ``best_score_``: the mean score
        of the chosen candidate, the best (list alpha or gamma grid only).
    n_features_in_ : int
    n_samples_seen_ : int
    n_iter_ : int
        Passes over the data: 1 for the Gram pass (2 with a scoring pass), 1 + the CG
        iterations for "cg" and "pcg" (one more, the scoring pass, for a list of alphas).

    Examples
    --------
    >>> StreamingRidge(alpha=1e-9).fit([[0.], [1.], [2.]], [1., 3., 5.]).predict([[3.]]).round(6)
    array([7.])
    """

    @staticmethod
    def _fitted_rule(view):
        """What a saved model's fitted state must hold (:mod:`rfstream.io.model_checks`)."""
        posterior_state(view, *regressor_state(view))

    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (n, D) and ``y`` (n,) or (n, T), rows weighted by ``sample_weight``.

        Parameters
        ----------
        X : array-like, pandas DataFrame, dask array or dask DataFrame of shape (n, D)
            A dask DataFrame is converted lazily (only its partition lengths are computed).
        y : array-like, pandas or dask Series of shape (n,) or (n, T)
        sample_weight : None, float, or one weight >= 0 per row (numpy, pandas, dask)
            Row i's squared error counts ``sample_weight[i]`` times: an integer weight is
            that row repeated, 0 the row dropped (with a single ``alpha``; the CV folds of
            a list depend on the row index).  Same single pass.

        Returns
        -------
        self
        """
        self._validate_params()
        X, y, w = self._check_fit_input(X, y, sample_weight, multi_output=True, y_numeric=True)
        n_targets = 1 if y.ndim == 1 else y.shape[1]
        W, b = self._fit_targets(X, y, regression_targets, n_targets, w)
        if y.ndim == 1:
            self.coef_, self.intercept_ = W[:, 0], float(b[0])
        else:
            self.coef_, self.intercept_ = W.T.copy(), b
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class StreamingRidgeClassifier(CalibratedProbaMixin, LinearClassifierMixin, ClassifierMixin, _BaseStreamingRidge):
    """Regularized least-squares classifier (Rahimi & Recht's "Fourier+LS").

    Targets are +1 for a row's class and -1 otherwise (one column for two
    classes, one per class otherwise, i.e. one-vs-rest), fitted by
    :class:`StreamingRidge`'s single Gram pass; the class with the largest
    decision value wins.

    Parameters and attributes as :class:`StreamingRidge`, plus ``classes_`` and
    scoring : {"error_rate", "balanced_error", "roc_auc", "squared_error"}, default="error_rate"
        The CV score of an ``alpha`` list, rows weighted as in the fit.  "error_rate"
        (the error a user reads), "balanced_error" and "roc_auc" (two classes; exact
        up to ``cv_results_["auc_error_bound"]``) cost one more pass after the Gram
        pass, for any number of alphas (:mod:`rfstream.solvers.ridge.cv`);
        "squared_error" (on the +-1 targets) none.  A single alpha: one pass, no CV.
    class_weight : dict, "balanced" or None, default=None
        Multiplies the squared error of each row by the weight of its class (and by
        its ``sample_weight``), as ``sklearn.linear_model.RidgeClassifier``: a dict
        maps labels to weights (1 for a label it leaves out); "balanced" gives
        n / (n_classes * count(class)) from the unweighted class counts.  Applied as
        row weights in the same single pass.
    ``class_weight_`` is the weight of each class (ones without ``class_weight``).
    For dask ``y`` the classes (and counts) come from one ``da.unique`` reduction.

    Examples
    --------
    >>> StreamingRidgeClassifier().fit([[0.], [1.], [2.], [3.]], [0, 0, 1, 1]).predict([[0.2], [2.8]])
    array([0, 1])
    """

    _parameter_constraints: ClassVar[dict] = {
        **_BaseStreamingRidge._parameter_constraints,
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "scoring": [StrOptions(set(CLASSIFIER_SCORINGS))],
    }

    def __init__(self, alpha=1.0, *, fit_intercept=True, cv=5, random_state=0, solver="auto",
                 tol=1e-4, max_iter=200, pcg_rank=PCG_RANK, class_weight=None,
                 scoring="error_rate", select="cv", calibrate="auto"):
        super().__init__(alpha, fit_intercept=fit_intercept, cv=cv, random_state=random_state,
                         solver=solver, tol=tol, max_iter=max_iter, pcg_rank=pcg_rank, scoring=scoring,
                         select=select, calibrate=calibrate)
        self.class_weight = class_weight

    _fitted_rule = staticmethod(classifier_state)  # what a saved model's fitted state must hold

    def fit(self, X, y, sample_weight=None):
        """Fit on ``X`` (n, D) and labels ``y`` (n,), rows weighted by ``sample_weight``
        times ``class_weight`` (as :meth:`StreamingRidge.fit`)."""
        self._validate_params()
        X, y, w = self._check_fit_input(X, y, sample_weight)
        balanced = isinstance(self.class_weight, str)
        found = find_classes(y, name=type(self).__name__, return_counts=balanced)
        classes, counts = found if balanced else (found, None)
        self.classes_ = classes
        if self.scoring == "roc_auc" and classes.size != 2:
            raise ValueError(f"scoring='roc_auc' needs two classes; got {classes.size}. Use "
                             "scoring='error_rate' or 'balanced_error'.")
        cw = class_weights(self.class_weight, classes, counts)
        self.class_weight_ = np.ones(classes.size) if cw is None else cw
        n_targets = 1 if classes.size == 2 else classes.size
        weight_args = None if cw is None else {"classes": classes, "class_weight": cw}
        W, b = self._fit_targets(X, y, partial(ovr_targets, classes=classes), n_targets, w, weight_args)
        self.coef_, self.intercept_ = W.T.copy(), b
        return self
