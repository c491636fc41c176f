"""The ``>>>`` examples of rfstream's docstrings run, and every public estimator has one.

Each module of rfstream/ is imported and its doctests (module, class, function and method
docstrings) are run with the standard library's :mod:`doctest`, one test per module that
has examples; a failure shows doctest's report.  A second test checks that the docstring
of every public estimator has a numpydoc "Examples" section with ``>>>`` lines, so that
none is dropped silently.
"""
from __future__ import annotations

import doctest
import importlib
import io
import pkgutil
import re

import pytest

import rfstream
from rfstream.features import CompactRandomFeatures, FastfoodFeatures

OPTIONFLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS

#: the public estimators: each class docstring must have an executed Examples section
ESTIMATORS = [
    rfstream.RandomFourierFeatures,
    rfstream.RandomBinningFeatures,
    rfstream.FourierBinningFeatures,
    rfstream.CirculantFeatures,
    rfstream.ArcCosineFeatures,
    FastfoodFeatures,
    CompactRandomFeatures,
    rfstream.NystroemFeatures,
    rfstream.PolynomialCountSketch,
    rfstream.AdditiveChi2Sampler,
    rfstream.SkewedChi2Sampler,
    rfstream.TEFM,
    rfstream.SESFeatures,
    rfstream.EERFFeatures,
    rfstream.LKRFFeatures,
    rfstream.CompactNonlinearMap,
    rfstream.StreamingRidge,
    rfstream.StreamingRidgeClassifier,
    rfstream.StreamingSGDClassifier,
    rfstream.StreamingSGDRegressor,
    rfstream.Standardizer,
]


def package_module_names() -> list:
    """Every module of rfstream (``__main__`` excepted: importing it runs the CLI)."""
    names = [rfstream.__name__]
    for info in pkgutil.walk_packages(rfstream.__path__, prefix=rfstream.__name__ + "."):
        if info.name.rsplit(".", 1)[-1] != "__main__":
            names.append(info.name)
    return sorted(names)


def doctests_of(name: str) -> list:
    """The doctests with examples found in module ``name``'s own docstrings."""
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module, name) if t.examples]


def modules_with_examples() -> list:
    found = []
    for name in package_module_names():
        try:
            has = bool(doctests_of(name))
        except ImportError:  # a module needing an optional extra: its examples cannot run here
            continue
        if has:
            found.append(name)
    return found


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run(name):
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report = io.StringIO()
    for test in sorted(doctests_of(name), key=lambda t: t.name):
        runner.run(test, out=report.write)
    assert runner.failures == 0, f"{runner.failures} of {runner.tries} examples failed " \
                                 f"in {name}:\n{report.getvalue()}"


@pytest.mark.parametrize("cls", ESTIMATORS, ids=lambda c: c.__name__)
def test_public_estimator_has_examples(cls):
    doc = cls.__doc__ or ""
    match = re.search(r"^\s*Examples\n\s*-{8,}\n(.*)", doc, re.MULTILINE | re.DOTALL)
    assert match, f"{cls.__module__}.{cls.__name__}: no numpydoc 'Examples' section"
    assert ">>>" in match.group(1), f"{cls.__name__}: its Examples section has no >>> line"
