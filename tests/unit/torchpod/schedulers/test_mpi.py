"""torchpod.schedulers.mpi: mpirun / mpiexec (OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMI_RANK,
PMIX_RANK). Its own ``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import mpi

from launcher_cases import (
    detector_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {
    'mpi_without_master':
        'the rendezvous endpoint is decided after detection (resolve.decide_endpoint)',
}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(mpi, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'OMPI_COMM_WORLD_SIZE': '2'},
    {'PMI_SIZE': '2'},
    {'PMI_RANK': '0'},
    {'PMIX_RANK': '0'},
])
def test_claims_on_its_markers(env):
    assert mpi.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'OMPI_COMM_WORLD_LOCAL_SIZE': '1'},
    {'MASTER_ADDR': 'm'},
])
def test_does_not_claim_without_them(env):
    assert not mpi.claims(env, user_options(env))
