"""torchpod.schedulers.skypilot: SkyPilot (SKYPILOT_NODE_IPS, SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES).
The checks every detector runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

from torchpod.schedulers import skypilot

from launcher_cases import DetectorCases


class TestSkypilot(DetectorCases):
    detector = skypilot
    claims = [
        {'SKYPILOT_NODE_IPS': '10.0.0.1'},
        {'SKYPILOT_NODE_RANK': '0'},
        {'SKYPILOT_NUM_NODES': '2'},
    ]
    not_claims = [
        {},
        {'SKYPILOT_NUM_GPUS_PER_NODE': '8'},
        {'SKYPILOT_TASK_ID': 't'},
    ]
