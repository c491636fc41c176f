"""The size fuzzer (tests/helpers/size_fuzz.py) under ``RLIMIT_AS``: hypothesis sets sizes in
model directories and in a dataset's Zarr metadata; each model loads and predicts as saved or
is refused in one line, each dataset predicts (one row per declared row) or is refused in one
line, exit 2; and nothing needs more than the cap (a MemoryError or a kill fails the test)."""
import pytest

from helpers.capped import ROOT, run_capped

pytestmark = pytest.mark.long_file(20)  # seconds in the suite: started first (tests/conftest.py)

#: examples per kind: a loaded two-core machine runs each kind in well under a minute
EXAMPLES = {"models": 60, "datasets": 40}


@pytest.mark.parametrize("kind", sorted(EXAMPLES))
def test_sizes_fuzzed_are_used_as_saved_or_refused_in_one_line(tmp_path, kind):
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'tests')!r}); from helpers.size_fuzz import main; "
            f"main({kind!r}, {str(tmp_path)!r}, {EXAMPLES[kind]})")
    status, lines = run_capped(None, python=code, timeout=400)
    assert status == 0, "\n".join(lines[-40:])
