"""torchpod.schedulers.explicit: torchrun's own flags on the command line, nothing in the
environment. The checks every detector runs (launcher_cases.DetectorCases) take this file's
table of cases."""

from __future__ import annotations

from torchpod.schedulers import explicit

from launcher_cases import DetectorCases


class TestExplicit(DetectorCases):
    detector = explicit
    # its markers are a multi-node flag given on the command line
    claims = [({}, ("--nnodes", "2")), ({}, ("--nnodes", "1:4")), ({}, ("--rdzv-endpoint", "h:29400")),
              ({}, ("--master-addr", "h"))]
    # a PET_* variable is the operator's, not the user's command line; one node is no job
    not_claims = [({}, ()), ({}, ("--nnodes", "1")), ({}, ("--node-rank", "0")),
                  ({"PET_NNODES": "2"}, ()), ({"PET_RDZV_ENDPOINT": "h:29400"}, ())]
    refused_later = {
        'explicit_multi_node_without_endpoint':
            'the endpoint is checked after detection (resolve.decide_endpoint)',
        'jobset_example_master_flags_without_nnodes':
            'the node count is checked after detection, against every detector\'s markers (resolve.decide_nnodes)',
    }
