"""torchpod.schedulers.lsf: IBM LSF (LSB_JOBID, LSB_DJOB_HOSTFILE, LSB_DJOB_RANKFILE, LSB_MCPU_HOSTS). Its own
``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import lsf

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
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(lsf, REFUSED_LATER)


@pytest.mark.parametrize("env", [
    {'LSB_JOBID': '9'},
    {'LSB_DJOB_HOSTFILE': '/tmp/h'},
    {'LSB_DJOB_RANKFILE': '/tmp/r'},
    {'LSB_MCPU_HOSTS': 'n1 4'},
])
def test_claims_on_its_markers(env):
    assert lsf.claims(env, user_options(env))


@pytest.mark.parametrize("env", [
    {},
    {'JSM_NAMESPACE_LOCAL_RANK': '0'},
    {'LSF_ENVDIR': '/etc/lsf'},
])
def test_does_not_claim_without_them(env):
    assert not lsf.claims(env, user_options(env))


# the variables it reads are exactly the ones job scripts forward into containers
(test_detect_reads_only_the_variables_the_contract_names,
 test_every_variable_named_in_the_module_is_in_reads) = reads_tests(lsf, ('LSB_', 'JSM_'))
