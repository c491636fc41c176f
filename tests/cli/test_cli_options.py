"""The table of ``rfstream fit`` options (rfstream/cli/options.py): one row per parameter,
and the parser, the applicability check and the defaults in ``--help`` generated from it."""
import re

import pytest

from rfstream.catalog import (
    FEATURES,
    FIT_DEFAULTS,
    SOLVERS,
    feature_map_class,
    solver_class,
)
from rfstream.cli import build_parser
from rfstream.cli.options import (
    UserError,
    default_text,
    split_params,
    takers,
)
from rfstream.options import OPTIONS as FIT_OPTIONS
from rfstream.options import SAMPLERS


def parse(*flags):
    return build_parser().parse_args(["fit", "d.zarr", "--out", "m", *flags])


def test_every_option_is_a_parameter_of_some_estimator():
    # a row whose parameter no registered map or solver takes would be refused everywhere
    for option in FIT_OPTIONS:
        assert takers(option), f"{option.flag}: no estimator takes {option.param!r}"


def test_each_flag_and_parameter_named_once():
    """One flag per option; a parameter has two flags only for disjoint solvers (ridge's
    --ridge-solver and --cg-max-iter, sgd's --sgd-solver and --epochs), so that no
    estimator is given one parameter by two flags."""
    flags = [o.flag for o in FIT_OPTIONS]
    assert len(set(flags)) == len(flags)
    for i, a in enumerate(FIT_OPTIONS):
        for b in FIT_OPTIONS[i + 1:]:
            if (a.param, a.target) == (b.param, b.target):
                assert a.solvers and b.solvers and not set(a.solvers) & set(b.solvers), (a.flag, b.flag)


def test_help_shows_the_estimators_defaults():
    help_text = " ".join(build_parser()._subparsers._group_actions[0].choices["fit"].format_help().split())
    for option in FIT_OPTIONS:
        assert f"(default: {' '.join(default_text(option).split())})" in help_text, option.flag
    # read from the estimators, not written in the table
    epochs = next(o for o in FIT_OPTIONS if o.flag == "--epochs")
    assert default_text(epochs) == str(solver_class("sgd", "classification")().max_iter)
    degree = next(o for o in FIT_OPTIONS if o.flag == "--degree")
    assert f"arccos: {feature_map_class('arccos')().degree}" in default_text(degree)
    # estimators that disagree are each named
    alpha = next(o for o in FIT_OPTIONS if o.flag == "--alpha")
    assert default_text(alpha) == "ridge: 1.0; sgd: 0.0001"


def test_unset_options_leave_the_estimators_defaults():
    feature_params, solver_params = split_params(parse(), "rff", "ridge", "classification")
    assert feature_params == {"n_components": FIT_DEFAULTS["n_components"], "gamma": "auto",
                              "random_state": 0}
    assert solver_params == {"random_state": 0}


@pytest.mark.parametrize("features", sorted(FEATURES))
def test_every_map_option_is_routed_or_refused(features):
    accepted = feature_map_class(features)().get_params()
    for option in FIT_OPTIONS:
        if option.target != "features" or option.choices is None:
            continue
        value = option.choices[-1]
        args = parse("--features", features, option.flag, value)
        if option.param in accepted:
            assert split_params(args, features, "ridge", "classification")[0][option.param] == value
        elif value != option.shared:
            with pytest.raises(UserError, match=re.escape(f"{option.flag} does not apply to --features {features}.")):
                split_params(args, features, "ridge", "classification")


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_solver_options_only_for_their_solvers(solver):
    cls = solver_class(solver, "classification")
    for option in FIT_OPTIONS:
        if option.target != "solver" or option.solvers is None:
            continue
        value = option.choices[0] if option.choices else "3"
        args = parse("--solver", solver, option.flag, value)
        if solver in option.solvers:
            assert option.param in split_params(args, "rff", solver, "classification")[1]
        else:
            with pytest.raises(UserError, match=f"{option.flag} does not apply to {cls.__name__}"):
                split_params(args, "rff", solver, "classification")


def test_every_other_argument_is_a_row_that_shows_its_default():
    # the rows of cli/arguments.py: an option left at None must say what None means
    from rfstream.cli.arguments import Arg, document_defaults

    assert Arg("--out", "where", default_note="beside the model").help_text() == \
        "where (default: beside the model)"
    assert Arg("--n", "how many", default=3).help_text() == "how many (default: 3)"
    assert Arg("--flag", "switch", action="store_true").help_text() == "switch (default: off)"
    assert Arg("--rate", "a 5% rate", default=0.05).help_text() == "a 5%% rate (default: 0.05)"  # argparse's %
    with pytest.raises(ValueError, match="--out: an option whose default is None needs a default_note"):
        Arg("--out", "where")
    # options added elsewhere (rfstream bench's) get their defaults appended
    import argparse

    p = argparse.ArgumentParser()
    p.add_argument("--data", nargs="+", default=["a", "b"], help="datasets")
    p.add_argument("--plots", action="store_true", help="draw")
    document_defaults(p)
    assert [a.help for a in p._actions[1:]] == ["datasets (default: a b)", "draw (default: off)"]


