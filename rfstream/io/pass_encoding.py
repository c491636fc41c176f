"""The bytes of one stored pass of a checkpoint: ``np.savez`` with symmetric blocks packed.

A symmetric ``D x D`` block (each fold's Gram ``Z'Z`` of the ridge pass) keeps its upper
triangle only, row by row, and is restored bit for bit; a block is packed only when it is
symmetric to the bit (compared as integers: ``-0.0`` and ``0.0``, NaNs, all kept).  Blocks are
found in an array whose last two axes are equal, or declared by the pass that makes a flat
vector (:func:`symmetric_blocks`).  :func:`stored_nbytes` predicts a file's bytes from the
values' shapes; a float64 array of float32 numbers is stored in float32 (exact).  Why no
compression and no rounding to float32: docs/robustness.md,
"rfstream/io/checkpoints.py".
"""
from __future__ import annotations

import contextlib
import contextvars
import io
import zipfile
from math import prod

import numpy as np

from .. import triangles

__all__ = ["decode", "encode", "stored_nbytes", "symmetric_blocks"]

#: ``{value index: spans}`` declared for the pass computed inside :func:`symmetric_blocks`
_DECLARED = contextvars.ContextVar("rfstream_symmetric_blocks", default=None)
#: the most bytes ``np.savez`` adds for one array beyond its npy header and data (its zip
#: local header, zip64 extra fields, central directory entry), its name counted apart
_ZIP_MEMBER_BYTES = 160
#: the zip's end records (with the zip64 ones)
_ZIP_END_BYTES = 128
#: the values of a float64 array tried in float32 first (:func:`_narrow`)
_PROBE = 4096


@contextlib.contextmanager
def symmetric_blocks(spans, value=0):
    """Declare, for the passes computed inside the block, that value ``value`` of the pass
    holds symmetric matrices at ``spans``: ``(offset, count, size)``, ``count`` row-major
    ``size x size`` matrices one after another from ``offset`` in the value's flat form.
    A declared block is still checked and stored whole unless symmetric to the bit."""
    spans = sorted((int(o), int(c), int(d)) for o, c, d in spans)
    token = _DECLARED.set({**(_DECLARED.get() or {}), int(value): spans})
    try:
        yield
    finally:
        _DECLARED.reset(token)


def _square_spans(shape):
    """The spans of an array whose last two axes are equal (``size`` at least 2)."""
    if len(shape) >= 2 and shape[-1] == shape[-2] >= 2:
        return [(0, prod(shape[:-2]), int(shape[-1]))]
    return []


def _symmetric(m):
    """Whether the square ``m`` equals its transpose bit for bit (as unsigned integers)."""
    b = m.view(f"u{m.dtype.itemsize}")
    return bool((b == b.T).all())


def _pack(flat, spans):
    """``(packed, spans kept)``: ``flat`` with each span's matrices (when all are symmetric
    to the bit) replaced by their upper triangles, row by row (:func:`rfstream.triangles.pack`)."""
    kept, start = [], 0
    for offset, count, size in spans:
        stop = offset + count * size * size
        if offset < start or stop > flat.size:
            continue  # not a span of this value (overlapping or out of it): stored whole
        if all(_symmetric(m) for m in flat[offset:stop].reshape(count, size, size)):
            kept.append((offset, count, size))
            start = stop
    return (triangles.pack(flat, kept) if kept else flat), kept


def _unpack(packed, spans, shape):
    """The array of ``shape`` that :func:`_pack` made ``packed`` of; None when the spans and
    sizes do not fit together (a file rfstream did not write)."""
    flat = triangles.unpack(packed, spans, prod(shape))
    return None if flat is None else flat.reshape(shape)


def _narrow(a):
    """``(a as float32, True)`` when ``a`` is float64 and every value of it is a float32 number
    (converted there and back, the same bits: nothing is rounded), else ``(a, False)``."""
    if a.dtype != np.float64 or a.size == 0:
        return a, False
    head = a.reshape(-1)[:_PROBE]  # most partials of a large job fail here, before the whole is converted
    if not np.array_equal(head.astype(np.float32).astype(np.float64).view(np.uint64), head.view(np.uint64)):
        return a, False
    narrow = a.astype(np.float32)
    if not np.array_equal(narrow.astype(np.float64).view(np.uint64), a.view(np.uint64)):
        return a, False
    return narrow, True


