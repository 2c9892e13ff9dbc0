"""torchpod.schedulers.env: the env:// convention (MASTER_ADDR + WORLD_SIZE + RANK, all three). The
checks every detector runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

from torchpod.schedulers import env as envconv

from launcher_cases import DetectorCases


class TestEnv(DetectorCases):
    detector = envconv
    claims = [
        {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'RANK': '0'},
    ]
    not_claims = [
        {},
        {'MASTER_ADDR': 'm'},
        {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2'},
        {'WORLD_SIZE': '2', 'RANK': '0'},
    ]
