"""What the command line imports before a command runs, and what an unknown flag is told.

Not timed (speed belongs in benchmarks/performance/bench_startup.py): each test runs Python in a
fresh process, builds the parser or answers ``--version``, ``--help`` or an argument
error, and looks at ``sys.modules``: no estimator library may be there, so that the
answer costs Python and argparse only.
"""
import json
import subprocess
import sys

import numpy as np
import pytest

import rfstream
from rfstream.cli import build_parser, main

#: what building the parser, --version, --help and an argument error must not import
HEAVY = ("sklearn", "dask.array", "distributed", "scipy", "zarr", "pandas", "rfstream.catalog",
         "rfstream.features", "rfstream.solvers", "rfstream.io")


def imported_after(code):
    """The modules imported by ``code`` in a fresh Python (``SystemExit`` caught)."""
    script = ("import json, sys\n"
              "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) +
              "except SystemExit:\n    pass\n"
              "print(json.dumps(sorted(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(proc.stdout.splitlines()[-1]))


def heavy_in(modules):
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_building_the_parser_imports_no_estimator_library():
    modules = imported_after("import rfstream.cli\n"
                             "parser = rfstream.cli.build_parser()\n"
                             "for sub in parser.subcommands.values():\n"
                             "    sub.format_help()\n"
                             "parser.parse_args(['fit', 'd.zarr', '--out', 'm', '--scheduler', 'tcp://127.0.0.1:8786',"
                             " '--features', 'rff', '--alpha', '0.1,1', '--progress', 'never', '--cv', '3'])")
    assert "rfstream.cli" in modules and not heavy_in(modules)


@pytest.mark.parametrize("argv", [
    ["--version"], ["--help"], ["fit", "--help"], ["bench", "--help"], ["predict", "--help"],
    ["fit", "d.zarr", "--out", "m", "--n_components", "100"],  # an unknown flag
    ["fit", "d.zarr", "--out", "m", "--features", "nope"],  # a bad choice
    ["fit", "d.zarr"],  # a missing argument
    ["fit", "d.zarr", "--out", "m", "--gamma", "auto*x"],  # a bad type (numpy only, for the grid's grammar)
    ["fit", "d.zarr", "--out", "m", "--n-components", "0,10"],
], ids=lambda argv: " ".join(argv))
def test_version_help_and_argument_errors_import_no_estimator_library(argv):
    modules = imported_after(f"from rfstream.cli import main\nmain({argv!r})")
    assert not heavy_in(modules)


def test_import_rfstream_imports_nothing_heavy_and_every_public_name_is_there():
    modules = imported_after("import rfstream\nrfstream.__version__")
    assert not heavy_in(modules)
    # each public name is imported on first use (PEP 562), listed by dir(), and importable by name
    assert set(rfstream.__all__) <= set(dir(rfstream))
    for name in rfstream.__all__:
        assert getattr(rfstream, name) is not None, name
    from rfstream import KernelPCA, RandomFourierFeatures, load_model  # noqa: F401
    assert rfstream.io.open_dataset is not None  # a submodule, as after import rfstream.io
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        rfstream.nope  # noqa: B018


def test_every_subcommand_names_a_function_of_the_commands_module():
    from rfstream.cli import commands

    for name, sub in build_parser().subcommands.items():
        func = sub.get_default("func")
        assert callable(getattr(commands, func.args[0])), (name, func.args[0])


def run_error(capsys, argv):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


def test_an_unknown_flag_is_told_the_nearest_known_one(capsys):
    err = run_error(capsys, ["fit", "data.zarr", "--out", "m", "--n_components", "100"])
    assert err.startswith("rfstream fit: error: unrecognized arguments: 2 word(s), among them --n_components; "
                          "did you mean --n-components? (see rfstream fit --help)")
    err = run_error(capsys, ["fit", "data.zarr", "--out", "m", "--alhpa", "3", "--ridge_solver", "gram"])
    assert "did you mean --alpha and --ridge-solver?" in err
    # the subcommand's own flags: --landmarks is fit's, not info's
    assert "did you mean" not in run_error(capsys, ["info", "x.zarr", "--landmarks", "uniform"])
    assert "did you mean --version?" in run_error(capsys, ["--verison", "info", "x.zarr"])


def test_a_hint_never_echoes_a_value(capsys):
    err = run_error(capsys, ["info", "x.zarr", "--storage-opts", '{"key": "AKIAECHOED"}', "--x_array=s3cr3t"])
    assert "did you mean --storage-options and --x-array?" in err
    assert "AKIAECHOED" not in err and "s3cr3t" not in err and "--x_array" not in err


def test_rfstream_io_names_the_functions_whatever_was_imported_first():
    """rfstream.io imports its names from their modules (split's and predictions' on first use);
    a submodule imported before (rfstream.io.convert, the module) does not hide the function of
    the same name."""
    code = ("import rfstream.io.convert, rfstream.io.split; from rfstream import io; "
            "print(callable(io.convert), io.convert.__module__, io.split_dataset.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "rfstream.io.convert", "rfstream.io.split"]


def test_a_fit_from_zarr_imports_no_source_reader(tmp_path):
    """The readers of ``convert`` (CSV, LIBSVM, Parquet, npy: pandas and pyarrow behind them) load
    when a conversion calls them; a fit and a prediction from a Zarr dataset do not import them."""
    import numpy as np

    from rfstream.io import write_dataset

    rng = np.random.default_rng(0)
    write_dataset(tmp_path / "d.zarr", rng.normal(size=(300, 4)).astype(np.float32), rng.integers(0, 2, 300))
    modules = imported_after(f"from rfstream.cli import main\n"
                             f"main(['fit', {str(tmp_path / 'd.zarr')!r}, '--out', {str(tmp_path / 'm')!r},"
                             f" '--scheduler', 'threads', '--n-components', '16', '--quiet'])\n"
                             f"main(['predict', {str(tmp_path / 'm')!r}, {str(tmp_path / 'd.zarr')!r}, '--out',"
                             f" {str(tmp_path / 'p.zarr')!r}, '--scheduler', 'threads', '--quiet'])")
    assert "rfstream.solvers.ridge.estimators" in modules and (tmp_path / "p.zarr").exists()
    readers = ("rfstream.io.csv", "rfstream.io.csv_ranges", "rfstream.io.libsvm", "rfstream.io.parquet",
               "rfstream.io.npy", "rfstream.io.guess", "pyarrow.parquet", "pyarrow.csv")
    assert not [m for m in readers if m in modules]


def test_a_conversion_imports_no_dask_array(tmp_path):
    """``rfstream convert`` of a directory of CSV files (tasks on dask's threads, each file read
    by Arrow as a byte range) and its summary import neither dask.array (about a second, with
    xarray installed) nor an estimator library: no part of a conversion needs them."""
    rng = np.random.default_rng(0)
    (tmp_path / "parts").mkdir()
    for k in range(2):
        lines = [f"{rng.normal():.6g},{rng.choice(['a', 'b'])},{rng.integers(0, 2)}" for _ in range(500)]
        (tmp_path / "parts" / f"{k}.csv").write_text("\n".join(lines) + "\n")
    modules = imported_after(f"from rfstream.cli import main\n"
                             f"main(['convert', {str(tmp_path / 'parts')!r}, {str(tmp_path / 'd.zarr')!r},"
                             f" '--scheduler', 'threads'])")
    assert "rfstream.io.csv_ranges" in modules and (tmp_path / "d.zarr").exists()
    assert not [m for m in modules if m == "dask.array" or m.startswith(("dask.array.", "sklearn", "xarray"))]
