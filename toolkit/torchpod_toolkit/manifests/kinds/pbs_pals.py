"""PBS Pro with Cray PALS: `mpiexec --ppn 1` starts one launcher per node and copies the job
script's environment; PALS_NODEID gives the node index.

Everything else is PBS's (the directives, the submitter, the name grammar, what follows a
failure): the record is PBS's with what PALS changes, so the two cannot drift apart."""

from __future__ import annotations

from dataclasses import replace

from . import pbs

KIND = replace(pbs.KIND, name="pbs-pals", scenario="pbs-pals", fan_out="Cray PALS mpiexec", pals=True,
               shared_writes="",  # mpiexec reports each node's status itself: no status files
               order=110)
