"""What the tests share: ``from helpers.cli import run`` from any folder of tests/.

tests/conftest.py sits in tests/ with no ``__init__.py``, so pytest (prepend import mode) puts
tests/ on ``sys.path`` before any test module is imported, and this package with it.
"""
import importlib
import sys
from pathlib import Path

#: the repository's root (the folder of pyproject.toml, rfstream/, tests/, deploy/, ...)
ROOT = Path(__file__).resolve().parents[2]
#: tests/
TESTS = ROOT / "tests"


def import_test_module(path: str):
    """The test module ``tests/<path>`` (e.g. ``"datadriven/test_tefm.py"``), imported as pytest
    imports it: under its basename, with its folder on ``sys.path``, so that it is one module."""
    file = TESTS / path
    if str(file.parent) not in sys.path:
        sys.path.insert(0, str(file.parent))
    return importlib.import_module(file.stem)
