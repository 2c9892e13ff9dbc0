"""torchpod.schedulers.explicit: torchrun's own flags on the command line, nothing in the
environment. Its own ``claims()`` and ``detect()`` called directly, on the shared fixtures
(tests/unit/fixtures/schedulers.yaml) that resolve to it and on the broken ones that reach
it; tests/unit/torchpod/test_schedulers.py runs the same fixtures through the whole of
``resolve()``."""

from __future__ import annotations

import pytest

from torchpod.schedulers import explicit

from launcher_cases import (
    detector_tests,
    user_options,
)

# Broken fixtures that reach this detector but are refused by a later step of resolve()
# (tests/unit/torchpod/test_schedulers.py checks their messages there).
REFUSED_LATER = {
    'explicit_multi_node_without_endpoint':
        'the endpoint is checked after detection (resolve.decide_endpoint)',
}

# the shared fixtures through this detector alone (launcher_cases.detector_tests)
(test_it_has_fixtures_of_both_kinds, test_detect_alone_gives_the_fixtures_plan,
 test_detect_refuses_a_broken_environment_in_one_line) = detector_tests(explicit, REFUSED_LATER)


@pytest.mark.parametrize("argv", [("--nnodes", "2"), ("--nnodes", "1:4"), ("--rdzv-endpoint", "h:29400"),
                                  ("--master-addr", "h")])
def test_claims_on_a_multi_node_flag_given_on_the_command_line(argv):
    assert explicit.claims({}, user_options({}, argv))


@pytest.mark.parametrize("env, argv", [({}, ()), ({}, ("--nnodes", "1")), ({}, ("--node-rank", "0")),
                                       ({"PET_NNODES": "2"}, ()), ({"PET_RDZV_ENDPOINT": "h:29400"}, ())])
def test_does_not_claim_without_a_multi_node_flag_on_the_command_line(env, argv):
    # a PET_* variable is the operator's, not the user's command line; one node is no job
    assert not explicit.claims(env, user_options(env, argv))
