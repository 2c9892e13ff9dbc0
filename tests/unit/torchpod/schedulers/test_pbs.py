"""torchpod.schedulers.pbs: PBS Pro / Torque / OpenPBS (PBS_JOBID, PBS_NODEFILE). Its own
``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import pbs

from launcher_cases import (
    detector_tests,
    reads_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(pbs, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'PBS_JOBID': '1234.server'},
    {'PBS_NODEFILE': '/var/spool/pbs/aux/1234.server'},
])
def test_claims_on_its_markers(env):
    assert pbs.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'SLURM_JOB_ID': '5'},
    {'PBS_O_WORKDIR': '/home/u'},
])
def test_does_not_claim_without_them(env):
    assert not pbs.claims(env, user_options(env))


# the variables it reads are exactly the ones job scripts forward into containers
(test_detect_reads_only_the_variables_the_contract_names,
 test_every_variable_named_in_the_module_is_in_reads) = reads_tests(pbs, ('PBS_', 'PALS_'))
