"""The shape of the package (docs/ARCHITECTURE.md), read from the source with ``ast``.

Nothing is imported: each module of rfstream/ is parsed and its imports (absolute and
relative, at module level or inside functions) are resolved to modules of rfstream.
Four rules, each a test whose failure names the file and the offending import:

* no import cycle between modules of rfstream (package ``__init__`` modules included);
* no upward import across the layers, lowest first::

      core (the flat modules at the top of rfstream/) < io < datasets < features
      < solvers < datadriven < selection < catalog < jobs < pipeline < bench, cli

  (``rfstream/__init__.py`` is the facade and may import anything);
* no module over 800 lines (cut by concept, not by size);
* nothing in benchmarks/, examples/ or deploy/ imports a private name of rfstream
  (a module or attribute whose name starts with one underscore), nor reaches one
  through a module it imported.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "rfstream"
OUTSIDE = ("benchmarks", "examples", "deploy")  # tests/ may unit-test a module's private helpers
MAX_LINES = 800

#: the flat modules at the top of rfstream/: numerics that know no estimator, file or CLI
CORE = {"kernels", "samplers", "random", "reductions", "triangles", "hadamard", "cluster", "embedded", "preprocess",
        "metrics", "param_lists", "options", "devices", "sizes", "lapack", "_validation", "_version"}
#: layer of each part of the package; a module may import its own layer and those below
LAYERS = {"core": 0, "io": 1, "datasets": 2, "features": 3, "solvers": 4, "datadriven": 5,
          "selection": 6, "catalog": 7, "jobs": 8, "fit_plan": 8,  # the search room; registries and router; the fit path
          "pipeline": 9, "bench": 10, "cli": 10,
          "__main__": 10}  # python -m rfstream: a front end, as cli


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules() -> dict:
    """``{module name: path}`` of every module of rfstream."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = package_modules()


def imports_of(path: Path, name: str):
    """``(line, imported module, statement text)`` for each rfstream module ``path`` imports.

    ``from a import b`` imports the module ``a.b`` when there is one, else ``a``.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "rfstream" or alias.name.startswith("rfstream."):
                    yield node.lineno, alias.name, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            yield from imports_of_node(node, name, path)


def layer_of(module: str):
    """The layer name of a module of rfstream, "facade" for rfstream/__init__.py, or None."""
    parts = module.split(".")
    if len(parts) == 1:
        return "facade"
    if len(parts) == 2 and parts[1] in CORE:
        return "core"
    return parts[1] if parts[1] in LAYERS else None


def graph() -> dict:
    """``{module: [(line, imported module, statement)]}``, rfstream modules only."""
    return {name: sorted(set(imports_of(path, name))) for name, path in MODULES.items()}


def relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


# ------------------------------------------------------------------ the rules
def test_the_source_is_found():
    # the checks below would pass vacuously on an empty package
    assert {"rfstream", "rfstream.pipeline", "rfstream.features.fourier", "rfstream.io.dataset",
            "rfstream.solvers.ridge", "rfstream.cli"} <= set(MODULES)
    edges = graph()
    assert ("rfstream.io" in {m for _, m, _ in edges["rfstream.pipeline"]})


def test_every_module_belongs_to_a_layer():
    unknown = [f"{relative(MODULES[m])}: not in a layer (add it to CORE or LAYERS in "
               "tests/test_architecture.py, and to docs/ARCHITECTURE.md)"
               for m in MODULES if layer_of(m) is None]
    assert not unknown, "\n".join(unknown)


def upward_imports(edges: dict) -> list:
    """``module:line: ...`` for every import of a higher layer (or the facade) in ``edges``."""
    problems = []
    for module, imports in edges.items():
        own = layer_of(module)
        if own in ("facade", None):
            continue
        for line, target, text in imports:
            other = layer_of(target)
            if other == "facade" or (other is not None and LAYERS[other] > LAYERS[own]):
                problems.append(f"{module}:{line}: {text!r} imports {target} ({other}) from the "
                                f"lower layer {own}")
    return problems


def test_upward_import_detector():
    edges = {"rfstream.io.dataset": [(3, "rfstream.pipeline", "from .. import pipeline")],
             "rfstream.features.fourier": [(4, "rfstream", "import rfstream")],
             "rfstream.solvers.ridge": [(5, "rfstream.features.fused", "from ..features import fused")],
             "rfstream.cli.commands": [(6, "rfstream.bench", "from .. import bench")]}
    assert [p.split(":")[:2] for p in upward_imports(edges)] == [["rfstream.io.dataset", "3"],
                                                                ["rfstream.features.fourier", "4"]]


def test_no_upward_import_across_layers():
    problems = upward_imports(graph())
    assert not problems, "upward imports:\n" + "\n".join(problems)


def find_cycles(edges: dict) -> list:
    """Strongly connected components with more than one module (or a self-import)."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]

    def visit(v):  # Tarjan's algorithm
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                cycles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return cycles