def encode(values):
    """``np.savez`` bytes of the values, or None when one is neither numeric nor text.

    Object arrays of ``str`` are stored as fixed-width text (key ``v{i}_str``); a value with
    symmetric blocks (its last two axes, or declared by :func:`symmetric_blocks`) as
    ``v{i}_packed`` with its ``v{i}_spans`` and ``v{i}_shape``; any other as ``v{i}``.  A
    float64 array whose values are all float32 numbers is stored in float32, its key (of the
    data) ending in ``_f32`` (:func:`_narrow`: exact, restored to the same bits)."""
    declared = _DECLARED.get() or {}
    arrays = {}
    for i, v in enumerate(values):
        a, key = np.asarray(v), f"v{i}"
        if a.dtype.hasobject:
            if not all(isinstance(x, str) for x in a.ravel()):
                return None
            arrays[f"v{i}_str"] = a.astype(str)
            continue
        spans = declared.get(i) or _square_spans(a.shape)
        if spans and a.dtype.kind in "fiu" and a.dtype.itemsize in (1, 2, 4, 8):
            packed, kept = _pack(np.ascontiguousarray(a).ravel(), spans)
            if kept:
                packed, narrowed = _narrow(packed)
                arrays.update({f"v{i}_packed" + ("_f32" if narrowed else ""): packed,
                               f"v{i}_spans": np.array(kept, dtype=np.int64),
                               f"v{i}_shape": np.array(a.shape, dtype=np.int64)})
                continue
        a, narrowed = _narrow(a)
        arrays[key + ("_f32" if narrowed else "")] = a
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _check_members(data):
    """Refuse before anything is allocated a member whose declared array is larger than its
    bytes, or one not stored plainly (``np.savez`` stores, never compresses): a file of a few
    bytes cannot make the reader allocate more than the file holds."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        for info in z.infolist():
            if info.compress_type != zipfile.ZIP_STORED or info.file_size > len(data):
                raise ValueError(f"{info.filename!r:.80} is not stored as rfstream stores it")
            with z.open(info) as fp:
                version = np.lib.format.read_magic(fp)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, _, dtype = read(fp)
            if prod(shape) * dtype.itemsize > info.file_size:
                raise ValueError(f"{info.filename!r:.80} declares more than its bytes hold")


def decode(data, count):
    """The ``count`` values :func:`encode` stored in ``data`` (packed blocks restored);
    ``ValueError`` for bytes rfstream did not write."""
    _check_members(data)
    values = []
    with np.load(io.BytesIO(data), allow_pickle=False) as f:
        def read(key):  # a float32-stored float64 array widened back: the same bits
            return f[key] if key in f.files else f[key + "_f32"].astype(np.float64)

        for i in range(count):
            if f"v{i}_packed" in f.files or f"v{i}_packed_f32" in f.files:
                spans = [tuple(int(x) for x in row) for row in np.asarray(f[f"v{i}_spans"]).reshape(-1, 3)]
                a = _unpack(read(f"v{i}_packed"), spans, tuple(int(s) for s in f[f"v{i}_shape"]))
                if a is None:
                    raise ValueError(f"value {i}'s packed blocks do not fit its shape")
            elif f"v{i}" in f.files or f"v{i}_f32" in f.files:
                a = read(f"v{i}")
            else:
                a = f[f"v{i}_str"].astype(object)
            values.append(a[()] if a.ndim == 0 else a)
    return tuple(values)


def _npy_header_bytes(shape, dtype):
    """An upper bound on the npy header of an array (numpy pads it to 64 bytes)."""
    text = repr({"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
                 "shape": tuple(shape)})
    return 64 * (-(-(12 + len(text) + 1) // 64)) + 64


def stored_nbytes(values):
    """An upper bound on the bytes of a pass file holding ``values``, from their shapes alone.

    ``values``: one ``(shape, dtype)`` or ``(shape, dtype, spans)`` per value of the pass,
    ``spans`` as :func:`symmetric_blocks` declares them (the Gram pass's:
    :func:`rfstream.solvers.ridge.gram.symmetric_spans`); an array whose last two axes are
    equal counts as packed.  Exact in its data bytes, at most a few hundred bytes more per
    array for the container, when the blocks are symmetric (those of the Gram pass are:
    each fold's ``Z'Z`` is made by SYRK); a block found not symmetric is stored whole.  A
    float64 value whose numbers all are float32 ones takes about half of this (:func:`encode`):
    the sums of a small dataset, where each fold is one block of rows."""
    total = _ZIP_END_BYTES
    for i, value in enumerate(values):
        shape, dtype = tuple(int(s) for s in value[0]), np.dtype(value[1])
        spans = list(value[2]) if len(value) > 2 and value[2] else _square_spans(shape)
        n = prod(shape)
        if spans and dtype.kind in "fiu" and dtype.itemsize in (1, 2, 4, 8):
            saved = sum(int(c) * int(d) * (int(d) - 1) // 2 for _, c, d in spans)
            members = [(f"v{i}_packed", (n - saved,), dtype), (f"v{i}_spans", (len(spans), 3), np.int64),
                       (f"v{i}_shape", (len(shape),), np.int64)]
        else:
            members = [(f"v{i}", shape, dtype)]
        for name, mshape, mdtype in members:
            total += (_ZIP_MEMBER_BYTES + 2 * len(name + ".npy") + _npy_header_bytes(mshape, mdtype)
                      + prod(mshape) * np.dtype(mdtype).itemsize)
    return total
