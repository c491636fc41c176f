"""The options of ``rfstream fit``, each named once.

Who takes an option, and which estimator parameter it sets, is the library's
(:data:`rfstream.catalog.PARAMETERS`, routed by :func:`rfstream.catalog.route` for the
API and the CLI alike).  Here, one row per option adds what only a command line needs:
how the text is parsed and a help text without the default; the flag is the name with
dashes (``ridge_solver``: ``--ridge-solver``).  The parser (:func:`add_fit_options`),
the applicability check (:func:`split_params`) and the defaults shown in ``--help``
are generated from :data:`FIT_OPTIONS`.  Those defaults are the estimators'
(:func:`default_text` reads them), written out in :mod:`rfstream.cli.names` so that the
parser is built without importing an estimator; the library is imported by the
functions that need it (:func:`split_params`, the types of ``--gamma`` and
``--n-components`` read with :mod:`rfstream.param_lists`).  A new option of a feature
map or solver is one row in each table (and its default in :mod:`rfstream.cli.names`).
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass

from . import names
from .arguments import with_default
from .words import as_flags


class UserError(ValueError):
    """A problem with the command's input that the user can fix."""


@dataclass(frozen=True)
class Option:
    """One command-line option of ``rfstream fit``: the library's named option ``name``
    (:class:`rfstream.catalog.Parameter`: ``param``, ``target``, ``solvers``, ``shared``,
    ``default``) with what the command line adds.  ``default_note`` replaces the default
    shown in ``--help``."""

    name: str
    help: str
    type: object = None
    choices: tuple | None = None
    default_note: str | None = None
    metavar: str | None = None

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")

    @property
    def dest(self):
        return self.name

    @property
    def row(self):
        from ..catalog import PARAMETERS

        return PARAMETERS[self.name]

    param = property(lambda self: self.row.parameter)
    target = property(lambda self: self.row.target)
    solvers = property(lambda self: self.row.solvers)
    shared = property(lambda self: self.row.shared)
    default = property(lambda self: self.row.default)


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


def _calibrate(text):
    """argparse type of ``--calibrate``: auto, true or false (the estimators' "auto", True, False)."""
    words = {"auto": "auto", "true": True, "false": False}
    if text.lower() not in words:
        raise argparse.ArgumentTypeError(f"--calibrate must be auto, true or false; got {text!r}")
    return words[text.lower()]


