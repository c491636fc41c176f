"""Write outputs under a temporary name and rename them when complete.

Nothing half-written is ever left at the destination: a failure deletes the
temporary directory, and an existing output is swapped out only after the new
one is complete.  ``marker`` names the file that proves an existing
destination is ours to replace (``zarr.json`` for a Zarr group, ``model.json``
for a model), so ``overwrite=True`` never deletes an unrelated directory.
"""
from __future__ import annotations

import os
import secrets
import shutil
from contextlib import contextmanager
from pathlib import Path


def check_destination(dst: Path, overwrite: bool, marker: str) -> None:
    if not dst.exists():
        return
    if not overwrite:
        raise FileExistsError(f"{dst} already exists; pass overwrite=True (CLI: --overwrite) to replace it")
    if not (dst / marker).is_file():
        what = "a Zarr dataset" if marker == "zarr.json" else "an rfstream model"
        raise ValueError(
            f"refusing to overwrite {dst}: it is not {what} (no {marker}); remove it "
            "yourself or choose another destination"
        )


@contextmanager
def staging(dst, overwrite: bool, marker: str = "zarr.json"):
    """Yield a temporary sibling path; on success move it onto ``dst``, else delete it."""
    dst = Path(dst)
    check_destination(dst, overwrite, marker)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp-{secrets.token_hex(4)}")
    try:
        yield tmp
        check_destination(dst, overwrite, marker)
        if dst.exists():
            old = dst.with_name(f".{dst.name}.old-{secrets.token_hex(4)}")
            os.replace(dst, old)
            os.replace(tmp, dst)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, dst)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
