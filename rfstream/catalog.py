"""Which maps and solvers exist, how a fit's parameters reach them, and the checks before data.

:data:`FEATURES` and :data:`SOLVERS` load the classes that :mod:`rfstream.options` names
by dotted path (a map or solver added there is available to ``rfstream fit``,
:func:`rfstream.pipeline.fit_dataset`, ``rfstream bench`` and the contract tests).
:func:`route` is the one router from the named options of :data:`rfstream.options.OPTIONS`
to the map's and the solver's parameters, used by the API and the CLI alike.
"""
from __future__ import annotations

import functools
import importlib
from functools import partial

import numpy as np
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import InvalidParameterError

from . import options
from .features.width import check_draw_size, nominal_width, planned_features
from .options import FIT_DEFAULTS, TASKS, ParameterError
from .param_lists import component_sizes, is_listed
from .preprocess import Standardizer
from .selection import check_search, gamma_candidates
from .solvers.kpca import KernelPCA, check_kpca_memory
from .solvers.memory import check_pass_memory, check_ridge_memory
from .solvers.ridge.estimators import refuse_without_gram
from .solvers.ridge.evidence import check_evidence_alphas


def _load(path):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _factory(entry):
    path, fixed = entry if isinstance(entry, tuple) else (entry, None)
    return partial(_load(path), **fixed) if fixed else _load(path)


#: ``features`` name -> feature map (a class, or a class with some parameters fixed), from
#: :data:`rfstream.options.FEATURES`
FEATURES = {name: _factory(entry) for name, entry in options.FEATURES.items()}
#: ``solver`` name -> estimator per task, or one transformer class for every task (a
#: pipeline that ends in it is fitted without labels), from :data:`rfstream.options.SOLVERS`.
#: A pipeline may also end in its map (``solver=None``).
SOLVERS = {name: {task: _load(path) for task, path in entry.items()} if isinstance(entry, dict) else _load(entry)
           for name, entry in options.SOLVERS.items()}


class NotApplicable(ValueError):
    """A named option given to a map or solver that does not take it.

    ``name`` is the option (a row of :data:`rfstream.options.OPTIONS`); ``features`` the map's name when
    the map refused it, else ``solver`` (the estimator class) and ``takers`` (the solver
    names that take it).  The message names the parameters; the CLI says it with flags.
    """

    def __init__(self, name, *, features=None, solver=None, takers=(), task=None):
        self.name = name
        self.features = features
        self.solver = solver
        self.takers = tuple(takers)
        if features is not None:
            text = f"{name!r} is a parameter of neither features={features!r} nor solver={solver!r} ({task})."
        else:
            text = f"{name!r} does not apply to {solver}; it is a parameter of solver={' or '.join(takers)!s}."
        super().__init__(text)


def feature_map_class(features):
    """The class behind the ``features`` name (the class of a ``partial``)."""
    _check_name("features", features, FEATURES)
    factory = FEATURES[features]
    return factory.func if isinstance(factory, partial) else factory


def solver_class(solver, task):
    """The estimator of ``solver`` for ``task`` (a transformer's class whatever the task)."""
    _check_name("solver", solver, SOLVERS)
    if is_transformer(solver):
        return SOLVERS[solver]
    _check_task(task)
    return SOLVERS[solver][task]


def is_transformer(solver):
    """Whether a pipeline ending in ``solver`` (a :data:`SOLVERS` name, or None: the map)
    transforms rather than predicts, and so is fitted without labels."""
    return solver is None or not isinstance(SOLVERS.get(solver, {}), dict)


@functools.cache
def defaults_of(cls):
    """``cls()``'s parameters (read once per class)."""
    return cls().get_params()


def takers(name):
    """``(label, class)`` of every map or solver that takes the option ``name`` (a
    :data:`rfstream.options.OPTIONS` name): map names, or ``"ridge (classification)"``-style labels."""
    row = options.BY_NAME[name]
    if row.target == "features":
        pairs = [(f, feature_map_class(f)) for f in FEATURES]
    else:
        pairs = [(f"{s} ({task})", solver_class(s, task)) for s in SOLVERS
                 for task in (TASKS[:1] if is_transformer(s) else TASKS)
                 if row.solvers is None or s in row.solvers]
        if row.target == "both":
            pairs += [(f, feature_map_class(f)) for f in FEATURES]
    return [(label, cls) for label, cls in pairs if row.param in defaults_of(cls)]


