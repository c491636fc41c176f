"""A checkpoint proportional to the job: symmetric blocks stored as packed triangles and
restored bit for bit, the size predicted from the shapes, old files still read, and a file
that declares more than it holds refused before anything is allocated."""
from __future__ import annotations

import hashlib
import io
import json
import zipfile

import dask.array as da
import numpy as np
import pytest

from rfstream import RandomFourierFeatures, StreamingRidgeClassifier
from rfstream.io.checkpoints import MANIFEST, CheckpointMismatch, resumable, stored_nbytes
from rfstream.io.pass_encoding import decode, encode, symmetric_blocks
from rfstream.solvers.ridge.gram import checkpoint_nbytes, gram_layout, symmetric_spans
from rfstream.triangles import packed_size


def _same_bits(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        np.asarray(a).view(np.uint8), np.asarray(b).view(np.uint8))


def _symmetric(rng, *shape):
    a = rng.normal(size=shape)
    return a + np.swapaxes(a, -1, -2)


def test_symmetric_blocks_are_packed_and_restored_bit_for_bit():
    rng = np.random.default_rng(0)
    stack = _symmetric(rng, 3, 40, 40)
    stack[0, 1, 2] = stack[0, 2, 1] = -0.0  # bits that == alone would not keep
    stack[1, 5, 5], stack[2, 3, 4] = np.nan, np.inf
    stack[2, 4, 3] = np.inf
    lopsided = _symmetric(rng, 30, 30)
    lopsided[0, 1], lopsided[1, 0] = -0.0, 0.0  # equal as numbers, not as bits: stored whole
    values = (stack, lopsided, _symmetric(rng, 20, 20).astype(np.float32), np.arange(12).reshape(3, 4),
              np.array(2.5), np.array(["a", "bc"], dtype=object))
    data = encode(values)
    back = decode(data, len(values))
    for a, b in zip(values[:4], back[:4]):
        assert _same_bits(a, b)
    assert back[4] == 2.5 and list(back[5]) == ["a", "bc"] and back[5].dtype == object
    names = np.load(io.BytesIO(data)).files
    assert {"v0_packed", "v1", "v2_packed", "v3"} <= set(names)  # the lopsided one whole


def test_float64_values_that_are_float32_numbers_are_stored_in_half_the_bytes():
    """Sums of float32 products that stayed float32 numbers (one block of rows per fold):
    stored in float32, widened back to the same bits; one value that is not a float32 number
    keeps the whole array in float64."""
    rng = np.random.default_rng(3)
    exact = _symmetric(rng, 2, 60, 60).astype(np.float32).astype(np.float64)
    exact[0, 0, 0], exact[1, 2, 2], exact[1, 3, 3] = -0.0, np.inf, np.nan
    flat = exact.ravel().copy()
    data = encode((exact, flat))
    back = decode(data, 2)
    assert _same_bits(back[0], exact) and _same_bits(back[1], flat)
    assert {"v0_packed_f32", "v1_f32"} <= set(np.load(io.BytesIO(data)).files)
    assert len(data) < 0.3 * exact.nbytes + 0.55 * flat.nbytes
    flat[-1] = 0.1  # not a float32 number
    assert _same_bits(decode(encode((flat,)), 1)[0], flat) and len(encode((flat,))) > flat.nbytes


def test_declared_blocks_of_a_flat_vector_are_packed_and_checked():
    rng = np.random.default_rng(1)
    blocks = _symmetric(rng, 2, 25, 25)
    flat = np.concatenate([rng.normal(size=7), blocks.ravel(), rng.normal(size=9)])
    with symmetric_blocks([(7, 2, 25)]):
        data = encode((flat,))
    assert _same_bits(decode(data, 1)[0], flat)
    assert len(data) < 0.55 * flat.nbytes + 2000
    flat[7 + 1] += 1.0  # no longer symmetric: stored whole, still exact
    with symmetric_blocks([(7, 2, 25)]):
        whole = encode((flat,))
    assert len(whole) > flat.nbytes and _same_bits(decode(whole, 1)[0], flat)


def test_stored_nbytes_bounds_what_is_written():
    rng = np.random.default_rng(2)
    values = [np.array(1.0), np.arange(5, dtype=np.int32), rng.normal(size=(4, 6)), _symmetric(rng, 2, 9, 9),
              np.zeros((3, 1, 1)), np.array(["x", "yy"])]
    for v in values:
        written = len(encode((v,)))
        predicted = stored_nbytes([(v.shape, v.dtype)])
        assert written <= predicted <= written + 1024, (v.shape, written, predicted)


def _gram_fit(X, y, n_components=500, alpha=(0.1, 1.0)):
    fmap = RandomFourierFeatures(n_components, gamma=0.2, random_state=0).fit(X)
    return StreamingRidgeClassifier(alpha=list(alpha), solver="gram", cv=5).fit(fmap.transform(X), y)


