"""The one registry of known datasets: which files, which task, how to convert them.

Tests, ``rfstream bench``, benchmarks/ and examples/ take their real datasets from
:data:`DATASETS` and convert them with :func:`prepare` (once, then reused).  The files live in
:func:`datasets_folder`, one sub-folder per dataset with a PROVENANCE.txt.  To add a dataset:
put its files and PROVENANCE.txt in ``<datasets folder>/<name>/`` and add one :class:`Dataset`
to :data:`DATASETS`; tests/datasets/test_datasets_registry.py converts it and checks its row counts.
More: docs/io.md, "rfstream/datasets/registry.py".
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from ..io import convert, open_dataset
from ..preprocess import train_test_split

__all__ = ["DATASETS", "Dataset", "datasets_folder", "get", "prepare", "source_paths", "train_test"]


@dataclass(frozen=True)
class Dataset:
    """One known dataset: its files, its task and how to convert them.

    Parameters
    ----------
    name : str
        Registry name; also the sub-folder of the datasets folder.
    train : str
        Training file (the whole dataset when there is no test file), relative to
        the datasets folder, or to this package when ``shipped``.
    test : str or None
        Test file, converted ``like=`` the training set; None: split ``train`` instead.
    task : {"classification", "regression"}
        What the label is, passed to :func:`rfstream.io.convert` as ``task``.
    rows : tuple of (int, int or None)
        Data rows of the training and the test file, as PROVENANCE.txt documents them.
    options : dict
        Further :func:`rfstream.io.convert` keyword arguments the files need.
    test_size : float or None
        Without a test file, the fraction of rows :func:`train_test` holds out
        (:func:`rfstream.train_test_split`, seed 0 by default).
    label : str
        What the label is.
    provenance : str
        The PROVENANCE.txt that records the source and checksums (relative to
        the folder of ``train``), and the citation.
    shipped : bool
        The file is part of the package (``rfstream demo``), no datasets folder needed.
    """

    name: str
    train: str
    test: str | None
    task: str
    rows: tuple
    options: dict = field(default_factory=dict)
    test_size: float | None = None
    label: str = ""
    provenance: str = ""
    shipped: bool = False


# One entry per dataset.  Row counts and labels are those of each PROVENANCE.txt.
DATASETS = {d.name: d for d in (
    Dataset("kddcup99", "kddcup99/kddcup.data_10_percent.gz", "kddcup99/corrected.gz", "classification",
            (494_021, 311_029), {"positive_class": "normal"},
            label='normal vs attack (23 labels in training, 38 in the test set); columns 2-4 are strings',
            provenance="kddcup99/PROVENANCE.txt (KDD Cup 1999, UCI KDD Archive)"),
    Dataset("adult", "adult/adult.data", "adult/adult.test", "classification",
            (32_561, 16_281), {"positive_class": ">50K"},
            label="income >50K vs rest; '?' means missing, adult.test's labels end in '.'",
            provenance="adult/PROVENANCE.txt (UCI Adult, Kohavi 1996)"),
    Dataset("magic_gamma", "magic_gamma/magic04.data", None, "classification",
            (19_020, None), {"header": False}, test_size=0.25,
            label="'g' (gamma) / 'h' (hadron), last column",
            provenance="magic_gamma/PROVENANCE.txt (UCI MAGIC Gamma Telescope, Bock et al. 2004)"),
    Dataset("letter", "letter/letter-recognition.data", None, "classification",
            (20_000, None), {"label_column": "first", "header": False}, test_size=0.25,
            label="26 capital letters, first column",
            provenance="letter/PROVENANCE.txt (UCI Letter Recognition, Frey & Slate 1991)"),
    Dataset("ijcnn1", "ijcnn1/ijcnn1.trn.bz2", "ijcnn1/ijcnn1.tst.bz2", "classification",
            (49_990, 91_701), label="-1 / 1 (LIBSVM, 22 features)",
            provenance="ijcnn1/PROVENANCE.txt (IJCNN 2001 challenge, LIBSVM data sets)"),
    Dataset("cpusmall", "cpusmall/cpusmall.txt", None, "regression",
            (8_192, None), test_size=0.25, label="usr, 0-99 (LIBSVM, 12 features, CRLF line ends)",
            provenance="cpusmall/PROVENANCE.txt (Delve comp-activ, LIBSVM data sets)"),
    Dataset("covtype_sample", "covtype_sample/covtype_sample.csv.gz", None, "classification",
            (15_000, None), {"header": True}, test_size=0.25,
            label="Cover_Type 1-7 (a header row; 15,000 rows of the 581,012)",
            provenance="covtype_sample/PROVENANCE.txt (UCI Covertype, Blackard & Dean 1999)"),
    Dataset("magic_demo", "magic04.data.gz", None, "classification",
            (19_020, None), test_size=0.25, label="'g' / 'h': magic_gamma's rows, gzip", shipped=True,
            provenance="PROVENANCE.txt (beside this module; shipped for rfstream demo)"),
)}


def get(name) -> Dataset:
    """The registry entry called ``name``."""
    try:
        return DATASETS[name]
    except (KeyError, TypeError):
        raise ValueError(f"dataset {name!r} is not in the registry; use one of {sorted(DATASETS)} "
                         "(rfstream/datasets/registry.py says how to add one)") from None


def datasets_folder() -> Path:
    """The real datasets folder: ``$RFSTREAM_DATASETS``; else ``../shared/datasets`` beside the
    repository when rfstream runs from a checkout; else (an installed package, whose
    directory says nothing about the data) ``shared/datasets`` in the working directory
    or its parent, the first that exists (the checkout's or the working directory's
    parent's path when none does, for the error that names it)."""
    env = os.environ.get("RFSTREAM_DATASETS")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[2]
    candidates = [checkout.parent / "shared" / "datasets"] if (checkout / "pyproject.toml").is_file() else []
    candidates += [Path.cwd() / "shared" / "datasets", Path.cwd().parent / "shared" / "datasets"]
    return next((path for path in candidates if path.is_dir()), candidates[0])


def source_paths(name, folder=None) -> tuple[Path, Path | None]:
    """``(train file, test file or None)`` of the dataset ``name``, in ``folder`` (default
    :func:`datasets_folder`; ignored for the shipped demo)."""
    entry = get(name)
    if entry.shipped:
        return Path(str(files(__package__) / entry.train)), None
    root = Path(folder) if folder is not None else datasets_folder()
    if not root.is_dir():
        raise FileNotFoundError(f"datasets folder {root} does not exist; set RFSTREAM_DATASETS or pass the "
                                "folder that holds kddcup99/, adult/, ...")
    return root / entry.train, (None if entry.test is None else root / entry.test)


def prepare(name, workdir, folder=None, *, rows_per_chunk=None, test=True) -> tuple[Path, Path | None]:
    """Convert a dataset to Zarr in ``workdir`` once; reuse the conversion afterwards.

    Written as ``<name>_train.zarr`` and ``<name>_test.zarr`` (``<name>.zarr`` without a test
    file; ``<name>-rows4096_...`` for a non-default ``rows_per_chunk``): docs/io.md.

    Parameters
    ----------
    name : str
        Registry name (:data:`DATASETS`).
    workdir : str or Path
        Folder of the converted datasets; created if missing.
    folder : str or Path, optional
        The datasets folder; default :func:`datasets_folder`.
    rows_per_chunk : int, optional
        Rows per Zarr chunk; default that of :func:`rfstream.io.convert`.
    test : bool
        Also convert the test file (False: the second path is None).

    Returns
    -------
    (Path, Path or None)
        The training set and the test set (None without a test file).
    """
    entry = get(name)
    train_src, test_src = source_paths(name, folder)
    stem = name if rows_per_chunk is None else f"{name}-rows{rows_per_chunk}"
    chunks = {} if rows_per_chunk is None else {"rows_per_chunk": rows_per_chunk}
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    train = workdir / (f"{stem}.zarr" if test_src is None else f"{stem}_train.zarr")
    if not train.exists():
        convert(train_src, train, task=entry.task, **entry.options, **chunks)
    if test_src is None or not test:
        return train, None
    test_path = workdir / f"{stem}_test.zarr"
    if not test_path.exists():
        convert(test_src, test_path, like=train, **chunks)
    return train, test_path


def train_test(name, workdir, folder=None, *, rows_per_chunk=None, test_size=None, random_state=0):
    """Lazy ``X_train, X_test, y_train, y_test`` of a dataset, converted by :func:`prepare`.

    With a test file, the two files; without, the entry's ``test_size`` (or the
    given one) of the rows held out by :func:`rfstream.train_test_split`, which
    picks rows from ``(random_state, row index)`` alone, whatever the chunking.
    """
    entry = get(name)
    train, test = prepare(name, workdir, folder, rows_per_chunk=rows_per_chunk)
    X, y = open_dataset(train)
    if test is not None:
        if test_size is not None:
            raise ValueError(f"test_size={test_size!r}: dataset {name!r} has a test file ({entry.test}); "
                             "leave test_size out, or split the training set yourself")
        Xt, yt = open_dataset(test)
        return X, Xt, y, yt
    return train_test_split(X, y, test_size=test_size or entry.test_size, random_state=random_state)
