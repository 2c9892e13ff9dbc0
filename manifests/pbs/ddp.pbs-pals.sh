#!/bin/bash
# shellcheck disable=SC2016,SC1003  # single-quoted words reach torchpod as written, on purpose
#PBS -N ddp
#PBS -l select=2:ncpus=32:mem=128gb:mpiprocs=1:ngpus=4
#PBS -l place=scatter:excl
#PBS -l walltime=01:00:00
#PBS -j oe
# torchpod pbs-pals job 'ddp': 2 nodes x 4 GPUs, image registry.example.com/torchpod/pytorch:2.13.0-cuda13.0
# Submit: qsub ddp.pbs-pals.sh   (container runtime: apptainer; Cray PALS mpiexec)
# Shared: every node must see, at the same path, the submit directory; the SIF written there (or TORCHPOD_SIF); $PBS_NODEFILE, bound into the container
# Rendezvous: c10d on node 0, port 29400; torchpod derives it from the scheduler
# Ranks: torch's group rank is the node index (torchpod orders the rendezvous by it)
# Restarts: none: a non-zero exit ends the job; PBS reruns a rerunnable job (qsub's default, -r y) after a node failure
# Fabric: TORCHPOD_PRESET=hpe-slingshot-gh200; the launcher applies that shape's NCCL settings
# Net plugin: bound in from the host, where the launcher looks for it: /home/user/software/aws-ofi-nccl-1.14.0/lib -> /opt/torchpod/site/lib, /opt/cray/libfabric -> /opt/cray/libfabric, /usr/lib64/libcxi.so.1 -> /opt/torchpod/site/deps/libcxi.so.1; add the plugin's other dependencies under /opt/torchpod/site/deps
# Regenerate: invoke manifests --scheduler pbs-pals --nodes 2 --image registry.example.com/torchpod/pytorch:2.13.0-cuda13.0 --gpus-per-node 4 --name ddp --preset hpe-slingshot-gh200 --runtime apptainer --site-lib /home/user/software/aws-ofi-nccl-1.14.0/lib -- /opt/torchpod/examples/ddp_resnet.py --steps 200
set -euo pipefail
cd "$PBS_O_WORKDIR"

NNODES=$(sort -u "$PBS_NODEFILE" | wc -l)
# the image, fetched or converted once for the whole job
# every host path bound into the container: a ',' or ':' in it would split the bind
case "$PWD" in *[,:]*) echo "torchpod: PWD=$PWD holds ',' or ':', which split a container bind; expected a path without them (submit from another directory)" >&2; exit 2 ;; esac
case "$PBS_NODEFILE" in *[,:]*) echo "torchpod: PBS_NODEFILE=$PBS_NODEFILE holds ',' or ':', which split a container bind; expected a path without them (submit from another directory)" >&2; exit 2 ;; esac
# ddp-1e3c3b0b8308.sif: registry.example.com/torchpod/pytorch:2.13.0-cuda13.0's own file; another --image pulls another
SIF="${TORCHPOD_SIF:-$PWD/ddp-1e3c3b0b8308.sif}"  # on a filesystem every node sees
[ -f "$SIF" ] || apptainer pull "$SIF" docker://registry.example.com/torchpod/pytorch:2.13.0-cuda13.0
# one launcher per node: --ppn 1; PALS copies this script's environment
mpiexec -n "$NNODES" --ppn 1 apptainer exec --nv --bind "$PWD:/workspace" --bind "$PBS_NODEFILE:$PBS_NODEFILE:ro" --bind /home/user/software/aws-ofi-nccl-1.14.0/lib:/opt/torchpod/site/lib:ro --bind /opt/cray/libfabric:/opt/cray/libfabric:ro --bind /usr/lib64/libcxi.so.1:/opt/torchpod/site/deps/libcxi.so.1:ro --pwd /workspace --env TORCHPOD_PRESET=hpe-slingshot-gh200 "$SIF" torchpod run -- /opt/torchpod/examples/ddp_resnet.py --steps 200
