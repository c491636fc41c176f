"""Every argument of every subcommand except ``fit``'s estimator parameters, one row each.

A row (:class:`Arg`) names the argument, its help without the default and its default, or
what leaving it out means (``default_note``; a None default without one is refused, so no
option reaches ``--help`` without its default); :func:`add_arguments` writes the default
into the help as ``(default: ...)``.  :func:`document_defaults` does the same for arguments
added by other modules (``rfstream bench``'s).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from ..options import DEVICES, FEATURES, PRECISIONS, PROGRESS_MODES, SOLVERS, TASKS  # the library's names, without importing it

LOCATION = "a local path or a URL (s3://, gs://, abfs://, memory://, file://"


def with_default(help_text, default):
    """``help_text`` ended by ``(default: ...)``; ``%`` escaped for argparse."""
    return f"{help_text} (default: {default})".replace("%", "%%")


def show(value):
    """A default as ``--help`` shows it: lists space-separated, booleans on/off."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


@dataclass(frozen=True)
class Arg:
    """One argument: ``name`` is a flag (``--out``) or a positional's name (``data``).

    ``type``, ``choices``, ``action``, ``required`` and ``metavar`` go to argparse;
    ``keywords``: the library's other names for what it sets (said with this flag in errors).
    """

    name: str
    help: str
    default: object = None
    default_note: str | None = None
    type: object = None
    choices: tuple | None = None
    action: str | None = None
    required: bool = False
    metavar: str | None = None
    keywords: tuple = ()

    def __post_init__(self):
        if (self.name.startswith("-") and self.default is None and self.default_note is None
                and not self.required and self.action is None):
            raise ValueError(f"{self.name}: an option whose default is None needs a default_note "
                             "saying what leaving it out means")

    def help_text(self):
        if not self.name.startswith("-"):
            return self.help.replace("%", "%%")
        if self.required:
            return f"{self.help} (required)".replace("%", "%%")
        if self.action == "store_true":
            return with_default(self.help, "off")
        return with_default(self.help, self.default_note if self.default_note is not None else show(self.default))

    def add_to(self, parser):
        kwargs = {"help": self.help_text()}
        if self.name.startswith("-"):
            kwargs["default"] = self.default
            if self.required:
                kwargs["required"] = True
        for key in ("type", "choices", "action", "metavar"):
            if getattr(self, key) is not None:
                kwargs[key] = getattr(self, key)
        parser.add_argument(self.name, **kwargs)


def add_arguments(parser, rows):
    for row in rows:
        row.add_to(parser)


def document_defaults(parser):
    """Append ``(default: ...)`` to every option of ``parser`` whose help lacks it."""
    for action in parser._actions:  # argparse has no public list of a parser's actions
        if (not action.option_strings or action.dest in ("help", "version")
                or action.help in (None, argparse.SUPPRESS) or "(default" in action.help):
            continue
        flag = action.nargs == 0 and action.const is True  # store_true
        action.help = with_default(action.help, "off" if flag else show(action.default))


def label_column(text):
    if text in ("auto", "first", "last", "none"):
        return None if text == "none" else text
    try:
        return int(text)
    except ValueError:
        return text


#: JSON's name for the type of a parsed value (in messages that must not show the value).
_JSON_TYPES = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
               type(None): "null"}


def storage_options(text):
    """The JSON object of ``--storage-options``.  A refusal (argparse names the flag) says
    what is wrong (not JSON and where, or the JSON type it holds) and the text's length,
    never the text itself, which may hold credentials."""
    size = f"{len(text)} characters"
    example = 'a JSON object, e.g. \'{"endpoint_url": "http://127.0.0.1:9000"}\''
    try:
        options = json.loads(text)
    except ValueError as exc:  # JSONDecodeError: its msg and pos never quote the text
        where = f"; {exc.msg} at character {exc.pos}" if isinstance(exc, json.JSONDecodeError) else ""
        raise argparse.ArgumentTypeError(f"not JSON ({size}{where}); it must be {example}") from None
    except RecursionError:
        raise argparse.ArgumentTypeError(f"nests too deeply ({size}); it must be {example}") from None
    if not isinstance(options, dict):
        kind = _JSON_TYPES.get(type(options), "value")
        raise argparse.ArgumentTypeError(f"must be a JSON object; got a JSON {kind} ({size})")
    return options


