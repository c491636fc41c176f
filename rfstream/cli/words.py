"""The command line's words for the library's parameters in a message.

A library error names an estimator parameter the way Python spells it (``cv='loo'``,
``pcg_rank=8192``, "the 'alpha' parameter of ..."); at the command line the user typed
flags, so :func:`as_flags` says each parameter that ``rfstream fit`` has a flag for as that
flag (``--cv loo``, ``--pcg-rank 8192``, "the --alpha parameter of ...").  The flags are
read from the library's table of a fit's named options (:data:`rfstream.catalog.PARAMETERS`),
imported only when a message is translated.
"""
from __future__ import annotations

import re
import sys
from functools import lru_cache

#: a parameter that two options set: the option each value belongs to
SOLVER_VALUES = {"gram": "ridge_solver", "cg": "ridge_solver", "pcg": "ridge_solver", "newton": "sgd_solver",
                 "sgd": "sgd_solver"}

_ASSIGNED = re.compile(r"\b([a-z][a-z0-9_]*)=('[^'\n]*'|\[[^\]\n]*\]|[\w.+\-]+)")
_QUOTED = re.compile(r"'([a-z][a-z0-9_]*)' parameter\b")
_BARE = re.compile(r"(?<![\w'\-=./\\])([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b(?![=(]|\.\w)")
#: keywords of the API with a flag of their own (not estimator parameters)
KEYWORD_FLAGS = {"sample_weight": "--sample-weight", "x_array": "--x-array", "y_array": "--y-array",
                 "interval_level": "--interval-level", "n_power_iter": "--power-iter"}


def parameter_flags():
    """:func:`fit_parameter_flags` once the library's catalog is imported (a message about
    an estimator's parameter comes from it), else the API keywords' flags only: an error of
    a command that read no estimator (``info``, say) does not import them to be said."""
    if "rfstream.catalog" not in sys.modules:
        return KEYWORD_FLAGS
    return fit_parameter_flags()


@lru_cache(maxsize=1)
def fit_parameter_flags():
    """``{estimator parameter: flag}`` for the parameters one option of ``rfstream fit`` sets
    named as the parameter (``n_components``, ``pcg_rank``, ``cv``), and the API's keywords of
    :data:`KEYWORD_FLAGS`; ``solver`` is resolved by its value (:data:`SOLVER_VALUES`).
    Parameters that an option of another name sets for one solver only (``tol``: ``--cg-tol``,
    ``max_iter``: ``--epochs`` or ``--cg-max-iter``) stay as they are: the same name means
    something else on another estimator."""
    from ..catalog import PARAMETERS

    flags = {name: "--" + name.replace("_", "-") for name, row in PARAMETERS.items() if row.parameter == name}
    return {**flags, **KEYWORD_FLAGS}


def _value(text):
    """A Python value as typed after a flag: ``'loo'`` -> ``loo``, ``[0.1, 1]`` -> ``0.1,1``."""
    if text.startswith("'"):
        return text.strip("'")
    if text.startswith("["):
        return ",".join(v.strip().strip("'") for v in text[1:-1].split(","))
    return text


def _flag(param, value=None):
    if param == "solver" and value in SOLVER_VALUES:
        return "--" + SOLVER_VALUES[value].replace("_", "-")
    return parameter_flags().get(param)


def as_flags(message):
    """``message`` with each parameter of ``rfstream fit`` said as its flag: ``name=value``
    as ``--flag value``, "the 'name' parameter" as "the --flag parameter", and a bare
    ``snake_case`` parameter name as its flag; other words are left alone."""

    def assigned(match):
        value = _value(match.group(2))
        flag = _flag(match.group(1), value)
        return match.group(0) if flag is None else f"{flag} {value}"

    def named(match):
        flag = _flag(match.group(1))
        return match.group(0) if flag is None else f"{flag} parameter"

    def bare(match):
        flag = _flag(match.group(1))
        return match.group(0) if flag is None else flag

    message = _ASSIGNED.sub(assigned, message)
    message = _QUOTED.sub(named, message)
    return _BARE.sub(bare, message)
