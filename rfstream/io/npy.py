"""NumPy .npy / .npz -> dense float32 rows (behind :func:`rfstream.io.convert`)."""
from __future__ import annotations

import zipfile

import numpy as np

from .. import sizes
from .ingest import LabelEncoder, LabelScanner, LabelSchema, Plan, check_like_task, encoding_stats
from ..options import ParameterError
from .location import Location


def plan(src: Location, *, label_column, positive, task, like, like_attrs,
                rows_per_chunk, **_) -> Plan:
    """.npy (memory-mapped, rows streamed) or .npz (members "X", optional "y").

    npz members cannot be memory-mapped: ``X`` and ``y`` are read whole into memory,
    then written chunk by chunk.  Use .npy (or CSV/LIBSVM) for data larger than memory.
    """
    if src.name.lower().endswith(".npy"):
        X, y = _npy_rows(src), None
    else:
        with src.open("rb") as f:
            _check_members(f, src)
            f.seek(0)
            with np.load(f, allow_pickle=False) as z:
                if "X" not in z:
                    raise ValueError(f"{src} has no member 'X' (members: {list(z.keys())}); "
                                     "save it with np.savez(path, X=X, y=y)")
                X, y = z["X"], z.get("y")
    if X.ndim != 2:
        raise ValueError(f"{src}: X must be 2-D (n_rows, n_features); got shape {X.shape}")
    if y is not None and y.shape != (X.shape[0],):
        raise ValueError(f"{src}: y must have shape ({X.shape[0]},); got {y.shape}")
    y = None if label_column is None else y
    d = sizes.check_width(X.shape[1], src)
    if like_attrs is not None:
        if len(like_attrs["feature_names"]) != d:
            raise ParameterError(f"{src} has {d} features but {{like=}} has "
                                 f"{len(like_attrs['feature_names'])}", like=like)
        schema = LabelSchema.from_attrs(like_attrs)
        check_like_task(task, positive, schema, like)
    elif y is not None:
        scanner = LabelScanner(positive)
        for a in range(0, len(y), rows_per_chunk):
            scanner.update(y[a:a + rows_per_chunk])
        schema = scanner.decide(task, src, "y")
    if y is not None and schema is None:
        raise ParameterError(f"{{like=}} has no labels but {src} has 'y'; pass {{label_column=None}}", like=like,
                             label_column=None)
    labels = None if y is None else LabelEncoder(schema, src)

    step = sizes.block_rows(d, rows_per_chunk)  # rows from the width

    def chunks():
        for a in range(0, X.shape[0], step):
            b = a + step
            yield np.asarray(X[a:b], dtype=np.float32), (labels.encode(y[a:b]) if labels else None)

    names = like_attrs["feature_names"] if like_attrs else [f"x{j}" for j in range(d)]
    attrs = {"format": src.name.lower().rsplit(".", 1)[-1], "feature_names": names,
             "categorical": {}, "fill_values": {}, "label_column": None if y is None else "y"}
    attrs.update(schema.attrs() if labels else {"task": None, "positive_class": None})
    return Plan(X.shape[0], d, labels.dtype if labels else None, attrs, chunks, encoding_stats(labels))


def _check_members(f, src: Location) -> None:
    """Refuse an .npz whose members' headers declare more bytes than a quarter of the client's
    memory (:func:`rfstream.sizes.client_limit`; members are read whole), before numpy
    allocates them."""
    limit = sizes.client_limit() // 4
    with zipfile.ZipFile(f) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".npy"):
                continue
            with archive.open(info) as member:
                major, _ = np.lib.format.read_magic(member)
                read = {1: np.lib.format.read_array_header_1_0, 2: np.lib.format.read_array_header_2_0}.get(major)
                if read is None:
                    raise ValueError(f"{src}: member {info.filename!r} is not a .npy numpy reads")
                shape, _, dtype = read(member)
            count = int(np.prod(shape, dtype=object)) * dtype.itemsize
            sizes.check_size(f"{src}: member {info.filename!r} of shape {shape} in bytes", count, limit,
                             "an .npz is read whole: convert it as .npy, CSV or LIBSVM")


class _RemoteNpy:
    """Rows of a .npy file on a store, read by byte range (no memory map there)."""

    def __init__(self, src: Location):
        self.src = src
        with src.open("rb") as f:
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = np.lib.format._read_array_header(f, version)
            self.offset = f.tell()
        if fortran or dtype.hasobject:
            raise ValueError(f"{src}: a Fortran-ordered or object .npy cannot be streamed; "
                             "save it with np.save(path, np.ascontiguousarray(X))")
        self.shape = shape
        self.dtype = dtype
        self.ndim = len(shape)

    def __getitem__(self, rows: slice) -> np.ndarray:
        a, b, _ = rows.indices(self.shape[0])
        width = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        with self.src.open("rb") as f:
            f.seek(self.offset + a * width)
            data = f.read((b - a) * width)
        return np.frombuffer(data, self.dtype).reshape((b - a, *self.shape[1:]))


def _npy_rows(src: Location):
    if src.is_local:
        return np.load(src.local_path, mmap_mode="r", allow_pickle=False)
    return _RemoteNpy(src)
