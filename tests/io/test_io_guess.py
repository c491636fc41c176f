"""What convert guesses from a CSV file's first rows (rfstream.io.guess): the header, and the
label column when none is named; each rule on the shared datasets and on the shapes a new
user brings (digits with the label first, a numeric header with one name)."""
import warnings

import numpy as np
import pytest
from conftest import require_datasets
from helpers.io import write

from rfstream.datasets.registry import DATASETS, source_paths
from rfstream.io import as_location, convert
from rfstream.io.convert import format_of
from rfstream.io.csv import sniff
from rfstream.io.guess import LabelGuessWarning, first_row_is_header, look

#: the label column of each CSV file of the shared datasets, as its PROVENANCE.txt says
DOCUMENTED = {"kddcup99": -1, "adult": -1, "magic_gamma": -1, "letter": 0, "covtype_sample": -1, "magic_demo": -1}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_the_rule_takes_the_documented_label_of_every_shared_csv_without_a_doubt(name):
    folder = None if DATASETS[name].shipped else require_datasets()
    for path in filter(None, source_paths(name, folder)):
        loc = as_location(path)
        assert format_of(loc).name == "csv"
        with warnings.catch_warnings():
            warnings.simplefilter("error", LabelGuessWarning)
            layout = sniff(loc)
        assert layout.label_index == DOCUMENTED[name] % len(layout.names), path
        assert layout.header == (name == "covtype_sample")


def _digits(rng, rows=300):
    return [",".join([str(rng.integers(0, 10))] + [f"{v:.4f}" for v in rng.uniform(-1, 1, 16)]) for _ in range(rows)]


def test_digits_with_the_label_first_are_ten_classes(tmp_path):
    lines = _digits(np.random.default_rng(0))
    s = convert(write(tmp_path / "digits.csv", "\n".join(lines) + "\n"), tmp_path / "d.zarr")
    assert s["label_column"] == 0 and s["task"] == "classification" and len(s["classes"]) == 10


def test_a_numeric_header_with_one_name_is_a_header(tmp_path):
    lines = _digits(np.random.default_rng(1))
    src = write(tmp_path / "h.csv", ",".join(map(str, range(1, 17))) + ",y\n" + "\n".join(lines) + "\n")
    s = convert(src, tmp_path / "h.zarr", label_column="1")  # names, not positions, once it is a header
    assert s["header"] and s["n_rows"] == 300 and s["label_column"] == "1" and len(s["classes"]) == 10
    assert first_row_is_header([["a", "b"], ["1", "x"]])  # a name over numbers
    assert not first_row_is_header([["1", "a"], ["2", "b"]])  # text under text: data
    assert not first_row_is_header([["?", "a"], ["2", "b"]])  # a missing field is no name


def test_a_name_asked_of_a_file_without_a_header_suggests_the_header_flag(tmp_path):
    src = write(tmp_path / "t.csv", "city,label\nParis,A\nLyon,B\nParis,B\n")
    with pytest.raises(ValueError, match=r"label_column='label' is not a column of .*t\.csv: no header row was "
                                         r"found, its first row \(city, label\) was read as data; if that row "
                                         r"names the columns, pass header=True"):
        convert(src, tmp_path / "t.zarr", label_column="label")
    assert convert(src, tmp_path / "t.zarr", label_column="label", header=True)["classes"] == ["A", "B"]


def test_a_float_target_after_counts_and_a_binary_label_after_a_text_feature_stay_last(tmp_path):
    house = write(tmp_path / "house.csv", "city,rooms,price\n" + "".join(
        f"{'PL'[k % 2]},{k % 4 + 1},{100 + 7.25 * k}\n" for k in range(40)))
    assert convert(house, tmp_path / "h.zarr")["label_column"] == "price"
    binary = write(tmp_path / "b.csv", "".join(f"{'PL'[k % 2]},{k * 0.37:.2f},{k % 3 // 2}\n" for k in range(40)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", LabelGuessWarning)
        assert convert(binary, tmp_path / "b.zarr")["label_column"] == 2


def test_a_tie_between_the_ends_warns_naming_both(tmp_path):
    src = write(tmp_path / "tie.csv", "".join(f"{k % 3},{k * 0.5},{k % 2}\n" for k in range(40)))
    with pytest.warns(LabelGuessWarning, match=r"tie\.csv: the label is column 2 \(the last: 2 distinct integer "
                                               r"values\), taken by default; column 0 \(the first: 3 distinct "
                                               r"integer values\) looks as much like a label: if it is the "
                                               r"label, convert again with label_column=0"):
        assert convert(src, tmp_path / "tie.zarr")["label_column"] == 2


def test_column_looks():
    assert look(["a", "b", "a"]).score == 2 and look([str(k) for k in range(100)]).score == 0  # ids
    assert look(["1", "2", "1"]).score == 1 and look(["1", "2", "3"]).score == 0  # nothing repeats
    assert look(["0.5", "1", "0.5"]).kind == "float" and look(["", "?"]).kind == "empty"