def _gamma(text):
    """argparse type of ``--gamma``: a number, 'auto', 'auto*F', 'paper' (cnm) or a comma
    list of the first three (a bandwidth grid, :mod:`rfstream.features.grid`)."""
    if text in ("paper", "auto"):  # "auto" also as argparse's default: no import for it
        return text
    from ..param_lists import gamma_items, item_label

    try:
        items, is_grid = gamma_items(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    values = [item if isinstance(item, float) else item_label(item) for item in items]
    return values if is_grid else values[0]


def _sizes(text):
    """``--n-components``: one int, or a comma list of them (:func:`rfstream.param_lists.component_sizes`)."""
    from ..param_lists import component_sizes

    try:
        sizes = component_sizes(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return list(sizes) if "," in text else sizes[0]


FIT_OPTIONS = (
    Option("n_components", "output features D (tefm: l; eerf/lkrf: M; ses: M "
           "frequencies), or a comma list, e.g. 500,1000,2000: the largest map drawn once and every "
           "size searched with --alpha (and a --gamma grid) from the same pass (maps whose features hold "
           "their smaller maps: rff, circulant, fastfood, arccos; --solver ridge)", type=_sizes),
    Option("kernel", "kernel of the random features", choices=names.KERNELS, default_note="the map's own: gaussian, laplacian for rff+binning"),
    Option("gamma", "kernel bandwidth: a number, 'auto' (the papers' nearest-neighbour "
           "rule), 'auto*F' (F x 'auto'), for cnm 'paper' (its Section 7 rule, 4 x 'auto'), or a comma "
           "list of these, e.g. auto*0.25,auto,auto*4: a grid searched with --alpha by cross-validation "
           "(rff and binning: every gamma in the same two passes; tefm, ses, eerf, lkrf: one fit per gamma; "
           "--solver ridge)", type=_gamma),
    Option("sampler", "frequency sampler", choices=names.SAMPLERS),
    Option("variant", "cos features, or cos and sin pairs", choices=("cos", "cossin")),
    Option("n_random_features", "tefm: random Fourier features d", type=int, default_note="4 x --n-components"),
    Option("power_iter", "tefm: power iterations q", type=int),
    Option("n_candidates", "eerf/lkrf: candidate features M0", type=int, default_note="10 x --n-components"),
    Option("subsample", "eerf/lkrf: fraction of the rows scored, in (0, 1]", type=float),
    Option("base", "eerf/lkrf: candidate features", choices=("fourier", "arccos0", "arccos1", "arccos2", "linear")),
    Option("score_mode", "eerf/lkrf: label score centred per class (balanced) or "
           "eq. 7 as printed (raw)", choices=("balanced", "raw")),
    Option("rho", "lkrf: chi-square divergence bound of the feature weights", type=float),
    Option("degree", "arccos: kernel degree 0, 1 or 2; polysketch: the polynomial's degree", type=int),
    Option("landmarks", "nystroem: landmarks sampled uniformly (one pass) or by approximate ridge leverage "
           "scores (two passes; lower kernel-approximation error, higher classifier test error in "
           "docs/nystroem.md)", choices=("uniform", "leverage")),
    Option("coef0", "polysketch: the constant c of (gamma <x, y> + c)^degree", type=float),
    Option("sample_steps", "chi2: sampling steps of the chi-squared kernel's Fourier transform", type=int),
    Option("sample_interval", "chi2: sampling interval (required for --sample-steps above 3)", type=float),
    Option("skewedness", "skewed-chi2: the kernel's skewedness c (input must exceed -c)", type=float),
    Option("n_pairs", "ses: sketch size r, pairs of rows", type=int, default_note="max(4 x --n-components, 1024)"),
    Option("reg", "ses: lambda_beta, a positive number or 'auto' (tuned on held-out pairs)", type=positive_or("--reg")),
    Option("weights", "ses: shrinkage weights, Bayesian Quadrature, or uniform (MC/QMC)", choices=("ses", "bq", "uniform")),
    Option("n_grids", "binning, rff+binning: random grids P", type=int),
    Option("n_bins", "binning, rff+binning: hashed bins per grid", type=int),
    Option("objective", "cnm: learn the map for the classifier or to approximate the "
           "kernel", choices=("classification", "kernel")),
    Option("structure", "cnm: dense projection or circulant r learned by FFT gradients", choices=("dense", "circulant")),
    Option("theta_step", "cnm: SGD step of the map (the first one with "
           "--theta-schedule decay)", type=float, default_note="0.2; 2.0 for --objective kernel"),
    Option("theta_schedule", "cnm: a constant map step, or decay: "
           "theta_step / (1 + t / theta_t0), t counted in map steps", choices=("constant", "decay")),
    Option("theta_t0", "cnm: t0 of --theta-schedule decay", type=float),
    Option("cnm_max_iter", "cnm: most rounds of w-steps and map steps (early stopping may end "
           "sooner)", type=int),
    Option("multiclass", "cnm, more than two classes: multi-class hinge, one-vs-rest "
           "hinge or softmax loss", choices=("crammer-singer", "ovr", "multinomial")),
    Option("alpha", "regularization: ridge, a value or a comma-separated list (K-fold CV "
           "in the same pass); sgd, lambda of the regularized risk", type=_number_list("--alpha")),
    Option("loss", "sgd classification loss (hinge: Pegasos)", choices=("hinge", "log_loss", "squared_hinge")),
    Option("epochs", "sgd: passes over the data", type=int),
    Option("sgd_solver", "sgd: streaming SGD steps, newton (one gradient + Hessian "
           "pass per iteration; exact, any row order), or auto (newton on at most 128 features "
           "when the loss allows it, else sgd)", choices=("auto", "sgd", "newton")),
    Option("cv", "ridge: folds of the cross-validation over a list of --alpha or --gamma, "
           "or loo: exact leave-one-out from one Gram (O(D^2) memory instead of O(folds D^2); also "
           "chosen, with a warning, when the folds' Grams would not fit a worker)", type=_folds),
    Option("ridge_solver", "ridge: gram (one D x D Gram pass; cross-validation), pcg "
           "(Nystrom-preconditioned conjugate gradients, a pass per iteration, memory O(D x "
           "--pcg-rank): for D past the Gram's memory; one --alpha), cg (Jacobi-preconditioned, for "
           "wide sparse features), or auto (cg for sparse features wider than 4096, else gram)", choices=("auto", "gram", "cg", "pcg")),
    Option("pcg_rank", "ridge --ridge-solver pcg: rank r of the preconditioner "
           "(2 r rows sampled)", type=int),
    Option("pca_components", "kpca: principal components kept (at most --n-components)", type=int),
    Option("pca_variance", "kpca: keep the fewest components reaching this fraction of the variance, in (0, 1]",
           type=float),
    Option("pca_method", "kpca: one Gram pass and an eigendecomposition, or the randomized range finder "
           "(2 + power iterations passes, for widths past the Gram's memory)", choices=("auto", "gram", "randomized")),
    Option("cg_max_iter", "ridge cg/pcg: most iterations (one pass each)", type=int),
    Option("cg_tol", "ridge cg/pcg: stop at this relative residual of the normal equations", type=float),
    Option("scoring", "ridge: the CV score of a list of --alpha: error_rate (one more "
           "pass), balanced_error, roc_auc (two classes), or squared_error (from the Gram pass; "
           "regression's only score)", choices=("error_rate", "balanced_error", "roc_auc", "squared_error")),
    Option("select", "ridge: how a list of --alpha (and a --gamma grid) is searched: cv "
           "(cross-validation, --cv and --scoring), or evidence (the log marginal likelihood of ridge "
           "as Bayesian linear regression, noise variance in closed form: no folds and no scoring pass; "
           "every alpha > 0; --ridge-solver gram)", choices=("cv", "evidence")),
    Option("calibrate", "ridge: one more pass of exact leave-one-out residuals at the chosen model, "
           "for a regressor's posterior std and conformal intervals (rfstream predict --std, --interval) "
           "and a classifier's Platt probabilities (predict --scores, evaluate's log_loss); auto: when a "
           "search runs (a list of --alpha, a --gamma grid, or --select evidence) with the Gram solver "
           f"and at most {names.CALIBRATE_MAX_FEATURES} features", type=_calibrate, choices=("auto", True, False),
           metavar="{auto,true,false}"),
    Option("random_state", "seed of every random draw", type=int),
)


def takers(option):
    """``(name, class)`` of every estimator that has ``option.param`` (:func:`rfstream.catalog.takers`)."""
    from ..catalog import takers as catalog_takers

    return catalog_takers(option.name)


def default_text(option):
    """The default shown in ``--help``: the CLI's own, else the estimators' (per estimator
    when they differ).  Imports the estimators: ``--help`` shows the same text from
    :data:`rfstream.cli.names.HELP_DEFAULTS` (:func:`help_default`)."""
    from ..catalog import defaults_of

    if option.default_note is not None:
        return option.default_note
    if option.default is not None:
        return str(option.default)
    values = {}
    for name, cls in takers(option):
        values.setdefault(repr(defaults_of(cls)[option.param]), []).append(name)
    if len(values) == 1:
        return next(iter(values)).strip("'")
    solvers = [[name.split(" ")[0] for name in names] for names in values.values()]
    by_task = len({s for names in solvers for s in names}) < sum(len(set(names)) for names in solvers)
    return "; ".join(f"{'/'.join(dict.fromkeys(_taker_label(n, by_task) for n in names))}: {value.strip(chr(39))}"
                     for value, names in values.items())


def _taker_label(name, by_task):
    """``ridge (classification)`` as ``ridge classifier`` where one solver's default differs by
    task (``by_task``), else as ``ridge``."""
    solver, _, task = name.partition(" ")
    return f"{solver} {TASK_NOUNS.get(task, task).strip()}".strip() if by_task else solver


TASK_NOUNS = {"(classification)": "classifier", "(regression)": "regressor"}


def help_default(option):
    """The default ``--help`` shows: :func:`default_text`, as written in :mod:`rfstream.cli.names`."""
    return option.default_note if option.default_note is not None else names.HELP_DEFAULTS[option.name]


def add_fit_options(parser):
    """One argparse argument per row of :data:`FIT_OPTIONS`, defaults in the help; no estimator
    is imported (the defaults of :mod:`rfstream.cli.names`)."""
    for option in FIT_OPTIONS:
        kwargs = {"help": with_default(option.help, help_default(option)),
                  "default": names.FIT_DEFAULTS.get(option.name)}
        if option.choices:
            kwargs["choices"] = option.choices
        if option.type is not None:
            kwargs["type"] = option.type
        if option.metavar is not None:
            kwargs["metavar"] = option.metavar
        parser.add_argument(option.flag, **kwargs)


#: the library's words for a parameter, and the command line's for the same thing
CLI_WORDS = (("report=True", "--report"), ("scores=True", "--scores"), ("solver='ridge'", "--solver ridge"),
             ("name the label array with y_array= and the task with task=", "--y-array names the labels, "
              "--task the task"), ("solver=None for a transformer", "--solver none for a transformer"),
             ("a transformer (fitted with solver=None)", "a transformer (fitted with --solver none)"),
             ("task='regression'", "--task regression"), ("calibrate=True", "--calibrate true"),
             ("calibrate=False", "--calibrate false"), ("calibrate='auto'", "--calibrate auto"),
             ("select='evidence'", "--select evidence"), ("select='cv'", "--select cv"),
             ("solver='gram'", "--ridge-solver gram"),
             ("return_std and predict_interval", "--std and --interval"))


def printable(text):
    """``text`` with every character a terminal would act on (controls, escapes, bidi
    overrides such as U+202E) written as its Python escape: names read from a dataset or
    a model reach the terminal as text."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def cli_message(message):
    """A library error message with the parameters it names said as flags: ``P (CLI: F)``
    becomes ``F``, the phrases of :data:`CLI_WORDS` their flags, and every other parameter
    of ``rfstream fit`` its flag (:func:`rfstream.cli.words.as_flags`: ``cv='loo'`` is
    ``--cv loo``)."""
    message = re.sub(r"[\w.=']+ \(CLI: ([^)]+)\)", r"\1", message)
    message = re.sub(r"\(([^()]*?)[,;]? ?CLI: ([^)]+)\)", r"(\2)", message)
    for library, cli in CLI_WORDS:
        message = message.replace(library, cli)
    return printable(as_flags(message))


def flag_error(error):
    """A :class:`rfstream.catalog.NotApplicable` said with the command line's flags."""
    flag = "--" + error.name.replace("_", "-")
    if error.features is not None:
        return UserError(f"{flag} does not apply to --features {error.features}.")
    return UserError(f"{flag} does not apply to {error.solver}; it is an option of --solver "
                     f"{', '.join(error.takers)}.")


def split_params(args, features, solver, task):
    """``(feature_params, solver_params)`` from the parsed arguments, by the library's one
    router (:func:`rfstream.catalog.route`); an option given for a map or solver that does
    not take it is a :class:`UserError` naming its flag."""
    from ..catalog import NotApplicable, route

    try:
        return route(features, solver, task, {o.name: getattr(args, o.dest) for o in FIT_OPTIONS})
    except NotApplicable as error:
        raise flag_error(error) from None
