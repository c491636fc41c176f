"""Data passes as reductions of small pure functions: the one door for every pass over the rows.

A *chunk function* maps one row block (and its global row offset) to a flat float64 vector
of partials; a tree reduction combines the vectors and only the result reaches the client.
Dask input runs it through ``map_blocks`` (one fused task per row block: the n x D features
never exist); numpy input over :data:`NUMPY_BLOCK`-row slices.  :class:`Layout` packs named
partials into one vector.  Moments merge by Chan, Golub & LeVeque (1979).
Narrative: docs/design-notes.md, "rfstream/reductions.py".
"""
from __future__ import annotations

from collections import OrderedDict
from functools import partial
from math import prod

import dask
import dask.array as da
import numpy as np

from .devices import array_namespace, is_numpy, to_host
from .triangles import pack, packed_size, unpack

NUMPY_BLOCK = 65536


class Layout:
    """Named shapes packed into one flat float64 vector.

    >>> lay = Layout(n=(), s=(3,), g=(3, 3))
    >>> lay.size
    13
    """

    def __init__(self, **shapes):
        self.shapes = {k: tuple(v) for k, v in shapes.items()}
        self.slices = {}
        start = 0
        for name, shape in self.shapes.items():
            size = prod(shape)
            self.slices[name] = slice(start, start + size)
            start += size
        self.size = start

    def empty(self) -> np.ndarray:
        return np.zeros(self.size, dtype=np.float64)

    def view(self, vec: np.ndarray, name: str) -> np.ndarray:
        """A writable view of one partial inside ``vec``."""
        return vec[self.slices[name]].reshape(self.shapes[name])

    def unpack(self, vec: np.ndarray) -> dict:
        return {name: self.view(vec, name) for name in self.shapes}

    def square_spans(self, *names, base: int = 0) -> list:
        """``(offset, count, size)`` of the named parts' square matrices (their last two axes,
        ``size`` at least 2) in a flat vector where this layout starts at ``base``: the
        ``symmetric=`` spans of :func:`sum_rows` for parts the chunk makes symmetric."""
        spans = []
        for name in names:
            shape = self.shapes[name]
            if len(shape) >= 2 and shape[-1] == shape[-2] >= 2:
                spans.append((base + self.slices[name].start, prod(shape[:-2]), shape[-1]))
        return spans

    def scale_parts(self, vec: np.ndarray, factor: float, **degrees) -> None:
        """Multiply each named part of ``vec`` in place by ``factor ** degree``: the partials
        of features ``factor`` times the ones summed (degree 1 for sums of the features, 2
        for their products with each other)."""
        for name, degree in degrees.items():
            self.view(vec, name)[...] *= factor**degree


def _offset_of(block_info) -> int:
    return int(block_info[0]["array-location"][0][0])


def _apply_block(*blocks, fn, size, flat, block_info=None, **kwargs):
    blocks = [b.ravel() if f else b for b, f in zip(blocks, flat)]
    out = fn(*blocks, offset=_offset_of(block_info), **kwargs)
    if out.shape != (size,):
        raise RuntimeError(f"chunk function returned shape {out.shape}, expected ({size},)")
    return out[None, :]


def align_rows(X, *others):
    """Rechunk dask arrays so that every array shares X's row chunks and has a
    single chunk along its other axes (what a chunk function expects)."""
    rows = X.chunks[0]
    out = [X.rechunk({1: -1}) if X.ndim == 2 else X]
    for a in others:
        if a is None:
            out.append(None)
            continue
        spec = {0: rows}
        if a.ndim == 2:
            spec[1] = -1
        out.append(a.rechunk(spec))
    return out