#: ``--delimiter``'s words for separators a shell makes awkward to type
DELIMITER_WORDS = {"tab": "\t", "space": " ", "whitespace": r"\s+"}


def delimiter(text):
    """argparse type of ``--delimiter``: auto, a word of :data:`DELIMITER_WORDS`, or the separator."""
    if not text or "\n" in text or '"' in text:
        raise argparse.ArgumentTypeError(f"must be auto, tab, space, whitespace or a separator such as ';'; "
                                         f"got {text!r}")
    return DELIMITER_WORDS.get(text, text)


def _positive_int(flag):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a positive integer; got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be a positive integer; got {text!r}")
        return value

    return parse


def _level(flag, what="a level", example="0.9"):
    """argparse type: a level (or fraction) strictly between 0 and 1."""
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not 0 < value < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be {what} between 0 and 1 (exclusive), e.g. "
                                             f"{example}; got {text!r}")
        return value

    return parse


# ------------------------------------------------------------------ shared rows
STORAGE = Arg("--storage-options", 'options of every URL\'s filesystem, e.g. \'{"endpoint_url": '
              '"http://127.0.0.1:9000"}\'', type=storage_options, metavar="JSON",
              default_note="the filesystem's environment, e.g. AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, "
                           "AWS_SECRET_ACCESS_KEY")
X_ARRAY = Arg("--x-array", "name of the features array in the Zarr group", default="X", keywords=("x",))
Y_ARRAY = Arg("--y-array", "name of the labels array", default="y", keywords=("y",))
QUIET = Arg("--quiet", "no progress display and no summaries", action="store_true")
SCHEDULER = Arg("--scheduler", "where to compute: a scheduler address (tcp://host:8786), 'threads' "
                "(dask's threads in this process) or 'cluster' (an embedded LocalCluster, one worker "
                "process per core)",
                default_note="$RFSTREAM_SCHEDULER; else threads when X (convert: the source's files) has "
                             "at most min(1 GiB, 1/8 of the memory) bytes ($RFSTREAM_SMALL_DATA sets "
                             "the size), else 'cluster'")
PROGRESS = Arg("--progress", "progress of each pass on stderr: auto is a bar on a terminal and "
               "otherwise one line per finished pass with its time; always a bar; never nothing",
               choices=PROGRESS_MODES, default="auto")
OVERWRITE = Arg("--overwrite", "replace the output if it exists", action="store_true")
DEVICE = Arg("--device", "where the features and products are made: cuda moves each task's rows to "
             "its worker's GPU (needs pip install 'rfstream[cuda]'; with --scheduler cluster, one worker per "
             "GPU); auto: cuda where cupy finds a device (docs/gpu.md)", choices=DEVICES, default="cpu")
FORMAT = Arg("--format", "what stdout shows: a short table, the JSON (all of it), or auto (a table on a terminal, "
             "else the JSON)", choices=("auto", "table", "json"), default="auto")
DATA = (STORAGE, X_ARRAY, Y_ARRAY)
COMPUTE = (QUIET, PROGRESS, SCHEDULER)
MODEL = Arg("model", f"model directory (rfstream fit --out): {LOCATION}, https://)")

