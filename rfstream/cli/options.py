"""The options of ``rfstream fit``, each named once.

One row per estimator parameter the command line sets: its flag, how the text is
parsed, who takes it, and a help text without the default.  The parser
(:func:`add_fit_options`), the applicability check (:func:`split_params`) and the
defaults shown in ``--help`` (read from the estimators, :func:`default_text`) are
generated from :data:`FIT_OPTIONS`.  A new option of a feature map or solver is one
row here; nothing else in the CLI changes.
"""
from __future__ import annotations

import argparse
import functools
from dataclasses import dataclass

from ..features.grid import gamma_items, item_label
from ..kernels import KERNELS
from ..pipeline import (
    FEATURES,
    FIT_DEFAULTS,
    SOLVERS,
    TASKS,
    feature_map_class,
    solver_class,
)
from ..samplers import SAMPLERS
from .arguments import with_default


class UserError(ValueError):
    """A problem with the command's input that the user can fix."""


@dataclass(frozen=True)
class Option:
    """One command-line option of ``rfstream fit``.

    ``target`` is "features" (a feature-map parameter, refused by maps that do not
    take it), "solver" (a solver parameter; ``solvers`` limits it to some
    ``--solver`` names) or "both" (given to every estimator that takes it).  A
    ``shared`` option is one most maps take: at that value (its usual default) it is
    silently left out for a map without it.  ``default`` is the command line's own default when
    it differs from the estimators' (:data:`rfstream.pipeline.FIT_DEFAULTS`);
    ``default_note`` replaces the default shown in ``--help``.
    """

    param: str
    flag: str
    help: str
    target: str = "features"
    type: object = None
    choices: tuple | None = None
    shared: object = None
    solvers: tuple | None = None
    default: object = None
    default_note: str | None = None

    @property
    def dest(self):
        return self.flag[2:].replace("-", "_")


def _number_list(flag):
    """argparse type: a non-negative number or a comma-separated list of them."""

    def parse(text):
        try:
            values = [float(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} must be a number or a comma-separated list; got {text!r}") from None
        if not values or any(v < 0 for v in values):
            raise argparse.ArgumentTypeError(f"{flag} values must be >= 0; got {text!r}")
        return values[0] if len(values) == 1 else values

    return parse


def positive_or(flag, words=("auto",)):
    """argparse type: a positive float or one of ``words``."""

    def parse(text):
        if text in words:
            return text
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{flag} must be a positive number or {' or '.join(map(repr, words))}; got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{flag} must be positive; got {text!r}")
        return value

    return parse


def _folds(text):
    """argparse type of ``--cv``: an int >= 2 or 'loo'."""
    if text == "loo":
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"--cv must be an int >= 2 or 'loo'; got {text!r}")
    return value


