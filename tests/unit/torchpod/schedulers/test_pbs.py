"""torchpod.schedulers.pbs: PBS Pro / Torque / OpenPBS (PBS_JOBID, PBS_NODEFILE). The checks every
detector runs (launcher_cases.DetectorCases) take this file's table of cases."""

from __future__ import annotations

from torchpod.schedulers import pbs

from launcher_cases import ForwardedDetectorCases


class TestPbs(ForwardedDetectorCases):
    detector = pbs
    prefixes = ('PBS_', 'PALS_')
    claims = [
        {'PBS_JOBID': '1234.server'},
        {'PBS_NODEFILE': '/var/spool/pbs/aux/1234.server'},
    ]
    not_claims = [
        {},
        {'SLURM_JOB_ID': '5'},
        {'PBS_O_WORKDIR': '/home/u'},
    ]