CONVERT = (
    Arg("src", "source: a CSV (plain or compressed), LIBSVM, Parquet, .npy (the features) or .npz (arrays X and, "
        "optionally, y) file, or a "
        "directory or glob of CSV/LIBSVM/Parquet files (converted by Dask tasks, one per file or row "
        f"group; one gzip file is one stream, one task); {LOCATION}, https://)"),
    Arg("dst", f"Zarr dataset to write: {LOCATION})"),
    Arg("--label-column", "the label column: 'auto', 'last', 'first', a 0-based index, a header name, or "
        "'none' (no labels); auto: with --like the training set's, else the first or the last column, "
        "whichever looks like a label (text or few distinct integers) where the other does not, with a "
        "warning when both do (docs/io.md)", type=label_column, default="auto"),
    Arg("--positive", "binary task: this label against the rest",
        default_note="every label is a class", keywords=("positive_class",)),
    Arg("--rows-per-chunk", "rows per Zarr chunk", type=_positive_int("--rows-per-chunk"), default=65536),
    Arg("--header", "whether a CSV's first line names the columns; auto: with --like the training set's, "
        "else yes when the first row is not numbers throughout where the rows below are",
        choices=("auto", "yes", "no"), default="auto"),
    Arg("--delimiter", "a CSV's field separator: auto (with --like the training set's, else ',', tab or "
        "';', whichever the first line holds, else runs of whitespace), tab, space, whitespace, or the "
        "character itself, e.g. '|'", type=delimiter, default="auto", keywords=("sep",)),
    Arg("--task", "what the label is; auto: classes for non-numeric labels or integers with at most "
        "32 distinct values, else regression; classification of non-integer numbers is refused",
        choices=("auto", "classification", "regression"), default="auto"),
    Arg("--like", "encode with every schema choice of this training dataset: columns, categories, "
        "classes, task, and unless given here its label column, header and delimiter",
        default_note="the schema is read from SRC"),
    OVERWRITE,
    Arg("--storage-options", "options of every URL's filesystem (see rfstream fit --help)",
        type=storage_options, metavar="JSON", default_note="the filesystem's environment"),
    *COMPUTE,
)

FIT_HEAD = (
    Arg("data", f"Zarr dataset with labels (rfstream convert, or any Zarr v2/v3 group): {LOCATION}, "
        "https://)"),
    Arg("--out", f"model directory to write: {LOCATION})", required=True),
    Arg("--features", "feature map", choices=tuple(sorted(FEATURES)), default="rff"),
    Arg("--solver", "solver (none: the model ends in the feature map, a transformer for rfstream "
        "transform; fitted without labels)", choices=(*sorted(SOLVERS), "none"), default="ridge"),
)
FIT_TAIL = (
    Arg("--standardize", "standardize the columns first (zero mean, unit variance): yes, no, or auto: not when "
        "the columns already share one scale, such as pixels (the median column's range at least half the span "
        "of all of them, read from the same moments pass; the decision is in the summary: docs/accuracy.md)",
        choices=("auto", "yes", "no"), default_note="yes"),
    Arg("--no-standardize", "do not standardize the columns first (--standardize no)", action="store_true"),
    Arg("--task", "override the dataset's task", choices=TASKS,
        default_note="the dataset's attributes, else y's dtype: integers are classes, floats regression"),
    Arg("--sample-weight", "name of an array of the dataset with one weight >= 0 per row, given to "
        "the solver as sample_weight", metavar="ARRAY", default_note="every row weighs 1"),
    Arg("--report", "write the heat map of the CV scores of every (gamma, alpha), cv_heatmap.png, into "
        "the model directory (needs matplotlib: pip install rfstream[plot])", action="store_true",
        default_note="written when matplotlib is installed and alpha or gamma is a list"),
    Arg("--checkpoint", "where each completed pass is stored, so that the same command run again "
        f"(after a walltime, an eviction, a lost scheduler) resumes after it: {LOCATION}); removed "
        "when the model is saved", metavar="DIR", default_note="OUT.checkpoint beside the model"),
    Arg("--no-checkpoint", "store nothing between passes (a rerun starts from the first pass)",
        action="store_true"),
    Arg("--restart", "start over, ignoring (and replacing) an existing checkpoint", action="store_true"),
    Arg("--dry-run", "print the fit's plan (its passes, the client's factorizations and their estimated "
        "time, the peak memory, the checkpoint's size; docs/plan.md) and exit: no pass, nothing written",
        action="store_true"),
    Arg("--holdout", "fit on the other rows and report the metrics of this fraction of the rows, held out "
        "(the rows rfstream split --test-size FRACTION --random-state writes as TEST; seeded by "
        "--random-state), in the summary and the model's metadata", type=_level("--holdout", "a fraction", "0.2"),
        metavar="FRACTION", default_note="every row is fitted on"),
    DEVICE,
    Arg("--precision", "--device cuda: the products' precision, fp32 or tf32 (tensor cores; its accuracy: "
        "docs/gpu.md)", choices=PRECISIONS, default_note="fp32"),
    FORMAT,
    OVERWRITE,
    *DATA,
    *COMPUTE,
)

