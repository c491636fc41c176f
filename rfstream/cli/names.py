"""What ``--help`` shows of the library, written out so that no estimator is imported for it.

The parser of every subcommand is built from these tables and from
:mod:`rfstream.cli.arguments` and :mod:`rfstream.cli.options`, none of which imports
scikit-learn, dask.array, distributed, scipy or zarr: ``rfstream --version``, ``--help``,
``rfstream fit --help`` and an argument error cost Python and argparse, not the
estimators (the command itself imports them when it runs).  Each value here is the
library's, copied: ``tests/test_cli_startup.py`` checks every one against the library
(the registries of :mod:`rfstream.catalog`, the estimators' defaults read by
:func:`rfstream.cli.options.default_text`) and prints the corrected table when one
differs, e.g. after a map or solver is added to the catalog.
"""

#: names of :data:`rfstream.catalog.FEATURES`, sorted
FEATURES = ("arccos", "binning", "chi2", "circulant", "cnm", "eerf", "lkrf", "nystroem", "polysketch", "rff",
            "rff+binning", "ses", "skewed-chi2", "tefm-g", "tefm-s")
#: names of :data:`rfstream.catalog.SOLVERS`, sorted
SOLVERS = ("kpca", "ridge", "sgd")
#: :data:`rfstream.catalog.TASKS`
TASKS = ("classification", "regression")
#: names of :data:`rfstream.kernels.KERNELS` and :data:`rfstream.samplers.SAMPLERS`, sorted
KERNELS = ("cauchy", "gaussian", "laplacian")
SAMPLERS = ("mc", "orthogonal", "qmc")
#: :data:`rfstream.cluster.PROGRESS_MODES`
PROGRESS_MODES = ("auto", "always", "never")
#: :data:`rfstream.solvers.ridge.estimators.CALIBRATE_MAX_FEATURES`
CALIBRATE_MAX_FEATURES = 4096
#: :data:`rfstream.catalog.FIT_DEFAULTS`: the defaults of ``rfstream fit`` that are not the estimators'
FIT_DEFAULTS = {"n_components": 1000, "gamma": "auto", "random_state": 0}

#: the default ``rfstream fit --help`` shows for each option without a ``default_note``:
#: :func:`rfstream.cli.options.default_text`, read from the estimators
HELP_DEFAULTS = {
    "n_components": "1000",
    "gamma": "auto",
    "sampler": "mc",
    "variant": "cos",
    "power_iter": "1",
    "subsample": "0.1",
    "base": "fourier",
    "score_mode": "balanced",
    "rho": "1.0",
    "degree": "arccos: 1; polysketch: 2",
    "landmarks": "uniform",
    "coef0": "0",
    "sample_steps": "2",
    "sample_interval": "None",
    "skewedness": "1.0",
    "reg": "auto",
    "weights": "ses",
    "n_grids": "50",
    "n_bins": "64",
    "objective": "classification",
    "structure": "dense",
    "theta_schedule": "constant",
    "theta_t0": "100.0",
    "cnm_max_iter": "200",
    "multiclass": "crammer-singer",
    "alpha": "ridge: 1.0; sgd: 0.0001",
    "loss": "hinge",
    "epochs": "20",
    "sgd_solver": "auto",
    "cv": "5",
    "ridge_solver": "auto",
    "pcg_rank": "2048",
    "pca_components": "10",
    "pca_variance": "None",
    "pca_method": "auto",
    "cg_max_iter": "200",
    "cg_tol": "0.0001",
    "scoring": "ridge classifier: error_rate; ridge regressor: squared_error",
    "select": "cv",
    "calibrate": "auto",
    "random_state": "0",
}
