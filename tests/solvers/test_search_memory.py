"""A search's alphas and listed sizes are in the memory plan (rfstream/solvers/memory.py,
:func:`check_search_memory`): 10^4 alphas or 1,000 feature sizes are refused before any pass,
in one line naming the count and the limit, on a machine with the memory planned here."""
import numpy as np
import pytest

from rfstream.catalog import check_model, make_model
from rfstream.options import ParameterError
from rfstream.solvers import memory

GIB = 2**30


@pytest.fixture
def machine(monkeypatch):
    """Workers of 4 GiB with 2 threads and a client of 8 GiB, whatever this machine has."""
    monkeypatch.setattr(memory, "worker_memory", lambda: (4 * GIB, 2))
    monkeypatch.setattr(memory, "client_limit", lambda: 8 * GIB)


def _model(n_components, alpha):
    return make_model("regression", features="rff", solver="ridge",
                      feature_params={"n_components": n_components, "random_state": 0},
                      solver_params={"alpha": alpha})


def test_ten_thousand_alphas_are_refused_before_any_pass(machine):
    model = _model(2000, list(np.logspace(-3, 3, 10**4)))
    with pytest.raises(ParameterError, match=r"10,000 alphas .* GiB per worker, over its 4\.0 GiB"):
        check_model(model, 20, 1)


def test_a_thousand_sizes_are_refused_before_any_pass(machine):
    model = _model(list(range(2, 2001, 2)), 1.0)
    with pytest.raises(ParameterError, match=r"1,000 sizes .* GiB"):
        check_model(model, 20, 1)


def test_a_search_that_fits_is_planned_and_allowed(machine):
    check_model(_model([500, 1000, 2000], list(np.logspace(-3, 3, 30))), 20, 1)
    need, limit, client, client_max = memory.search_memory([500, 1000, 2000], 1, 5, 30, 1)
    assert need <= limit and client <= client_max
    assert client == 8 * 5 * 30 * 3500 + memory.client_memory(1, 5, 2000, 1, [500, 1000, 2000])[0]
    assert memory.client_memory(1, 5, 2000, 1, [500, 1000, 2000])[0] >= memory.gram_memory(1, 5, 2000, 1)[3] \
        + 8 * 5 * (500**2 + 1000**2 + 2000**2)  # the partials and each size's slices of them, held at once
