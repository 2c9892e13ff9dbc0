#!/bin/bash
#PBS -N ddp
#PBS -l select=2:ncpus=1:mpiprocs=1:ngpus=4
#PBS -l place=scatter:excl
#PBS -l walltime=01:00:00
#PBS -j oe
# torchpod pbs-pals job 'ddp': 2 nodes x 4 GPUs, image registry.example.com/torchpod/pytorch:2.13.0-cuda13.0
# Submit: qsub ddp.pbs-pals.sh   (container runtime: apptainer; Cray PALS mpiexec)
# Rendezvous: c10d on node 0, port 23456; torchpod derives it from the scheduler
# Fabric: TORCHPOD_PRESET=hpe-slingshot-gh200; the launcher applies that shape's NCCL settings
# Regenerate: invoke manifests --scheduler pbs-pals --nodes 2 --gpus-per-node 4 --image registry.example.com/torchpod/pytorch:2.13.0-cuda13.0 --name ddp --preset hpe-slingshot-gh200 --runtime apptainer -- /opt/torchpod/examples/ddp_resnet.py --steps 200
set -euo pipefail
cd "$PBS_O_WORKDIR"

NNODES=$(sort -u "$PBS_NODEFILE" | wc -l)
# the image, fetched or converted once for the whole job
SIF="${TORCHPOD_SIF:-$PWD/ddp.sif}"  # on a filesystem every node sees
[ -f "$SIF" ] || apptainer pull "$SIF" docker://registry.example.com/torchpod/pytorch:2.13.0-cuda13.0
# one launcher per node: --ppn 1; PALS copies this script's environment
mpiexec -n "$NNODES" --ppn 1 apptainer exec --nv --bind "$PWD:/workspace" --bind "$PBS_NODEFILE:$PBS_NODEFILE:ro" --pwd /workspace --env TORCHPOD_PRESET=hpe-slingshot-gh200 "$SIF" torchpod run -- /opt/torchpod/examples/ddp_resnet.py --steps 200
