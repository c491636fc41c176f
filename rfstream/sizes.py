"""The bounds on every size read from outside: a file, a schema, metadata, a model, a flag.

A size that decides an allocation (a line, a width, a chunk, a count of chunks, a model's
width) is checked here against the memory plan before anything of that size exists; a size
over its bound is one :class:`SizeError` line naming the value, the limit and the fix (exit 2
at the command line).  Rows per block are chosen from the width (:func:`block_rows`), so a
block of rows stays near :data:`BLOCK_BYTES` however wide the data.  The client's share of
memory (:func:`client_limit`) is the one the solvers' memory plan uses
(:mod:`rfstream.solvers.memory`).  The table of bounds: docs/robustness.md, "Sizes".
"""
from __future__ import annotations

import psutil

from .options import ParameterError

#: The share of this machine's memory the client may use.
CLIENT_SHARE = 0.8
#: The longest line of text read (CSV, LIBSVM; after decompression).
MAX_LINE_BYTES = 16 * 2**20
#: What one block of rows may hold in memory: a Zarr chunk rfstream writes, a parsed frame.
BLOCK_BYTES = 64 * 2**20
#: The bytes one text field costs once parsed (a Python str and its pointer).
TEXT_CELL_BYTES = 64
#: The fewest rows a block may have: a width is refused where this many rows exceed a block.
MIN_BLOCK_ROWS = 16
#: The most columns a dataset may have (a float32 block of :data:`MIN_BLOCK_ROWS` rows).
MAX_FEATURES = BLOCK_BYTES // (4 * MIN_BLOCK_ROWS)
#: The largest chunk a dataset read may declare (decoded), rfstream's own being
#: :data:`BLOCK_BYTES` at most.
MAX_CHUNK_BYTES = 4 * BLOCK_BYTES
#: The most row chunks a dataset read may have (each is a task and a tuple entry).
MAX_ROW_CHUNKS = 2**16


class SizeError(ParameterError):
    """A size read from input, a model, metadata or the command line over its bound."""


def client_limit() -> int:
    """The bytes the client may use: :data:`CLIENT_SHARE` of this machine's memory."""
    return int(CLIENT_SHARE * psutil.virtual_memory().total)


def check_size(what: str, value: int, limit: int, fix: str, **params) -> int:
    """``value`` if it is at most ``limit``, else one :class:`SizeError` line: "``what`` is
    ``value``, over the limit of ``limit``; ``fix``" (``params``: the parameters ``fix`` names,
    as :class:`~rfstream.options.ParameterError` takes them)."""
    if value > limit:
        raise SizeError(f"{what} is {value:,}, over the limit of {limit:,}; {fix}", **params)
    return int(value)


def check_width(width: int, where: str) -> int:
    """Refuse a dataset of more than :data:`MAX_FEATURES` columns before its names or a
    block of it are made."""
    return check_size(f"{where}: the number of features", int(width), MAX_FEATURES,
                      "a dataset rfstream reads has fewer columns (is an index or the schema wrong?)")


#: Rows of one block a model's output is made in (predict, transform, the probe at load):
#: :data:`rfstream.features.fused.FUSED_SUB_BLOCK`.
MODEL_BLOCK_ROWS = 4096


def check_model_width(width: int, where: str) -> int:
    """Refuse an estimator of a loaded model whose output is wider than a block of
    :data:`MODEL_BLOCK_ROWS` float64 rows can hold in half the client's memory
    (:func:`client_limit`), or than :data:`MAX_FEATURES`: a parameter of a few bytes in
    ``model.json`` (``sample_steps``, ``n_components``) that would cost GBs to run."""
    limit = min(MAX_FEATURES, client_limit() // (2 * 8 * MODEL_BLOCK_ROWS))
    return check_size(f"{where}: its output width", int(width), limit,
                      "the model asks for more memory than the plan allows; it is not one rfstream fits here")


def block_rows(width: int, rows: int, cell_bytes: int = 4) -> int:
    """The rows of one block of ``width`` columns of ``cell_bytes`` each: ``rows``, or fewer
    so that the block stays within :data:`BLOCK_BYTES` (at least one)."""
    return max(1, min(int(rows), BLOCK_BYTES // max(1, int(width) * int(cell_bytes))))
