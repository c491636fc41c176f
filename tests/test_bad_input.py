"""The bad-input battery (tests/helpers/bad_input_battery.py) under pytest: one test per case."""
import pytest
from helpers.bad_input_battery import CASES, run_case


@pytest.mark.parametrize("name, setup, keyword, output", CASES, ids=[c[0] for c in CASES])
def test_bad_input_fails_cleanly(name, setup, keyword, output, tmp_path):
    behaved, detail = run_case(setup, keyword, output, tmp_path)
    assert behaved, f"{name}: {detail}"