PREDICT = (
    MODEL,
    Arg("data", "Zarr dataset with the training data's columns"),
    Arg("--out", f"Zarr group to write, arrays y_pred (and scores, std, lower, upper): {LOCATION})",
        required=True),
    Arg("--scores", "classifiers: also write array scores, the class probabilities of a model with "
        "predict_proba, else its decision values", action="store_true"),
    Arg("--std", "regressors fitted with a posterior (fit --calibrate): also write array std, the "
        "posterior predictive standard deviation of each prediction", action="store_true", keywords=("return_std",)),
    Arg("--interval", "regressors fitted with a posterior (fit --calibrate): also write arrays lower and "
        "upper, the conformal prediction interval at this level, e.g. 0.9", type=_level("--interval"),
        metavar="LEVEL", default_note="none", keywords=("predict_interval",)),
    DEVICE,
    OVERWRITE,
    STORAGE, X_ARRAY,
    *COMPUTE,
)

TRANSFORM = (
    MODEL,
    Arg("data", "Zarr dataset with the training data's columns"),
    Arg("--out", f"Zarr dataset to write, X the transformer's output (and y, the data's labels): {LOCATION})",
        required=True),
    DEVICE,
    OVERWRITE,
    STORAGE, X_ARRAY,
    *COMPUTE,
)

EVALUATE = (
    MODEL,
    Arg("data", "Zarr dataset with labels"),
    Arg("--out", "JSON file for the metrics", default_note="MODEL/metrics-<DATA name>.json"),
    FORMAT,
    Arg("--interval-level", "a regressor with a posterior (fit --calibrate): the level of the prediction "
        "intervals whose coverage and mean width are reported", type=_level("--interval-level"),
        metavar="LEVEL", default_note="0.9 for a model with a posterior, else no intervals"),
    DEVICE,
    *DATA,
    *COMPUTE,
)

INFO = (
    Arg("path", f"a Zarr dataset, a model directory or a predictions group: {LOCATION}, https://)"),
    FORMAT,
    *DATA,
    QUIET,
)

SPLIT = (
    Arg("data", f"Zarr dataset to split: {LOCATION}, https://)"),
    Arg("train", f"Zarr dataset to write with the training rows: {LOCATION})"),
    Arg("test", f"Zarr dataset to write with the test rows: {LOCATION})"),
    Arg("--test-size", "fraction of the rows in TEST: row i is a test row when a uniform number drawn from "
        "(seed, i) alone is below it, whatever the chunking (the rows of rfstream.train_test_split and "
        "fit --holdout)", type=_level("--test-size", "a fraction", "0.25"), metavar="FRACTION", default=0.25),
    Arg("--stratify", "classification: exactly round(test-size x rows) of each class in TEST, its rows with "
        "the smallest numbers (two more passes over the labels)", action="store_true"),
    Arg("--random-state", "seed of the split", type=int, default=0),
    OVERWRITE,
    *DATA,
    *COMPUTE,
)

DEMO = (
    Arg("--n-components", "output features D", type=_positive_int("--n-components"), default=500),
    Arg("--random-state", "seed of the split and of every random draw", type=int, default=0),
    Arg("--workdir", "keep the dataset and the model here", default_note="a temporary folder, removed"),
    *COMPUTE,
)