def route(features, solver, task, params):
    """``(feature_params, solver_params)`` of the named options ``params``.

    None values are dropped and :data:`FIT_DEFAULTS` fill what is not given.  A name of
    :data:`rfstream.options.OPTIONS` goes where its row says (a map or solver that does not take it:
    :class:`NotApplicable`, except a ``shared`` option at its usual value, left out).
    Any other name is an estimator parameter: it goes to the solver when the solver
    takes it (CNM's own ``alpha`` and ``max_iter`` are set through ``feature_params``),
    else to the map; ``random_state`` to both.  A name neither takes is a ``ValueError``.
    ``solver=None``: a pipeline that ends in its map, every name for the map.
    """
    map_params = defaults_of(feature_map_class(features))
    solver_cls = None if solver is None else solver_class(solver, task)
    solver_params = {} if solver_cls is None else defaults_of(solver_cls)
    given = {k: v for k, v in {**FIT_DEFAULTS, **params}.items() if v is not None}
    to_map = {}
    to_solver = {}
    for key, value in given.items():
        row = options.BY_NAME.get(key)
        if row is None:
            _route_by_name(key, value, map_params, solver_params, to_map, to_solver, (features, solver, task))
            continue
        if row.target in ("features", "both") and row.param in map_params:
            to_map[row.param] = value
        elif row.target == "features" and value != row.shared:
            raise NotApplicable(key, features=features, solver=solver, task=task)
        if row.target in ("solver", "both") and solver_cls is not None:
            if row.param in solver_params and (row.solvers is None or solver in row.solvers):
                to_solver[row.param] = value
            elif row.target == "solver" and value != row.shared:
                names = dict.fromkeys(label.split(" ")[0] for label, _ in takers(key))
                raise NotApplicable(key, solver=solver_cls.__name__, takers=names)
    return to_map, to_solver


def _route_by_name(key, value, map_params, solver_params, to_map, to_solver, names):
    if key in solver_params:
        to_solver[key] = value
    if key in map_params and (key not in solver_params or key == "random_state"):
        to_map[key] = value
    if key not in map_params and key not in solver_params and key not in FIT_DEFAULTS:
        features, solver, task = names
        raise ValueError(f"{key!r} is a parameter of neither features={features!r} nor "
                         f"solver={solver!r} ({task}).")


def make_model(task, *, features="rff", solver="ridge", standardize=True, passthrough=None,
               feature_params=None, solver_params=None):
    """A Pipeline: standardizer -> feature map -> solver for ``task`` ("classification"
    or "regression"); with ``solver=None`` it ends in the map, and with a transformer's
    name in it (:func:`is_transformer`; ``task`` may be None for both).

    ``standardize``: True, False, or "auto" (a Standardizer that leaves the columns alone when
    they already share one scale, decided from its own pass: docs/accuracy.md; none before a map
    that takes its input as it is, a histogram map).  ``passthrough`` lists columns the
    standardizer leaves as they are (one-hot columns, see :func:`rfstream.io.onehot_columns`);
    ``feature_params`` and ``solver_params`` go to the feature map's and the solver's constructors.
    """
    _check_name("features", features, FEATURES)
    check_standardize(standardize)
    solver_cls = None if solver is None else solver_class(solver, task)
    fmap = FEATURES[features](**(feature_params or {}))
    if standardize == "auto" and fmap.__sklearn_tags__().input_tags.positive_only:
        standardize = False  # histograms are taken as they are
    steps = [("standardize", Standardizer(passthrough=passthrough or None, auto=standardize == "auto"))] \
        if standardize else []
    steps.append(("features", fmap))
    if solver_cls is not None:
        steps.append(("solver", solver_cls(**(solver_params or {}))))
    return Pipeline(steps)


#: the values of ``standardize`` (``fit_dataset``, CLI ``--standardize``)
STANDARDIZE = (True, False, "auto")
#: ``standardize`` of a fit that does not say (docs/accuracy.md: the rule that chose it)
STANDARDIZE_DEFAULT = True


def check_standardize(value):
    """Refuse a ``standardize`` that is not True, False or "auto", naming the flag too."""
    if not any(value is v or (isinstance(v, str) and value == v) for v in STANDARDIZE):
        raise ParameterError("{standardize} must be True, False or 'auto'; " f"got {value!r}.",
                             standardize=value)


