"""What the ridge estimators choose after their Gram pass: (gamma, alpha) and the calibration.

:class:`RidgeSearchMixin` holds the steps of ``StreamingRidge``'s fit that follow
the statistics of the Gram pass (:mod:`rfstream.solvers.ridge`):

* ``select="cv"``: K-fold cross-validation from the per-fold partials
  (:mod:`rfstream.solvers.ridge_cv`, with a scoring pass for a classifier's
  metric) or exact leave-one-out (:mod:`rfstream.solvers.loo`, one more pass);
* ``select="evidence"``: the log marginal likelihood of every (gamma, alpha) from
  one eigendecomposition per gamma and no further pass
  (:mod:`rfstream.solvers.evidence`);
* ``calibrate``: one pass of exact leave-one-out residuals at the chosen model,
  kept as histograms, for a regressor's conformal intervals and posterior
  standard deviation, a classifier's Platt probabilities
  (:mod:`rfstream.solvers.calibration`, :mod:`rfstream.solvers.posterior`).
"""
from __future__ import annotations

import warnings

import numpy as np

from ..random import check_seed
from .calibration import calibration_pass, fit_platt, noise_variance, posterior_basis
from .evidence import (
    centred_target_energy,
    check_evidence_alphas,
    degrees_of_freedom,
    evidence_bases,
    evidence_table,
)
from .folds import check_cv
from .loo import loo_basis, loo_cross_validate, loo_solution
from .memory import use_loo_instead
from .ridge_cv import grid_cross_validate, warn_on_edge

#: ``calibrate="auto"`` calibrates a searched fit up to this width: the regressor keeps a
#: D x D float64 factor (128 MiB at 4096) in memory and in its model file.
CALIBRATE_MAX_FEATURES = 4096


class RidgeSearchMixin:
    """The search and calibration steps of the ridge estimators (module docstring)."""

    def _choose_cv(self, Z, y, n_groups, n_features, n_targets):
        """``"loo"`` or :func:`check_cv`'s ``(n_folds, scored, folds)``: exact leave-one-out
        when asked, and instead of an int ``cv`` whose per-fold Grams would not fit a worker
        while one Gram does (:func:`rfstream.solvers.memory.use_loo_instead`), with a warning;
        ``(1, 1, None)`` for the evidence (no folds)."""
        if self.select == "evidence":
            return 1, 1, None
        if isinstance(self.cv, str):
            return "loo"
        cv = check_cv(self.cv, Z, y)
        if use_loo_instead(self.cv, n_groups, cv[0], n_features, n_targets):
            warnings.warn(f"{cv[0]}-fold cross-validation needs {cv[0]} Grams of D={n_features} per "
                          "task, more than the workers' or the client's memory holds; using exact "
                          "leave-one-out from one Gram instead (cv='loo').", UserWarning, stacklevel=5)
            return "loo"
        return cv

    def _search(self, groups, y, stats, totals, alphas, cv, weights, target_fn):
        """``(chosen group, basis or None)``; sets ``cv_results_``, ``alphas_``, ``alpha_``,
        ``best_score_`` (``cv_mse_`` for CV), and with a gamma grid ``gammas_``,
        ``gamma_`` and the map set to the chosen gamma.  ``basis``: the chosen gamma's
        eigendecomposition when the route made one (evidence, leave-one-out: the fit is
        solved from it, no copy of the Gram)."""
        classes = getattr(self, "classes_", None)
        bases = None
        if self.select == "evidence":
            check_evidence_alphas(alphas)
            bases = evidence_bases(totals, alphas, self.fit_intercept, loo_basis)
            table, best = evidence_table(bases, totals, alphas, fit_intercept=self.fit_intercept,
                                         gammas=groups.gammas)
            table = {**table, "scoring": "log_evidence", "mean_score": table["log_evidence"],
                     "std_score": np.full(table["alpha"].size, np.nan), "cv": "evidence"}
            if hasattr(self, "cv_mse_"):
                del self.cv_mse_
        elif cv == "loo":
            table, self.cv_mse_, best, bases = loo_cross_validate(
                groups, y, totals, alphas, weights, target_fn=target_fn, scoring=self.scoring,
                classes=classes, fit_intercept=self.fit_intercept)
        else:
            table, self.cv_mse_, best = grid_cross_validate(
                groups, y, stats, totals, alphas, cv, weights, scoring=self.scoring, classes=classes,
                fit_intercept=self.fit_intercept, seed=check_seed(self.random_state))
        chosen = self._record_choice(groups, alphas, table, best)
        return chosen, None if bases is None else bases[chosen]  # None: Cholesky, no eigh made

    def _record_choice(self, groups, alphas, table, best):
        """Set ``alphas_``, ``cv_results_``, ``alpha_`` and ``best_score_`` of the candidate
        ``best`` of ``table`` (warning when it is on a grid's edge), with a gamma grid
        ``gammas_``, ``gamma_`` and the map set to the chosen gamma, with a list of sizes
        ``n_components_``; returns the chosen group's index."""
        self.alphas_, self.cv_results_ = alphas, table
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
            self.n_components_ = int(groups.sizes[chosen])
        elif hasattr(self, "n_components_"):
            del self.n_components_
        if groups.select is not None:
            groups.select(chosen)
        return chosen

    def _solution(self, basis, total, solve_stats):
        """``(W, b)`` at the chosen alpha: from the eigendecomposition the search made, else
        by Cholesky from the chosen gamma's totals (``solve_stats``)."""
        if basis is not None:
            return loo_solution(basis, self.alpha_)
        return solve_stats(total, self.alpha_)

    def _calibrates(self, searching, n_features, iterative):
        """Whether this fit makes the calibration pass (``calibrate``, module docstring)."""
        if self.calibrate == "auto":
            return searching and not iterative and n_features <= CALIBRATE_MAX_FEATURES
        if self.calibrate and iterative:
            raise ValueError(f"calibrate=True needs the Gram solver (the posterior is its D x D factor); "
                             f"got solver={self.solver!r}. Use solver='gram', or calibrate=False.")
        return bool(self.calibrate)

    def _calibrate(self, groups, chosen, y, target_fn, weights, W, b, basis, total):
        """The calibration pass and what the model keeps of it (module docstring); ``basis``:
        the chosen gamma's eigendecomposition, or None to make it from ``total`` (whose Gram
        it consumes)."""
        basis = basis if basis is not None else loo_basis(total, self.fit_intercept)
        classifier = hasattr(self, "classes_")
        noise = noise_variance(basis, centred_target_energy(total, self.fit_intercept),
                               degrees_of_freedom(total, self.fit_intercept), self.alpha_)
        F = posterior_basis(basis, self.alpha_)
        model = {"W": W, "b": b, "F": F, "mu": basis["mu"], "inv_n": float(basis["inv_n"]), "noise": noise}
        counts = calibration_pass(groups, chosen, y, target_fn, weights, model, classifier=classifier,
                                  seed=check_seed(self.random_state))
        if classifier:
            self.platt_ = np.array([fit_platt(column) for column in counts])
        else:
            self.posterior_factor_, self.feature_mean_ = F, basis["mu"]
            self.noise_variance_, self.inverse_weight_ = noise, float(basis["inv_n"])
            self.conformal_counts_ = counts

    def _forget_calibration(self):
        for name in ("platt_", "posterior_factor_", "feature_mean_", "noise_variance_", "inverse_weight_",
                     "conformal_counts_"):
            if hasattr(self, name):
                delattr(self, name)