def _gamma(text):
    """argparse type of ``--gamma``: a number, 'auto', 'auto*F', 'paper' (cnm) or a comma
    list of the first three (a bandwidth grid, :mod:`rfstream.features.grid`)."""
    if text == "paper":
        return text
    try:
        items, is_grid = gamma_items(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    values = [item if isinstance(item, float) else item_label(item) for item in items]
    return values if is_grid else values[0]


FIT_OPTIONS = (
    Option("n_components", "--n-components", "output features D (tefm: l; eerf/lkrf: M; ses: M "
           "frequencies)", type=int, shared=FIT_DEFAULTS["n_components"], default=FIT_DEFAULTS["n_components"]),
    Option("kernel", "--kernel", "kernel of the random features", choices=tuple(sorted(KERNELS)),
           shared="gaussian", default_note="the map's own: gaussian, laplacian for rff+binning"),
    Option("gamma", "--gamma", "kernel bandwidth: a number, 'auto' (the papers' nearest-neighbour "
           "rule), 'auto*F' (F x 'auto'), for cnm 'paper' (its Section 7 rule, 4 x 'auto'), or a comma "
           "list of these, e.g. auto*0.25,auto,auto*4: a grid searched with --alpha by cross-validation "
           "(rff and binning: every gamma in the same two passes; tefm, ses, eerf, lkrf: one fit per gamma; "
           "--solver ridge)",
           type=_gamma, shared="auto", default=FIT_DEFAULTS["gamma"]),
    Option("sampler", "--sampler", "frequency sampler", choices=tuple(sorted(SAMPLERS)), shared="mc"),
    Option("variant", "--variant", "cos features, or cos and sin pairs", choices=("cos", "cossin"),
           shared="cos"),
    Option("n_random_features", "--n-random-features", "tefm: random Fourier features d", type=int,
           default_note="4 x --n-components"),
    Option("n_power_iter", "--power-iter", "tefm: power iterations q", type=int),
    Option("n_candidates", "--n-candidates", "eerf/lkrf: candidate features M0", type=int,
           default_note="10 x --n-components"),
    Option("subsample", "--subsample", "eerf/lkrf: fraction of the rows scored, in (0, 1]", type=float),
    Option("base", "--base", "eerf/lkrf: candidate features",
           choices=("fourier", "arccos0", "arccos1", "arccos2", "linear")),
    Option("score_mode", "--score-mode", "eerf/lkrf: label score centred per class (balanced) or "
           "eq. 7 as printed (raw)", choices=("balanced", "raw")),
    Option("rho", "--rho", "lkrf: chi-square divergence bound of the feature weights", type=float),
    Option("degree", "--degree", "arccos: kernel degree 0, 1 or 2", type=int),
    Option("n_pairs", "--n-pairs", "ses: sketch size r, pairs of rows", type=int,
           default_note="max(4 x --n-components, 1024)"),
    Option("reg", "--reg", "ses: lambda_beta, a positive number or 'auto' (tuned on held-out pairs)",
           type=positive_or("--reg")),
    Option("weights", "--weights", "ses: shrinkage weights, Bayesian Quadrature, or uniform (MC/QMC)",
           choices=("ses", "bq", "uniform")),
    Option("n_grids", "--n-grids", "binning, rff+binning: random grids P", type=int),
    Option("n_bins", "--n-bins", "binning, rff+binning: hashed bins per grid", type=int),
    Option("objective", "--objective", "cnm: learn the map for the classifier or to approximate the "
           "kernel", choices=("classification", "kernel")),
    Option("structure", "--structure", "cnm: dense projection or circulant r learned by FFT gradients",
           choices=("dense", "circulant")),
    Option("theta_step", "--theta-step", "cnm: SGD step of the map (the first one with "
           "--theta-schedule decay)", type=float, default_note="0.2; 2.0 for --objective kernel"),
    Option("theta_schedule", "--theta-schedule", "cnm: a constant map step, or decay: "
           "theta_step / (1 + t / theta_t0), t counted in map steps", choices=("constant", "decay")),
    Option("theta_t0", "--theta-t0", "cnm: t0 of --theta-schedule decay", type=float),
    Option("multiclass", "--multiclass", "cnm, more than two classes: multi-class hinge, one-vs-rest "
           "hinge or softmax loss", choices=("crammer-singer", "ovr", "multinomial")),
    Option("alpha", "--alpha", "regularization: ridge, a value or a comma-separated list (K-fold CV "
           "in the same pass); sgd, lambda of the regularized risk", target="solver",
           type=_number_list("--alpha")),
    Option("loss", "--loss", "sgd classification loss (hinge: Pegasos)", target="solver",
           choices=("hinge", "log_loss", "squared_hinge"), solvers=("sgd",)),
    Option("max_iter", "--epochs", "sgd: passes over the data", target="solver", type=int,
           solvers=("sgd",)),
    Option("solver", "--sgd-solver", "sgd: streaming SGD steps, newton (one gradient + Hessian "
           "pass per iteration; exact, any row order), or auto (newton on at most 128 features "
           "when the loss allows it, else sgd)", target="solver",
           choices=("auto", "sgd", "newton"), solvers=("sgd",)),
    Option("cv", "--cv", "ridge: folds of the cross-validation over a list of --alpha or --gamma, "
           "or loo: exact leave-one-out from one Gram (O(D^2) memory instead of O(folds D^2); also "
           "chosen, with a warning, when the folds' Grams would not fit a worker)", target="solver",
           type=_folds, solvers=("ridge",)),
    Option("solver", "--ridge-solver", "ridge: gram (one D x D Gram pass; cross-validation), pcg "
           "(Nystrom-preconditioned conjugate gradients, a pass per iteration, memory O(D x "
           "--pcg-rank): for D past the Gram's memory; one --alpha), cg (Jacobi-preconditioned, for "
           "wide sparse features), or auto (cg for sparse features wider than 4096, else gram)",
           target="solver", choices=("auto", "gram", "cg", "pcg"), solvers=("ridge",)),
    Option("pcg_rank", "--pcg-rank", "ridge --ridge-solver pcg: rank r of the preconditioner "
           "(2 r rows sampled)", target="solver", type=int, solvers=("ridge",)),
    Option("max_iter", "--cg-max-iter", "ridge cg/pcg: most iterations (one pass each)",
           target="solver", type=int, solvers=("ridge",)),
    Option("tol", "--cg-tol", "ridge cg/pcg: stop at this relative residual of the normal equations",
           target="solver", type=float, solvers=("ridge",)),
    Option("scoring", "--scoring", "ridge: the CV score of a list of --alpha: error_rate (one more "
           "pass), balanced_error, roc_auc (two classes), or squared_error (from the Gram pass; "
           "regression's only score)", target="solver",
           choices=("error_rate", "balanced_error", "roc_auc", "squared_error"), solvers=("ridge",)),
    Option("random_state", "--random-state", "seed of every random draw", target="both", type=int,
           default=FIT_DEFAULTS["random_state"]),
)


def takers(option):
    """``(name, class)`` of every estimator that has ``option.param``."""
    if option.target == "features":
        pairs = [(name, feature_map_class(name)) for name in FEATURES]
    else:
        pairs = [(f"{name} ({task})", solver_class(name, task)) for name in SOLVERS for task in TASKS
                 if option.solvers is None or name in option.solvers]
        if option.target == "both":
            pairs += [(name, feature_map_class(name)) for name in FEATURES]
    return [(name, cls) for name, cls in pairs if option.param in defaults_of(cls)]


@functools.cache
def defaults_of(cls):
    """``cls()``'s parameters (read once per class: the parser asks for every option)."""
    return cls().get_params()


def default_text(option):
    """The default shown in ``--help``: the CLI's own, else the estimators' (per estimator
    when they differ)."""
    if option.default_note is not None:
        return option.default_note
    if option.default is not None:
        return str(option.default)
    values = {}
    for name, cls in takers(option):
        values.setdefault(repr(defaults_of(cls)[option.param]), []).append(name.split(" ")[0])
    if len(values) == 1:
        return next(iter(values)).strip("'")
    return "; ".join(f"{'/'.join(dict.fromkeys(names))}: {value.strip(chr(39))}"
                     for value, names in values.items())


def add_fit_options(parser):
    """One argparse argument per row of :data:`FIT_OPTIONS`, defaults in the help."""
    for option in FIT_OPTIONS:
        kwargs = {"help": with_default(option.help, default_text(option)), "default": option.default}
        if option.choices:
            kwargs["choices"] = option.choices
        if option.type is not None:
            kwargs["type"] = option.type
        parser.add_argument(option.flag, **kwargs)


def split_params(args, features, solver, task):
    """``(feature_params, solver_params)`` from the parsed arguments.

    An option given for a map or solver that does not take it is a :class:`UserError`
    naming its flag; a ``shared`` option at its default is dropped for a map without it.
    """
    map_params = feature_map_class(features)().get_params()
    solver_cls = solver_class(solver, task)
    solver_params = solver_cls().get_params()
    to_map, to_solver = {}, {}
    for option in FIT_OPTIONS:
        value = getattr(args, option.dest)
        if value is None:
            continue
        if option.target in ("features", "both") and option.param in map_params:
            to_map[option.param] = value
        elif option.target == "features" and value != option.shared:
            raise UserError(f"{option.flag} does not apply to --features {features}.")
        if option.target in ("solver", "both"):
            if option.param in solver_params and (option.solvers is None or solver in option.solvers):
                to_solver[option.param] = value
            elif option.target == "solver":
                names = ", ".join(dict.fromkeys(n for n, _ in takers(option)))
                raise UserError(f"{option.flag} does not apply to {solver_cls.__name__}; it is an "
                                f"option of --solver {names}.")
    return to_map, to_solver