def test_the_choices_of_the_table_are_the_estimators():
    """The choice sets written in rfstream/options.py where the library keeps its own: the
    samplers' registry, and each option's choices, the values its takers' constraints allow."""
    from sklearn.utils._param_validation import StrOptions

    from rfstream import samplers

    assert set(SAMPLERS) == set(samplers.SAMPLERS)
    for option in FIT_OPTIONS:
        if not option.choices or option.type is not None:
            continue
        allowed = set()
        for _, cls in takers(option):
            for constraint in cls._parameter_constraints.get(option.param, []):
                if isinstance(constraint, StrOptions):
                    allowed |= constraint.options
        assert set(option.choices) == allowed, option.flag


def test_a_parameter_error_is_said_with_the_flags_of_the_table():
    from rfstream.options import ParameterError
    from rfstream.cli.options import cli_message

    error = ParameterError("{n_components=} needs {variant=}; lower {pcg_rank} or use {cv=}; the {'alpha'} "
                           "parameter", n_components=[50, 100], variant="cossin", pcg_rank=None, cv="loo",
                           alpha=None)
    assert error.param == "n_components"
    assert str(error) == ("n_components=[50, 100] needs variant='cossin'; lower pcg_rank or use cv='loo'; the "
                          "'alpha' parameter")
    assert cli_message(error) == ("--n-components 50,100 needs --variant cossin; lower --pcg-rank or use --cv "
                                  "loo; the --alpha parameter")
    # a parameter that two options set is said by the one whose choices hold the value
    assert cli_message(ParameterError("{solver=} or {loss=}", solver="newton", loss="log_loss")) == \
        "--sgd-solver newton or --loss log_loss"


def test_an_error_of_any_class_says_the_flags_of_every_command():
    """A parameter without a row in the fit table is said with the flag of the command argument
    that sets it: a bare ``store_true`` flag, ``--no-NAME`` for False, ``--flag value`` for a
    choice, a keyword the argument names; the API's aside (``(CLI)``) is the flag the CLI says."""
    from rfstream.cli.options import cli_message, flag_spelling
    from rfstream.io.checkpoints import CheckpointMismatch
    from rfstream.options import OutputExistsError, ParameterError, python_spelling

    exists = OutputExistsError("m already exists; pass {overwrite=True} to replace it.", overwrite=False)
    assert isinstance(exists, FileExistsError) and exists.param == "overwrite"
    assert str(exists) == "m already exists; pass overwrite=True to replace it."
    assert cli_message(exists) == "m already exists; pass --overwrite to replace it."
    mismatch = CheckpointMismatch("pass {restart=True} to start over, or another {checkpoint}.", restart=False,
                                  checkpoint=None)
    assert cli_message(mismatch) == "pass --restart to start over, or another --checkpoint."
    error = ParameterError("{standardize=False}, {solver=None}, {task='regression'}, {std=True} and "
                           "{interval=*}, {x=*}/{y=*}, {test_size=}, {holdout (CLI)}", standardize=True,
                           solver="ridge", task=None, std=None, interval=None, x=None, y=None, test_size=0.5,
                           holdout=None)
    assert str(error) == ("standardize=False, solver=None, task='regression', std=True and interval=, x=/y=, "
                          "test_size=0.5, holdout (CLI: --holdout)")
    assert cli_message(error) == ("--no-standardize, --solver none, --task regression, --std and --interval, "
                                  "--x-array/--y-array, --test-size 0.5, --holdout")
    for name, value, form in (("overwrite", True, "name=value"), ("standardize", False, "name=value"),
                              ("solver", "pcg", "name=value"), ("cv", "loo", "name=value"),
                              ("test_size", None, "name"), ("holdout", None, "name")):
        assert python_spelling(name, value, form + " (CLI)") == \
            f"{python_spelling(name, value, form)} (CLI: {flag_spelling(name, value, form)})"


def test_no_module_writes_a_flag_beside_a_parameter_in_prose():
    """Errors carry their parameters as data (rfstream.options.ParameterMixin): no message says
    "(CLI: --flag)" by hand; the API's aside, where a message keeps one, is made from the tables
    by rfstream/options.py alone."""
    from pathlib import Path

    import rfstream

    root = Path(rfstream.__file__).parent
    written = [str(path.relative_to(root)) for path in sorted(root.rglob("*.py"))
               if "(CLI:" in path.read_text(encoding="utf-8") and path != root / "options.py"]
    assert written == []
