"""``rfstream fit``'s options, built from :data:`rfstream.options.OPTIONS`, and the library's
errors said with flags.

The parser (:func:`add_fit_options`) and the applicability check (:func:`split_params`)
are generated from the table; the parsers its rows name (``type="gamma"``) are here.
An error that carries the parameters it names (:class:`rfstream.options.ParameterMixin`)
is said with their flags, from the table or from the other commands' arguments.
"""
from __future__ import annotations

import argparse

from ..options import OPTIONS, flag_of, python_spelling, value_word
from . import arguments
from .arguments import with_default


class UserError(ValueError):
    """A problem with the command's input that the user can fix."""


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


#: the parsers named by the rows' ``type``, each made for the option's flag
PARSERS = {"sizes": lambda flag: _sizes, "gamma": lambda flag: _gamma, "alphas": _number_list,
           "folds": lambda flag: _folds, "calibrate": lambda flag: _calibrate, "positive_or_auto": positive_or}


def takers(option):
    """``(name, class)`` of every estimator that has ``option.param`` (:func:`rfstream.catalog.takers`)."""
    from ..catalog import takers as catalog_takers

    return catalog_takers(option.name)


def default_text(option):
    """The default ``--help`` should show, read from the estimators (per estimator when they
    differ) unless the row has a note or a default of the fit's own; ``--help`` shows the
    row's ``help_default`` (:func:`help_default`), which the tests hold to this."""
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
    """The default ``--help`` shows, from the row: its note, its estimators' default, or the fit's."""
    for text in (option.default_note, option.help_default, option.default):
        if text is not None:
            return str(text)
    raise ValueError(f"{option.flag}: the row says no default")


def add_fit_options(parser):
    """One argparse argument per row of :data:`rfstream.options.OPTIONS`, defaults in the help;
    no estimator is imported."""
    for option in OPTIONS:
        kwargs = {"help": with_default(option.help, help_default(option)), "default": option.default}
        if option.choices:
            kwargs["choices"] = option.choices
        if option.type is not None:
            kwargs["type"] = PARSERS[option.type](option.flag) if isinstance(option.type, str) else option.type
        if option.metavar is not None:
            kwargs["metavar"] = option.metavar
        parser.add_argument(option.flag, **kwargs)


def printable(text):
    """``text`` with every character a terminal would act on (controls, escapes, bidi
    overrides such as U+202E) written as its Python escape: names read from a dataset or
    a model reach the terminal as text."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


def flag_spelling(name, value, form):
    """A parameter as the command line writes it: the flag of its row of
    :data:`rfstream.options.OPTIONS` (``--n-components``, ``--cv loo``), else of another
    argument of a command (:func:`argument_flag`: ``--overwrite``, ``--no-standardize``,
    ``--solver none``), else as the API writes it.  The " (CLI)" of a form asks the API for
    the flag beside the name; here the flag alone is said."""
    form = form.partition(" (CLI)")[0]
    flag = flag_of(name, value)
    if flag is None:
        flag, bare = argument_flag(name, value, form)
        if flag is None:
            return python_spelling(name, value, form)
        if bare:
            return flag
    return f"{flag} {value_word(value)}" if form == "name=value" else flag


def argument_flag(name, value, form):
    """``(flag, bare)`` of the command-line argument (:mod:`rfstream.cli.arguments`) whose
    destination (or one of its ``keywords``) is ``name``: a ``store_true`` flag says
    ``name=True`` bare, and ``--no-NAME`` says ``name=False``; a flag with choices is the one
    whose choices hold ``value`` (True and False: ``yes`` and ``no``, ``--header yes``).
    ``(None, False)`` when no argument sets ``name`` so."""
    rows = ARGUMENT_FLAGS.get(name, ())
    if form == "name=value":
        if isinstance(value, bool):
            word = "yes" if value else "no"
            said = [(f"{row[0]} {word}", True) for row in rows if row[2] is None and word in row[1]]
            rows = [row for row in rows if row[2] is value]
            if not rows and said:
                return said[0]
        else:
            rows = [row for row in rows if row[2] is None]
            rows = [row for row in rows if row[1] and value_word(value) in map(value_word, row[1])] or \
                [row for row in rows if not row[1]]
    else:
        rows = sorted(rows, key=lambda row: row[2] is False)  # --checkpoint before --no-checkpoint
    if not rows:
        return None, False
    flag, _, boolean = rows[0]
    return flag, form == "name=value" and boolean is not None


def _argument_flags():
    """parameter name -> ``[(flag, choices, the value a bare flag sets or None)]`` of every
    optional argument of every command: every :class:`~rfstream.cli.arguments.Arg` the module
    of arguments defines, alone or in a command's table (a new command's table is found too)."""
    table = {}
    rows = [arg for value in vars(arguments).values() for arg in (value if isinstance(value, tuple) else (value,))
            if isinstance(arg, arguments.Arg)]
    for arg in rows:
        if not arg.name.startswith("--"):
            continue
        name = arg.name[2:].replace("-", "_")
        boolean = None
        if arg.action == "store_true":
            boolean = not name.startswith("no_")
            name = name if boolean else name[3:]
        for key in dict.fromkeys((name, *arg.keywords)):
            entry = (arg.name, arg.choices or (), boolean)
            if entry not in table.setdefault(key, []):
                table[key].append(entry)
    return table


ARGUMENT_FLAGS = _argument_flags()


def cli_message(error):
    """The first line of a library error as the command line says it: the parameters an
    error carries (:class:`rfstream.options.ParameterMixin`) as their flags
    (:func:`flag_spelling`); any other error as it reads."""
    said = getattr(error, "said", None)
    message = said(flag_spelling) if callable(said) and getattr(error, "params", None) else str(error)
    return printable((message.splitlines() or [""])[0])


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
        return route(features, solver, task, {o.name: getattr(args, o.dest) for o in OPTIONS})
    except NotApplicable as error:
        raise flag_error(error) from None