def even_chunks(n: int, k: int) -> tuple:
    """``k`` sizes that add up to ``n`` and differ by at most one, the larger first."""
    return tuple(n // k + (i < n % k) for i in range(k))


def even_row_chunks(chunks: tuple, tolerance: float = 0.05) -> tuple:
    """Row chunk sizes cut into as many equal blocks when the given ones leave a round part empty.

    When ``len(chunks) * max(chunks)`` exceeds ``(1 + tolerance)`` times the rows, the rows
    are cut into the same number of equal blocks (none larger); otherwise ``chunks`` come
    back as they are.  The cut depends on the sizes only, never on the workers
    (docs/design-notes.md, "rfstream/reductions.py").
    """
    chunks = tuple(chunks)
    if len(chunks) < 2 or any(np.isnan(chunks)):
        return chunks
    n = sum(chunks)
    if len(chunks) * max(chunks) <= (1 + tolerance) * n:
        return chunks
    return even_chunks(n, len(chunks))


def even_rows(X, tolerance: float = 0.05):
    """``X`` with its rows cut into as many blocks as before, all of one size
    when the last is short (:func:`even_row_chunks`)."""
    rows = even_row_chunks(X.chunks[0], tolerance)
    return X if rows == X.chunks[0] else X.rechunk({0: rows})


def shared(value):
    """``value`` as one graph key (a pure ``dask.delayed``) for what every task of a pass takes."""
    return dask.delayed(value, pure=True, traverse=False)


def chunk_name(fn) -> str:
    """The name of the chunk function inside ``fn`` (through ``functools.partial`` layers, a
    ``chunk=`` keyword and a spec's ``chunk``, e.g. the Gram pass's ``gram_chunk``): the prefix
    of the keys of the pass's partials, by which the progress names the pass."""
    for _ in range(8):
        if not isinstance(fn, partial):
            break
        inner = getattr(fn.keywords.get("spec"), "chunk", None)
        inner = inner if callable(inner) else fn.keywords.get("chunk")
        fn = inner if callable(inner) else fn.func
    return getattr(fn, "__name__", "partials").lstrip("_") or "partials"


def block_partials(fn, size: int, X, *others, **kwargs):
    """Lazy ``(n_blocks, size)`` float64 array: ``fn(x, *o, offset=row0)`` per block.

    ``fn`` receives numpy row blocks of ``X`` and of each array in ``others``
    (aligned by rows) and the global index of the block's first row; it travels as
    one key of the graph (:func:`shared`).
    """
    arrays = [a for a in align_rows(X, *others) if a is not None]
    # 1-D arrays would broadcast against the column axis: lift them to 2-D
    # columns for the blockwise alignment and flatten them again in the task.
    flat = tuple(a.ndim == 1 for a in arrays)
    arrays = [a[:, None] if f else a for a, f in zip(arrays, flat)]
    return da.map_blocks(
        partial(_apply_block, size=size, flat=flat),
        *arrays,
        fn=shared(fn),
        token=chunk_name(fn),  # the graph's key names say which pass this is (rfstream.cluster.pass_label)
        chunks=((1,) * arrays[0].numblocks[0], (size,)),
        dtype=np.float64,
        meta=np.empty((0, 0), dtype=np.float64),
        **kwargs,
    )


def _add_blocks(blocks, axis=0, keepdims=True):
    """Sum of a list of ``(1, size)`` partials, added in place into one new array rather than
    concatenated first as ``Array.sum`` does (docs/design-notes.md); the inputs are never modified.
    One partial is its own sum, returned as it is: a pass over one block (a small dataset) does not
    copy its partials (320 MB of new pages for 8 gammas x 5 folds at D = 1,000)."""
    blocks = list(_flatten(blocks))
    if len(blocks) == 1:
        return blocks[0] if keepdims else blocks[0].reshape(-1)
    total = np.add(blocks[0], blocks[1])
    for b in blocks[2:]:
        np.add(total, b, out=total)
    return total if keepdims else total.reshape(-1)


def _flatten(blocks):
    for b in blocks if isinstance(blocks, (list, tuple)) else [blocks]:
        if isinstance(b, (list, tuple)):
            yield from _flatten(b)
        else:
            yield b


def sum_rows(fn, size: int, X, *others, blocks=None, split_every=None, symmetric=None, **kwargs):
    """Sum of ``fn`` partials over the row blocks: lazy for dask, eager for numpy.

    ``blocks`` restricts the sum to those row-block indices (dask chunks, or
    :data:`NUMPY_BLOCK`-row slices of a numpy array); the other blocks are
    never read.  Returns a dask array of shape ``(size,)`` for dask input
    (call :func:`rfstream.cluster.compute` on it) and a numpy array otherwise.

    ``symmetric``: spans ``(offset, count, size)`` of symmetric matrices in every partial
    (:mod:`rfstream.triangles`).  Over more than one dask block, each task then returns its
    partial with those matrices as upper triangles, the tree adds the triangles, and the
    result has :func:`rfstream.triangles.packed_size` numbers: :func:`whole_sum` restores it
    on the client (docs/scaling.md, "The triangle").
    """
    if isinstance(X, da.Array):
        if symmetric and X.numblocks[0] > 1 and (blocks is None or len(blocks) > 1):
            fn, size = partial(_triangles_of, chunk=fn, spans=tuple(symmetric)), packed_size(size, symmetric)
        parts = block_partials(fn, size, X, *others, **kwargs)
        if blocks is not None:
            parts = parts.blocks[np.sort(np.asarray(blocks))]
        return _tree(parts, _add_blocks, partial(_add_blocks, keepdims=False), False, split_every)
    total = np.zeros(size, dtype=np.float64)
    for part in _numpy_partials(fn, X, others, kwargs, blocks):
        total += part
    return total


def _triangles_of(*blocks, chunk, spans, **kwargs):
    """``chunk``'s partial of a block with its symmetric matrices at ``spans`` packed."""
    return pack(chunk(*blocks, **kwargs), spans)


def whole_sum(total, size: int, symmetric):
    """A :func:`sum_rows` result of ``size`` numbers, its triangles (``symmetric``) mirrored
    back where the pass packed them (its length says so)."""
    total = np.asarray(total)
    if total.size == size or not symmetric:
        return total
    whole = unpack(total, symmetric, size)
    if whole is None:
        raise ValueError(f"a sum of {total.size} numbers is neither {size} nor their packed triangles")
    return whole


#: Names of the last results :func:`_tree` made: one chunk whose value is a new array, the sum of
#: a pass's partials, which nothing else holds (:func:`fresh_sum`).  Bounded: a name forgotten
#: costs only dask's copy.
_FRESH_SUMS: OrderedDict[str, None] = OrderedDict()
FRESH_SUMS_KEPT = 256


def fresh_sum(collection) -> bool:
    """Whether ``collection`` is a pass's reduced partials (:func:`sum_rows`, :func:`reduce_rows`):
    one chunk whose value no graph or worker keeps, so that it needs no copy when computed.
    dask copies any one-chunk array's value in case it aliases the graph, which for a Gram of 8
    gammas x 5 folds at D = 1,000 is 320 MB of new pages (:func:`rfstream.cluster.compute`)."""
    return getattr(collection, "name", None) in _FRESH_SUMS


def _tree(parts, combine, aggregate, concatenate, split_every):
    """The tree reduction of the ``(n_blocks, size)`` partials ``parts`` to one ``(size,)``."""
    total = da.reduction(parts, chunk=_pass_through, combine=combine, aggregate=aggregate, axis=0,
                         concatenate=concatenate, dtype=np.float64, split_every=split_every,
                         meta=np.empty((0,), dtype=np.float64))
    _FRESH_SUMS[total.name] = None
    _FRESH_SUMS.move_to_end(total.name)
    while len(_FRESH_SUMS) > FRESH_SUMS_KEPT:
        _FRESH_SUMS.popitem(last=False)
    return total


def _numpy_partials(fn, X, others, kwargs, blocks=None):
    """``fn``'s partial of each :data:`NUMPY_BLOCK`-row slice of a numpy ``X`` (and ``others``),
    only of the slices numbered in ``blocks`` when given."""
    keep = None if blocks is None else set(int(b) for b in blocks)
    for i, start in enumerate(range(0, max(X.shape[0], 1), NUMPY_BLOCK)):
        if keep is not None and i not in keep:
            continue
        stop = min(start + NUMPY_BLOCK, X.shape[0])
        arrays = [None if a is None else a[start:stop, ...] for a in (X, *others)]
        yield fn(*[a for a in arrays if a is not None], offset=start, **kwargs)


def _pass_through(x, axis=0, keepdims=True):
    return x


def reduce_rows(fn, combine, size: int, X, *others, split_every=None, **kwargs):
    """A tree reduction of ``fn`` partials over the row blocks whose combination is not a sum.

    ``fn`` as for :func:`sum_rows`; ``combine(parts, axis=0, keepdims=True)`` merges the rows
    of a ``(k, size)`` stack of partials into one (``keepdims=False``: a ``(size,)`` vector).
    Lazy for dask input (call :func:`rfstream.cluster.compute` on it), numpy otherwise.
    """
    if isinstance(X, da.Array):
        parts = block_partials(fn, size, X, *others, **kwargs)
        return _tree(parts, combine, partial(_aggregate, combine=combine), True, split_every)
    return combine(np.array(list(_numpy_partials(fn, X, others, kwargs))), keepdims=False)


def _aggregate(parts, axis=0, keepdims=False, *, combine):
    return combine(parts, axis=axis, keepdims=False)


# --- moments: count, mean and centred second moment, combined exactly --------

#: Rows of a block that :func:`moments_chunk` takes to float64 at a time (a buffer of about 2 MB
#: for 100 columns, in cache, instead of the block's float64 copies).
MOMENTS_SUB_BLOCK = 2048


def moments_chunk(x, offset=0, extrema=False):
    """Partials ``[n, mean (d), M2 (d)]`` of one block, in float64, and with ``extrema`` each
    column's ``[min (d), max (d)]`` after them (rows on a device: made there, in their
    namespace, :func:`device_moments`).

    One read of the block, :data:`MOMENTS_SUB_BLOCK` rows at a time taken to float64 in one
    reused buffer: each sub-block's mean and centred sum of squares (column sums as a product
    with ones, BLAS's, not numpy's row-by-row ``sum(axis=0)``), merged into the block's by
    Chan, Golub & LeVeque's update (:func:`moments_combine`'s).  Before, the block's float64
    copy and its temporaries made the moments pass 3-6x a pass that only decodes the rows
    (docs/BENCHMARKS.md, "The small passes against the decode")."""
    if not is_numpy(x):
        return device_moments(x, extrema)
    x = np.asarray(x)
    n, d = x.shape
    step = max(1, min(n, MOMENTS_SUB_BLOCK))
    buf, ones = np.empty((step, d)), np.ones(step)
    mean, m2, count = np.zeros(d), np.zeros(d), 0
    with np.errstate(invalid="ignore", over="ignore"):  # inf in x: non-finite moments, reported by the caller
        for start in range(0, n, step):
            b = buf[:min(step, n - start)]
            k = b.shape[0]
            b[...] = x[start:start + step]
            sub_mean = (ones[:k] @ b) / k
            np.subtract(b, sub_mean, out=b)
            np.multiply(b, b, out=b)
            delta = sub_mean - mean
            total = count + k
            mean += delta * (k / total)
            m2 += ones[:k] @ b + delta * delta * (count * k / total)
            count = total
    parts = [[n], mean, m2]
    if extrema:
        parts += [x.min(axis=0), x.max(axis=0)] if n else [np.full(d, np.inf), np.full(d, -np.inf)]
    return np.concatenate(parts)


def device_moments(x, extrema=False):
    """:func:`moments_chunk` of rows in their array namespace (rfstream.devices); float64 on the host."""
    xp = array_namespace(x)
    n, d = x.shape
    if n == 0:
        empty = [np.full(d, np.inf), np.full(d, -np.inf)] if extrema else []
        return np.concatenate([[0.0], np.zeros(2 * d), *empty])
    x = xp.astype(x, xp.float64)
    mean = xp.mean(x, axis=0)
    m2 = xp.sum((x - mean) ** 2, axis=0)
    parts = [[n], to_host(mean), to_host(m2)]
    if extrema:
        parts += [to_host(xp.min(x, axis=0)), to_host(xp.max(x, axis=0))]
    return np.concatenate(parts)


def moments_combine(parts, axis=0, keepdims=True, extrema=False):
    """Combine rows of ``[n, mean, M2]`` partials (Chan, Golub & LeVeque 1979): no loss of
    precision when the mean is large compared to the spread, unlike sums of x and x**2; with
    ``extrema``, the ``[min, max]`` after them combine by min and max."""
    parts = np.atleast_2d(parts)
    d = (parts.shape[1] - 1) // (4 if extrema else 2)
    n = parts[:, 0]
    total = n.sum()
    means, m2s = parts[:, 1 : 1 + d], parts[:, 1 + d : 1 + 2 * d]
    if total == 0:
        mean = np.zeros(d)
    else:
        mean = (n[:, None] * means).sum(axis=0) / total
    with np.errstate(invalid="ignore", over="ignore"):
        m2 = (m2s + n[:, None] * (means - mean) ** 2).sum(axis=0)
    pieces = [[total], mean, m2]
    if extrema:
        pieces += [parts[:, 1 + 2 * d : 1 + 3 * d].min(axis=0), parts[:, 1 + 3 * d :].max(axis=0)]
    out = np.concatenate(pieces)
    return out[None, :] if keepdims else out


def moments(X, split_every=None, extrema=False):
    """Count, mean and variance of every column in one pass, packed (with ``extrema``, each
    column's minimum and maximum too, in the same pass): lazy for dask input, numpy otherwise;
    :func:`unpack_moments` gives ``(n, mean, var)`` of the computed vector and
    :func:`unpack_extrema` ``(min, max)``."""
    if not extrema:
        return reduce_rows(moments_chunk, moments_combine, 1 + 2 * X.shape[1], X, split_every=split_every)
    return reduce_rows(partial(moments_chunk, extrema=True), partial(moments_combine, extrema=True),
                       1 + 4 * X.shape[1], X, split_every=split_every)


def unpack_moments(vec, extrema=False):
    """``(n, mean, var)`` of a computed :func:`moments` vector (``extrema``: one made with them)."""
    vec = np.asarray(vec, dtype=np.float64)
    d = (vec.shape[0] - 1) // (4 if extrema else 2)
    n = vec[0]
    return n, vec[1 : 1 + d], vec[1 + d : 1 + 2 * d] / max(n, 1.0)


def unpack_extrema(vec):
    """``(min, max)`` per column of a computed ``moments(X, extrema=True)`` vector."""
    vec = np.asarray(vec, dtype=np.float64)
    d = (vec.shape[0] - 1) // 4
    return vec[1 + 2 * d : 1 + 3 * d], vec[1 + 3 * d :]
