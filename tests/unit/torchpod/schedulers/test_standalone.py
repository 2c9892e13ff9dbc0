"""torchpod.schedulers.standalone: nothing found: one node, refusing stray multi-node
variables. The checks every detector runs (launcher_cases.DetectorCases) take this file's
table of cases."""

from __future__ import annotations

from torchpod.schedulers import standalone

from launcher_cases import DetectorCases


class TestStandalone(DetectorCases):
    detector = standalone
    # the last detector claims every environment the others left
    claims = [{}, {"HOME": "/root"}, {"WORLD_SIZE": "1"}]
    test_does_not_claim_without_them = None  # there is no environment it leaves