@pytest.fixture()
def data():
    rng = np.random.default_rng(0)
    X = da.from_array(rng.normal(size=(1200, 4)).astype(np.float32), chunks=400)
    y = da.from_array((rng.normal(size=1200) + X[:, 0].compute() > 0).astype(int), chunks=400)
    return X, y


def _gram_step(location):
    steps = json.loads((location / MANIFEST).read_text())["steps"]
    return max(steps, key=lambda s: s["bytes"])


def test_a_d500_gram_pass_is_stored_in_about_half_its_bytes_and_resumes_to_the_same_model(data, tmp_path):
    """The Gram pass of D = 500, two classes (one target column), one alpha: its flat float64
    vector is K (D^2 + ...) x 8 bytes; stored with Z'Z as its upper triangle, at
    most 0.55 of that (no compression), predicted by checkpoint_nbytes to within 10% above;
    every pass replayed gives the model of the first run to the last bit."""
    where = tmp_path / "ck"
    with resumable(where, "job") as first:
        reference = _gram_fit(*data, alpha=[0.1])
    step = _gram_step(where)
    # the pass's vector: whole, or (over several row blocks) each Z'Z as its triangle; 5 folds for
    # the calibration's CV
    sizes = {f: (gram_layout(500, 1, f).size, packed_size(gram_layout(500, 1, f).size,
                                                          symmetric_spans(gram_layout(500, 1, f), 1)))
             for f in (1, 5)}
    (folds,) = [f for f, both in sizes.items() if step["signature"][0][1][0] in both]
    full = sizes[folds][0] * 8
    assert step["bytes"] <= 0.55 * full
    predicted = checkpoint_nbytes(1, folds, 500, 1)
    assert step["bytes"] <= predicted <= 1.1 * step["bytes"]
    with resumable(where, "job") as again:
        resumed = _gram_fit(*data, alpha=[0.1])
    assert again.reused == len(first.steps) >= 1
    assert _same_bits(resumed.coef_, reference.coef_) and _same_bits(resumed.intercept_, reference.intercept_)
    assert resumed.alpha_ == reference.alpha_
    again.remove()


def test_a_pass_written_by_the_previous_format_is_read(data, tmp_path):
    """The format before packing (``np.savez`` of ``v0``, no ``bytes`` in the manifest) is a
    case of this one: such a checkpoint resumes to the same model."""
    where = tmp_path / "ck"
    with resumable(where, "job"):
        reference = _gram_fit(*data, n_components=64)
    manifest = json.loads((where / MANIFEST).read_text())
    for step in manifest["steps"]:
        values = decode((where / step["file"]).read_bytes(), step["count"])
        buf = io.BytesIO()
        np.savez(buf, **{f"v{i}": np.asarray(v) for i, v in enumerate(values)})  # the old writer
        (where / step["file"]).write_bytes(buf.getvalue())
        step["sha256"] = hashlib.sha256(buf.getvalue()).hexdigest()
        del step["bytes"]
    (where / MANIFEST).write_text(json.dumps(manifest))
    with resumable(where, "job") as again:
        resumed = _gram_fit(*data, n_components=64)
    assert again.reused == len(manifest["steps"]) and again.nbytes == 0
    assert _same_bits(resumed.coef_, reference.coef_)
    again.remove()


def _rewrite_pass(where, data):
    manifest = json.loads((where / MANIFEST).read_text())
    (where / manifest["steps"][0]["file"]).write_bytes(data)
    manifest["steps"][0]["sha256"] = hashlib.sha256(data).hexdigest()  # a writer who rewrites both
    (where / MANIFEST).write_text(json.dumps(manifest))


def _one_pass():
    from rfstream.cluster import compute

    return compute(da.ones((4, 4), chunks=2) * 2)


@pytest.mark.parametrize("forge", ["huge_shape", "spans_overflow", "not_zip"])
def test_a_pass_that_declares_more_than_it_holds_is_refused_before_allocating(tmp_path, forge):
    where = tmp_path / "ck"
    with resumable(where, "job"):
        _one_pass()
    buf = io.BytesIO()
    if forge == "huge_shape":  # a member of a few bytes whose header declares 8 TB
        npy = io.BytesIO()
        np.lib.format.write_array_header_1_0(npy, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("v0.npy", npy.getvalue() + bytes(64))
        data = buf.getvalue()
    elif forge == "spans_overflow":  # spans that claim a huge matrix from a few numbers
        np.savez(buf, v0_packed=np.zeros(10), v0_spans=np.array([[0, 1, 10**9]]), v0_shape=np.array([10**9]))
        data = buf.getvalue()
    else:
        data = b"PK\x03\x04 not a zip"
    _rewrite_pass(where, data)
    with pytest.raises(CheckpointMismatch, match="damaged or not rfstream's|not rfstream's|damaged"):
        with resumable(where, "job"):
            _one_pass()
