"""torchpod.schedulers.lws: LeaderWorkerSet (LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX). The
checks every detector runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

from torchpod.schedulers import lws

from launcher_cases import DetectorCases


class TestLws(DetectorCases):
    detector = lws
    claims = [
        {'LWS_LEADER_ADDRESS': 'l-0.l.default'},
        {'LWS_GROUP_SIZE': '2'},
        {'LWS_WORKER_INDEX': '1'},
    ]
    not_claims = [
        {},
        {'LWS_NAME': 'l'},
        {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'RANK': '0'},
    ]