def check_model(model, n_features, n_targets=None):
    """Validate every parameter of ``model`` (a Pipeline or one estimator) without data.

    Each step's ``check_parameters`` (scikit-learn's parameter constraints, and a feature
    map's cross-parameter checks for ``n_features`` input columns): the errors ``fit``
    would raise, raised before the first pass over the data instead of after it; a
    search (:func:`rfstream.selection.check_search`) the solver cannot make.  Given
    ``n_targets`` (:func:`rfstream.solvers.targets.planned_targets`), also the memory
    of a solver that solves by a Gram on the map's planned width
    (:func:`rfstream.solvers.memory.check_ridge_memory`, with the workers connected).
    """
    steps = [step for _, step in model.steps] if isinstance(model, Pipeline) else [model]
    named = dict(model.steps) if isinstance(model, Pipeline) else {}
    fmap = named.get("features")
    solver = named.get("solver", None if named else model)
    check_search(fmap, solver)
    _check_bayes(fmap, solver)
    if fmap is not None and "standardize" in named and fmap.__sklearn_tags__().input_tags.positive_only:
        raise ParameterError(f"{type(fmap).__name__} takes histograms (input >= {fmap.input_floor:g}); the "
                             "standardizer makes columns negative: pass {standardize=False}.", standardize=True)
    maps = gamma_candidates(fmap) if fmap is not None else []
    for step in [s for s in steps if s is not fmap] + (maps or ([fmap] if fmap is not None else [])):
        if hasattr(step, "check_parameters"):  # rfstream's estimators; a foreign one checks itself in fit
            _check_parameters(step, int(n_features))
    if fmap is not None:
        check_draw_size(fmap, n_features)  # before anything of the map's size is drawn
    if isinstance(solver, KernelPCA) and fmap is not None:  # its Gram, before any pass
        width, groups, _ = planned_features(fmap, n_features)
        if width is not None:
            check_kpca_memory(solver, width * groups)
    if n_targets is not None and solver is not None:
        asked = nominal_width(fmap) if fmap is not None else None
        if asked is not None:  # the width asked for, before a draw learns the exact one
            check_pass_memory(asked, n_targets, sparse=getattr(fmap, "_sparse_output", False))
        width, groups, sparse = planned_features(fmap, n_features) if fmap is not None else (n_features, 1, False)
        if width is not None:
            check_pass_memory(width * groups, n_targets, sparse=sparse)
            if getattr(solver, "solves_by_gram", False):
                check_ridge_memory(solver, width, n_targets, n_groups=groups, sparse=sparse,
                                   widths=size_widths(fmap, width))
    return model


def size_widths(fmap, width):
    """The width of each listed ``n_components`` size of ``fmap`` (prefixes of the largest,
    ``width``), or None for one size."""
    value = None if fmap is None else fmap.get_params(deep=False).get("n_components")
    if not is_listed(value):
        return None
    listed = component_sizes(value)
    return [max(1, width * k // listed[-1]) for k in listed]


class InvalidParameter(ParameterError, InvalidParameterError):
    """scikit-learn's refusal of a parameter's value, with the parameter as data (``param``)."""


def _check_parameters(step, n_features):
    """``step.check_parameters``; scikit-learn's "The 'name' parameter of ..." carries its name."""
    try:
        step.check_parameters(n_features)
    except InvalidParameterError as error:
        text = str(error)
        name = next((n for n in step.get_params(deep=False) if text.startswith(f"The {n!r} parameter of ")), None)
        if name is None:
            raise
        raise InvalidParameter(text.replace(repr(name), "{'%s'}" % name, 1), **{name: None}) from None


def _check_bayes(fmap, solver):
    """Refuse, before any pass, what a ridge fit with ``select="evidence"`` or
    ``calibrate=True`` would refuse after the map's passes: an alpha <= 0 for the evidence,
    and an iterative solver (the evidence and the posterior come from the Gram)."""
    params = solver.get_params() if hasattr(solver, "get_params") else {}
    evidence = params.get("select") == "evidence"
    iterative = params.get("solver") in ("cg", "pcg")
    if evidence:
        check_evidence_alphas(np.atleast_1d(np.asarray(params.get("alpha"), dtype=np.float64)))
    if iterative:
        refuse_without_gram(params["solver"], evidence=evidence, calibrate=params.get("calibrate") is True)


def _check_name(kind, name, registry):
    if name not in registry:
        raise ValueError(f"{kind} must be one of {sorted(registry)}; got {name!r}.")


def _check_task(task):
    if task not in TASKS:
        raise ValueError(f"task must be 'classification' or 'regression'; got {task!r} (a dataset "
                         "without labels cannot be fitted).")
