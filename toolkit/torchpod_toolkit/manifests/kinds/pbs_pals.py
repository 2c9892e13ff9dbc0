"""PBS Pro with Cray PALS: `mpiexec --ppn 1` starts one launcher per node and copies the job
script's environment; PALS_NODEID gives the node index.

Everything else is PBS's (the directives, the submitter, the name grammar, what follows a
failure): the record is PBS's with what PALS changes, so the two cannot drift apart."""

from __future__ import annotations

from dataclasses import replace

from . import pbs

# PBS's nodes started by `mpiexec --ppn 1`: PALS_NODEID per node, and PBS_NODENUM=0 as the job
# script's shell had it and mpiexec copied to every node.
NODES = replace(pbs.NODES, env=pbs.JOB_ENV + (
    ("PBS_NODENUM", "0"),  # the job script's own, copied by mpiexec to every rank
    ("PALS_NODEID", "{i}"), ("PALS_RANKID", "{i}"), ("PALS_LOCAL_RANKID", "0"), ("PALS_APID", "{name}-apid"),
))

KIND = replace(pbs.KIND, name="pbs-pals", scenario="pbs-pals", fan_out="Cray PALS mpiexec", mpiexec=True, nodes=NODES,
               shared_writes="",  # mpiexec reports each node's status itself: no status files
               order=110)