def test_find_cycles_finds_them():
    # the detector itself: a 3-cycle, a self-import, and an acyclic chain
    assert find_cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert find_cycles({"a": ["a"]}) == [["a"]]
    assert find_cycles({"a": ["b"], "b": ["c"], "c": []}) == []


def test_no_import_cycles():
    full = graph()
    edges = {m: sorted({t for _, t, _ in e if t in MODULES}) for m, e in full.items()}
    problems = []
    for cycle in find_cycles(edges):
        members = set(cycle)
        lines = [f"  {relative(MODULES[m])}:{line}: {text!r}" for m in cycle
                 for line, t, text in full[m] if t in members]
        problems.append(f"cycle between {', '.join(cycle)}:\n" + "\n".join(lines))
    assert not problems, "\n".join(problems)


def test_no_module_over_800_lines():
    long = [f"{relative(p)}: {n} lines (at most {MAX_LINES})"
            for p in MODULES.values() if (n := len(p.read_text().splitlines())) > MAX_LINES]
    assert not long, "\n".join(long)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(path: Path) -> list:
    """``(line, text)`` where the file imports or reaches a private name of rfstream."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found, bound = [], {}  # bound: local name -> rfstream module path it refers to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "rfstream":
                    continue
                if any(_is_private(p) for p in alias.name.split(".")):
                    found.append((node.lineno, ast.unparse(node)))
                bound[alias.asname or "rfstream"] = alias.name if alias.asname else "rfstream"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] != "rfstream":
                continue
            names = node.module.split(".") + [a.name for a in node.names]
            if any(_is_private(p) for p in names):
                found.append((node.lineno, ast.unparse(node)))
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):  # rfstream.solvers._gram.x, F._block where F is a module
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound and bound[root.id] in MODULES:
                found.append((node.lineno, ast.unparse(node)))
    return sorted(set(found))


def test_private_use_detector(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import rfstream.solvers._gram\n"
        "from rfstream.features.fourier import _project_with_offset, RandomFourierFeatures\n"
        "from rfstream import features as F, __version__\n"
        "import rfstream.features.fourier as fourier\n"
        "x = fourier._block\n"
        "y = F.RandomFourierFeatures()._block\n"  # an object's method: not a module name
    )
    assert [line for line, _ in private_uses(sample)] == [1, 2, 5]


@pytest.mark.parametrize("folder", OUTSIDE)
def test_nothing_outside_imports_a_private_name(folder):
    files = sorted((ROOT / folder).rglob("*.py"))
    problems = [f"{relative(p)}:{line}: {text}" for p in files for line, text in private_uses(p)]
    assert not problems, "private names of rfstream used outside the package:\n" + "\n".join(problems)


#: private core modules every layer uses: the package's own internals, not another layer's
SHARED_INTERNALS = {"rfstream._validation", "rfstream._version"}


def private_imports_across_parts(name: str, path: Path) -> list:
    """``(line, text)`` where module ``name`` imports a private name of another part of rfstream.

    A part is a sub-package (io, features, ...) or the core; inside its own part a
    module may import private names, across parts only public ones.
    """
    own = layer_of(name)
    found = []
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        for _, target, text in imports_of_node(node, name, path):
            if target in SHARED_INTERNALS or layer_of(target) in (own, "facade"):
                continue
            private_module = any(_is_private(p) for p in target.split("."))
            private_name = any(_is_private(a.name) for a in node.names)
            if private_module or private_name:
                found.append((node.lineno, text))
    return sorted(set(found))


def imports_of_node(node, name, path):
    """:func:`imports_of` for one ``from ... import`` statement."""
    text = ast.unparse(node)
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    if source != "rfstream" and not source.startswith("rfstream."):
        return []
    return [(node.lineno, f"{source}.{a.name}" if f"{source}.{a.name}" in MODULES else source, text)
            for a in node.names]


def test_private_import_across_parts_detector(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from ..features._base import FeatureMap\n"        # private module, other part
                      "from ..solvers.linear import _helper\n"           # private name, other part
                      "from .._validation import check_dask_array\n"     # shared internal: allowed
                      "from ._gram import x\n"                           # own part: allowed
                      "from ..features import FeatureMap\n")             # public: allowed
    assert [line for line, _ in private_imports_across_parts("rfstream.datadriven.sample", sample)] == [1, 2]


def test_no_private_import_across_parts():
    problems = [f"{relative(path)}:{line}: {text}" for name, path in MODULES.items()
                if layer_of(name) != "facade" for line, text in private_imports_across_parts(name, path)]
    assert not problems, "private names imported from another part of rfstream:\n" + "\n".join(problems)
