"""rfstream/io/nofollow.py: every part below the root opened relative to its parent's
descriptor, so a directory swapped for a link in the middle of a read never leads outside."""
import os
import shutil

import numpy as np
import pytest

from rfstream import RandomFourierFeatures, load_model, save_model
from rfstream.io import nofollow
from rfstream.io.model_checks import ModelFileError


def test_a_link_anywhere_below_the_root_is_refused(tmp_path):
    (tmp_path / "root" / "real").mkdir(parents=True)
    (tmp_path / "root" / "real" / "f").write_bytes(b"inside")
    (tmp_path / "root" / "link").symlink_to("real")
    (tmp_path / "root" / "flink").symlink_to("real/f")
    root = str(tmp_path / "root")
    assert nofollow.read_file(root, "real/f", 100) == b"inside"
    for name in ("link/f", "flink"):
        with pytest.raises(nofollow.Refused, match="symbolic link"):
            nofollow.read_file(root, name, 100)
    assert nofollow.read_file(root, "real/none", 100) is None
    with pytest.raises(nofollow.Refused, match="more than the 3"):
        nofollow.read_file(root, "real/f", 3)
    with pytest.raises(nofollow.Refused, match="not a regular file"):
        nofollow.read_file(root, "real", 100)
    with pytest.raises(nofollow.Refused, match="plain name"):
        nofollow.read_file(root, "../root/real/f", 100)


def test_a_model_whose_arrays_are_swapped_for_a_link_mid_load_reads_nothing_outside(tmp_path, monkeypatch):
    """The race of the review: ``arrays/`` replaced by a link to a copy outside between the
    loader's look and its open (here: right when the first array is about to be opened)."""
    X = np.random.default_rng(0).standard_normal((20, 3))
    model = tmp_path / "model"
    save_model(RandomFourierFeatures(n_components=4, random_state=0).fit(X), str(model))
    outside = tmp_path / "outside"
    shutil.copytree(model / "arrays", outside)  # the same bytes: only where they are read from differs
    opened, real_open, swapped = [], os.open, []

    def swapping_open(path, flags, *args, **kwargs):
        name = os.fspath(path)
        if not swapped and (name.endswith(".npy") or name == "arrays"):  # the array's open begins
            swapped.append(True)
            shutil.rmtree(model / "arrays")
            (model / "arrays").symlink_to(outside)
        fd = real_open(path, flags, *args, **kwargs)
        opened.append(os.path.realpath(f"/proc/self/fd/{fd}"))
        return fd

    monkeypatch.setattr(os, "open", swapping_open)
    with pytest.raises(ModelFileError, match="symbolic link"):
        load_model(str(model))
    monkeypatch.undo()
    assert not [p for p in opened if p.startswith(str(outside))]


def test_a_committed_version_swapped_for_a_link_is_never_followed(tmp_path, monkeypatch):
    """A store's layout on a local disk (``DST/rfstream-commit.json`` naming ``v-<hex>``): the
    version is a part below the destination, opened without following a link even when it
    is swapped after the reader's check."""
    X = np.random.default_rng(0).standard_normal((20, 3))
    dst = tmp_path / "dst"
    save_model(RandomFourierFeatures(n_components=4, random_state=0).fit(X), str(tmp_path / "saved"))
    dst.mkdir()
    shutil.copytree(tmp_path / "saved", dst / "v-0a1b")
    (dst / "rfstream-commit.json").write_text('{"format": "rfstream-commit", "current": "v-0a1b"}')
    assert load_model(str(dst)).n_components == 4
    outside = tmp_path / "outside"
    shutil.copytree(tmp_path / "saved", outside)
    real_open, swapped = os.open, []

    def swapping_open(path, flags, *args, **kwargs):
        if not swapped and os.fspath(path) == str(dst):  # after resolve_committed looked at v-0a1b
            swapped.append(True)
            shutil.rmtree(dst / "v-0a1b")
            (dst / "v-0a1b").symlink_to(outside)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping_open)
    with pytest.raises(ModelFileError, match="symbolic link"):
        load_model(str(dst))
    assert swapped
