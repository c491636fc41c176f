"""Every named option of a fit, written once; the names of the registries it routes to.

One :class:`Option` row per option: the keyword of :func:`rfstream.pipeline.fit_dataset`
and, spelt with dashes, the flag of ``rfstream fit``; the estimator parameter it sets and
who takes it; its default, choices, command-line type and help.  :mod:`rfstream.catalog`
routes by it and :mod:`rfstream.cli` builds its parser from it.  The registries name their
classes by dotted path, so that this module imports no estimator (``rfstream --help``).
:class:`ParameterMixin` (:class:`ParameterError`, ...) names the parameters an error is about as
data, for the CLI to say as flags.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

#: ``features`` name -> dotted path of the feature map's class, or (path, parameters it fixes)
FEATURES = {
    "rff": "rfstream.features.RandomFourierFeatures",
    "tefm-g": ("rfstream.datadriven.TEFM", {"method": "gaussian"}),  # n_components is l, n_random_features d
    "tefm-s": ("rfstream.datadriven.TEFM", {"method": "srht"}),
    "eerf": "rfstream.datadriven.EERFFeatures",  # n_components is M, n_candidates M0
    "lkrf": "rfstream.datadriven.LKRFFeatures",
    "arccos": "rfstream.features.ArcCosineFeatures",
    "ses": "rfstream.datadriven.SESFeatures",  # n_components is M frequencies (2 M columns)
    "binning": "rfstream.features.RandomBinningFeatures",  # Laplacian kernel, sparse; no n_components
    "rff+binning": "rfstream.features.FourierBinningFeatures",
    "cnm": "rfstream.datadriven.CompactNonlinearMap",  # learned with the labels, then the solver is refitted
    "circulant": "rfstream.features.CirculantFeatures",
    "nystroem": "rfstream.datadriven.NystroemFeatures",
    "polysketch": "rfstream.features.PolynomialCountSketch",  # (gamma <x, y> + coef0)^degree by TensorSketch
    "chi2": "rfstream.features.AdditiveChi2Sampler",  # histograms: non-negative input, deterministic
    "skewed-chi2": "rfstream.features.SkewedChi2Sampler",  # histograms: input > -skewedness
}
#: ``solver`` name -> dotted path of the estimator per task, or of one transformer for every task
SOLVERS = {
    "ridge": {"classification": "rfstream.solvers.StreamingRidgeClassifier",
              "regression": "rfstream.solvers.StreamingRidge"},
    "sgd": {"classification": "rfstream.solvers.StreamingSGDClassifier",
            "regression": "rfstream.solvers.StreamingSGDRegressor"},
    "kpca": "rfstream.solvers.kpca.KernelPCA",  # a transformer: kernel PCA of the map's features
}
TASKS = ("classification", "regression")
#: names of the kernels (:mod:`rfstream.kernels`) and of the frequency samplers (:mod:`rfstream.samplers`)
KERNELS = ("gaussian", "laplacian", "cauchy")
SAMPLERS = ("mc", "orthogonal", "qmc")
#: the devices a job runs on ("auto": cuda where cupy finds a device) and the precisions of the
#: device's products (:mod:`rfstream.devices`)
DEVICES = ("cpu", "cuda", "auto")
PRECISIONS = ("fp32", "tf32")
#: how the passes' progress is shown (:func:`rfstream.cluster.set_progress`)
PROGRESS_MODES = ("auto", "always", "never")
#: ridge's ``calibrate="auto"`` calibrates a search on at most this many features (the regressor
#: keeps a D x D float64 factor in memory and in its model file)
CALIBRATE_MAX_FEATURES = 4096


@dataclass(frozen=True)
class Option:
    """One named option of a fit.

    ``param``: the estimator parameter it sets (default: ``name``).  ``target``: "features"
    (a map parameter, refused by a map without it), "solver" (``solvers`` limits it to some
    solver names) or "both"; who takes it is every registered class with ``param``.  A
    ``shared`` option is one most maps take: at that value it is silently left out for a map
    without it.  ``default``: the fit's own default where it differs from the estimators'.
    ``help_default``: the estimators' default(s) as ``--help`` shows them (tests check them
    against the estimators); ``default_note``: what leaving it out means, said otherwise.
    ``type``: int, float or the name of a parser of :mod:`rfstream.cli.options`.
    """

    name: str
    help: str
    param: str | None = None
    target: str = "features"
    solvers: tuple | None = None
    shared: object = None
    default: object = None
    help_default: str | None = None
    default_note: str | None = None
    type: object = None
    choices: tuple | None = None
    metavar: str | None = None

    def __post_init__(self):
        if self.param is None:
            object.__setattr__(self, "param", self.name)

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")

    @property
    def dest(self):
        return self.name


def _solver(name, solvers, help, **kw):
    return Option(name, help, target="solver", solvers=solvers, **kw)


OPTIONS = (
    Option("n_components", "output features D (tefm: l; eerf/lkrf: M; ses: M "
           "frequencies), or a comma list, e.g. 500,1000,2000: the largest map drawn once and every "
           "size searched with --alpha (and a --gamma grid) from the same pass (maps whose features hold "
           "their smaller maps: rff, circulant, fastfood, arccos; --solver ridge)",
           shared=1000, default=1000, type="sizes"),
    Option("kernel", "kernel of the random features", shared="gaussian", choices=tuple(sorted(KERNELS)),
           default_note="the map's own: gaussian, laplacian for rff+binning"),
    Option("gamma", "kernel bandwidth: a number, 'auto' (the papers' nearest-neighbour "
           "rule), 'auto*F' (F x 'auto'), for cnm 'paper' (its Section 7 rule, 4 x 'auto'), or a comma "
           "list of these, e.g. auto*0.25,auto,auto*4: a grid searched with --alpha by cross-validation "
           "(rff and binning: every gamma in the same two passes; tefm, ses, eerf, lkrf: one fit per gamma; "
           "--solver ridge)", shared="auto", default="auto", type="gamma"),
    Option("sampler", "frequency sampler", shared="mc", choices=tuple(sorted(SAMPLERS)), help_default="mc"),
    Option("variant", "cos features, or cos and sin pairs", shared="cos", choices=("cos", "cossin"),
           help_default="cos"),
    Option("n_random_features", "tefm: random Fourier features d", type=int, default_note="4 x --n-components"),
    Option("power_iter", "tefm: power iterations q", "n_power_iter", type=int, help_default="1"),
    Option("n_candidates", "eerf/lkrf: candidate features M0", type=int, default_note="10 x --n-components"),
    Option("subsample", "eerf/lkrf: fraction of the rows scored, in (0, 1]", type=float, help_default="0.1"),
    Option("base", "eerf/lkrf: candidate features", choices=("fourier", "arccos0", "arccos1", "arccos2", "linear"),
           help_default="fourier"),
    Option("score_mode", "eerf/lkrf: label score centred per class (balanced) or "
           "eq. 7 as printed (raw)", choices=("balanced", "raw"), help_default="balanced"),
    Option("rho", "lkrf: chi-square divergence bound of the feature weights", type=float, help_default="1.0"),
    Option("degree", "arccos: kernel degree 0, 1 or 2; polysketch: the polynomial's degree", type=int,
           help_default="arccos: 1; polysketch: 2"),
    Option("landmarks", "nystroem: landmarks sampled uniformly (one pass) or by approximate ridge leverage "
           "scores (two passes; lower kernel-approximation error, higher classifier test error in "
           "docs/nystroem.md)", choices=("uniform", "leverage"), help_default="uniform"),
    Option("coef0", "polysketch: the constant c of (gamma <x, y> + c)^degree", type=float, help_default="0"),
    Option("sample_steps", "chi2: sampling steps of the chi-squared kernel's Fourier transform", type=int,
           help_default="2"),
    Option("sample_interval", "chi2: sampling interval (required for --sample-steps above 3)", type=float,
           help_default="None"),
    Option("skewedness", "skewed-chi2: the kernel's skewedness c (input must exceed -c)", type=float,
           help_default="1.0"),
    Option("n_pairs", "ses: sketch size r, pairs of rows", type=int, default_note="max(4 x --n-components, 1024)"),
    Option("reg", "ses: lambda_beta, a positive number or 'auto' (tuned on held-out pairs)", type="positive_or_auto",
           help_default="auto"),
    Option("weights", "ses: shrinkage weights, Bayesian Quadrature, or uniform (MC/QMC)",
           choices=("ses", "bq", "uniform"), help_default="ses"),
    Option("n_grids", "binning, rff+binning: random grids P", type=int, help_default="50"),
    Option("n_bins", "binning, rff+binning: hashed bins per grid", type=int, help_default="64"),
    Option("objective", "cnm: learn the map for the classifier or to approximate the "
           "kernel", choices=("classification", "kernel"), help_default="classification"),
    Option("structure", "cnm: dense projection or circulant r learned by FFT gradients",
           choices=("dense", "circulant"), help_default="dense"),
    Option("theta_step", "cnm: SGD step of the map (the first one with "
           "--theta-schedule decay)", type=float,
           default_note="1.0 (0.2 with a constant schedule); 2.0 for --objective kernel"),
    Option("theta_schedule", "cnm: decay (Algorithm 2's): theta_step / (1 + t / theta_t0), t "
           "counted in map steps, or a constant map step", choices=("decay", "constant"),
           default_note="decay; constant for --objective kernel"),
    Option("theta_t0", "cnm: t0 of --theta-schedule decay", type=float, help_default="500.0"),
    Option("cnm_max_iter", "cnm: most rounds of w-steps and map steps (early stopping may end "
           "sooner)", "max_iter", type=int, help_default="200"),
    Option("multiclass", "cnm, more than two classes: multi-class hinge, one-vs-rest "
           "hinge or softmax loss", choices=("crammer-singer", "ovr", "multinomial"), help_default="crammer-singer"),
    Option("alpha", "regularization: ridge, a value or a comma-separated list (K-fold CV "
           "in the same pass); sgd, lambda of the regularized risk", target="solver", type="alphas",
           help_default="ridge: 1.0; sgd: 0.0001"),
    _solver("loss", ("sgd",), "sgd classification loss (hinge: Pegasos)",
            choices=("hinge", "log_loss", "squared_hinge"), help_default="hinge"),
    _solver("epochs", ("sgd",), "sgd: passes over the data", param="max_iter", type=int, help_default="20"),
    _solver("sgd_solver", ("sgd",), "sgd: streaming SGD steps, newton (one gradient + Hessian "
            "pass per iteration; exact, any row order), or auto (newton on at most 128 features "
            "when the loss allows it, else sgd)", param="solver", choices=("auto", "sgd", "newton"),
            help_default="auto"),
    _solver("cv", ("ridge",), "ridge: folds of the cross-validation over a list of --alpha or --gamma, "
            "or loo: exact leave-one-out from one Gram (O(D^2) memory instead of O(folds D^2); also "
            "chosen, with a warning, when the folds' Grams would not fit a worker)", type="folds", help_default="5"),
    _solver("ridge_solver", ("ridge",), "ridge: gram (one D x D Gram pass; cross-validation), pcg "
            "(Nystrom-preconditioned conjugate gradients, a pass per iteration, memory O(D x "
            "--pcg-rank): for D past the Gram's memory; one --alpha), cg (Jacobi-preconditioned, for "
            "wide sparse features), or auto (cg for sparse features wider than 4096, else gram)",
            param="solver", choices=("auto", "gram", "cg", "pcg"), help_default="auto"),
    _solver("pcg_rank", ("ridge",), "ridge --ridge-solver pcg: rank r of the preconditioner "
            "(2 r rows sampled)", type=int, help_default="2048"),
    _solver("pca_components", ("kpca",), "kpca: principal components kept (at most --n-components)",
            param="n_components", type=int, help_default="10"),
    _solver("pca_variance", ("kpca",), "kpca: keep the fewest components reaching this fraction of the "
            "variance, in (0, 1]", param="variance", type=float, help_default="None"),
    _solver("pca_method", ("kpca",), "kpca: one Gram pass and an eigendecomposition, or the randomized "
            "range finder (2 + power iterations passes, for widths past the Gram's memory)", param="method",
            choices=("auto", "gram", "randomized"), help_default="auto"),
    _solver("cg_max_iter", ("ridge",), "ridge cg/pcg: most iterations (one pass each)", param="max_iter",
            type=int, help_default="200"),
    _solver("cg_tol", ("ridge",), "ridge cg/pcg: stop at this relative residual of the normal equations",
            param="tol", type=float, help_default="0.0001"),
    _solver("scoring", ("ridge",), "ridge: the CV score of a list of --alpha: error_rate (one more "
            "pass), balanced_error, roc_auc (two classes), or squared_error (from the Gram pass; "
            "regression's only score)", choices=("error_rate", "balanced_error", "roc_auc", "squared_error"),
            help_default="ridge classifier: error_rate; ridge regressor: squared_error"),
    _solver("select", ("ridge",), "ridge: how a list of --alpha (and a --gamma grid) is searched: cv "
            "(cross-validation, --cv and --scoring), or evidence (the log marginal likelihood of ridge "
            "as Bayesian linear regression, noise variance in closed form: no folds and no scoring pass; "
            "every alpha > 0; --ridge-solver gram)", choices=("cv", "evidence"), help_default="cv"),
    _solver("calibrate", ("ridge",), "ridge: one more pass of exact leave-one-out residuals at the chosen "
            "model, for a regressor's posterior std and conformal intervals (rfstream predict --std, "
            "--interval) and a classifier's Platt probabilities (predict --scores, evaluate's log_loss; "
            "fitted on the CV or leave-one-out pass's held-out decisions where the search makes that pass); "
            "auto: when a search runs (a list of --alpha, a --gamma grid, or --select evidence) with the "
            f"Gram solver and at most {CALIBRATE_MAX_FEATURES} features", type="calibrate",
            choices=("auto", True, False), metavar="{auto,true,false}", help_default="auto"),
    Option("random_state", "seed of every random draw", target="both", default=0, type=int),
)
#: name -> row
BY_NAME = {option.name: option for option in OPTIONS}
#: the defaults of a fit on a dataset that differ from the estimators' own
FIT_DEFAULTS = {option.name: option.default for option in OPTIONS if option.default is not None}


def flag_of(param, value=None):
    """The flag of the option that sets the estimator parameter ``param`` (given ``value``,
    the one whose choices hold it where two options set ``param``), or None."""
    rows = [o for o in OPTIONS if o.param == param]
    if len(rows) > 1:
        rows = [o for o in rows if o.choices and value in o.choices] or [o for o in rows if o.name == param]
    return rows[0].flag if len(rows) == 1 else None


class ParameterMixin:
    """An exception whose message names parameters as data, for the CLI to say as flags.

    ``text`` names each parameter of ``params`` (name -> value) by a placeholder:
    ``{name}`` (said ``name``), ``{name=}`` (``name=value``), ``{name=LITERAL}`` (``name=LITERAL``,
    a Python literal other than the parameter's value: ``{solver='gram'}``, ``{overwrite=True}``),
    ``{name=*}`` (``name=``, the keyword given some value) or ``{'name'}`` (``'name'``); a
    placeholder ending in `` (CLI)`` (``{test_size (CLI)}``) is said at the API with the flag
    beside it, ``test_size (CLI: --test-size)``.  ``param`` is the first parameter, the one
    the error is about.  :meth:`said` writes them another way: the command line writes their
    flags (``--n-components``, ``--cv loo``).  Mixed into an exception class first
    (:class:`ParameterError`), it keeps that class's ``except`` clauses working.
    """

    def __init__(self, text, **params):
        self.text = text
        self.params = params
        self.param = next(iter(params), None)
        super().__init__(self.said(python_spelling))

    def said(self, spell):
        """The message with each parameter written by ``spell(name, value, form)``, ``form``
        one of "name", "name=value", "name=" and "'name'", followed by " (CLI)" where the
        placeholder asks for the flag beside the API's spelling."""

        def one(match):
            quoted, name, given, aside = match.groups()
            name = quoted or name
            if name not in self.params:
                return match.group(0)
            value = self.params[name]
            if quoted:
                form = "'name'"
            elif given is None:
                form = "name"
            elif given == "*":
                form = "name="
            else:
                form = "name=value"
                if given:
                    try:
                        value = ast.literal_eval(given)
                    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                        # not a literal: text, e.g. a name read from a file
                        return match.group(0)
            return spell(name, value, form + (" (CLI)" if aside else ""))

        return _PLACEHOLDER.sub(one, self.text)


#: ``{'name'}``, or ``{name}`` / ``{name=}`` / ``{name=LITERAL}`` / ``{name=*}``, each optionally
#: followed by `` (CLI)``
_PLACEHOLDER = re.compile(r"\{(?:'(\w+)'|(\w+)(?:=([^{}]*?))?)( \(CLI\))?\}")


class ParameterError(ParameterMixin, ValueError):
    """A bad value of an estimator's parameter, with the parameters it names as data
    (:class:`ParameterMixin`)."""


class ParameterWarning(ParameterMixin, UserWarning):
    """A warning about parameters, named as data (:class:`ParameterMixin`): the command line
    says them as flags."""


class OutputExistsError(ParameterMixin, FileExistsError):
    """An output that exists and may not be replaced (``overwrite``), the parameter as data."""


def python_spelling(name, value, form):
    """A parameter as the API writes it: ``n_components``, ``cv='loo'``, ``interval=``,
    ``'alpha'``; with " (CLI)", the flag beside it (``test_size (CLI: --test-size)``)."""
    form, aside, _ = form.partition(" (CLI)")
    text = {"name": name, "name=value": f"{name}={value!r}", "name=": f"{name}=", "'name'": repr(name)}[form]
    return f"{text} (CLI: {cli_guess(name, value, form)})" if aside else text


def cli_guess(name, value, form):
    """The flag of a parameter as the core can tell it: the table's (:func:`flag_of`), else the
    name with dashes (``--no-`` before it for False); :func:`rfstream.cli.options.flag_spelling`,
    which reads every command's arguments, says the same for the messages that use it."""
    flag = flag_of(name, value)
    dashed = "--" + name.replace("_", "-")
    if form != "name=value":
        return flag or dashed
    if flag is None and isinstance(value, bool):
        return dashed if value else "--no-" + dashed[2:]
    return f"{flag or dashed} {value_word(value)}"


def value_word(value):
    """A value as the command line writes it: ``500,1000``, ``true``, ``none``, ``pcg``."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    return str(value)
