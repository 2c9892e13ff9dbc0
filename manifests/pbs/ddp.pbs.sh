#!/bin/bash
# shellcheck disable=SC2016,SC1003  # single-quoted words reach torchpod as written, on purpose
#PBS -N ddp
#PBS -l select=2:ncpus=32:mem=128gb:mpiprocs=1:ngpus=4
#PBS -l place=scatter:excl
#PBS -l walltime=01:00:00
#PBS -j oe
# torchpod pbs job 'ddp': 2 nodes x 4 GPUs, image registry.example.com/torchpod/pytorch:2.13.0-cuda13.0
# Submit: qsub ddp.pbs.sh   (container runtime: apptainer; pbsdsh)
# Shared: every node must see, at the same path, the submit directory; the SIF written there (or TORCHPOD_SIF); pbsdsh's task statuses there; $PBS_NODEFILE, bound into the container
# Rendezvous: c10d on node 0, port 29400; torchpod derives it from the scheduler
# Ranks: torch's group rank is the node index (torchpod orders the rendezvous by it)
# Restarts: none: a non-zero exit ends the job; PBS reruns a rerunnable job (qsub's default, -r y) after a node failure
# Regenerate: invoke manifests --scheduler pbs --nodes 2 --image registry.example.com/torchpod/pytorch:2.13.0-cuda13.0 --gpus-per-node 4 --name ddp --runtime apptainer -- /opt/torchpod/examples/ddp_resnet.py --steps 200
set -euo pipefail
cd "$PBS_O_WORKDIR"

# the image, fetched or converted once for the whole job
# every host path bound into the container: a ',' or ':' in it would split the bind
case "$PWD" in *[,:]*) echo "torchpod: PWD=$PWD holds ',' or ':', which split a container bind; expected a path without them (submit from another directory)" >&2; exit 2 ;; esac
case "$PBS_NODEFILE" in *[,:]*) echo "torchpod: PBS_NODEFILE=$PBS_NODEFILE holds ',' or ':', which split a container bind; expected a path without them (submit from another directory)" >&2; exit 2 ;; esac
# ddp-1e3c3b0b8308.sif: registry.example.com/torchpod/pytorch:2.13.0-cuda13.0's own file; another --image pulls another
SIF="${TORCHPOD_SIF:-$PWD/ddp-1e3c3b0b8308.sif}"  # on a filesystem every node sees
[ -f "$SIF" ] || apptainer pull "$SIF" docker://registry.example.com/torchpod/pytorch:2.13.0-cuda13.0
NNODES=$(sort -u "$PBS_NODEFILE" | wc -l)
# each node's exit status, on the submit directory every node sees
STATUS="$PBS_O_WORKDIR/.torchpod-status-$PBS_JOBID"
mkdir "$STATUS"
# mpiprocs=1: one PBS_NODEFILE line per node, so pbsdsh starts one launcher per node
pbsdsh -- /bin/bash -c 'cd "$1" && export PATH="$2" && status="$3" && shift 3 && { "$@"; rc=$?; echo "$rc" > "$status/node-$PBS_NODENUM"; exit "$rc"; }' bash "$PBS_O_WORKDIR" "$PATH" "$STATUS" apptainer exec --nv --bind "$PWD:/workspace" --bind "$PBS_NODEFILE:$PBS_NODEFILE:ro" --pwd /workspace "$SIF" torchpod run -- /opt/torchpod/examples/ddp_resnet.py --steps 200
# pbsdsh returns 0 whatever its tasks did (openpbs src/cmds/pbsdsh.c): their own statuses decide
seen=0 failed=0
for f in "$STATUS"/node-*; do
  [ -f "$f" ] || continue
  seen=$((seen + 1)); rc=""; read -r rc < "$f" || true; [ "$rc" = 0 ] || failed=$((failed + 1))
done
rm -r "$STATUS"
if [ "$seen" != "$NNODES" ] || [ "$failed" != 0 ]; then
  echo "torchpod: $failed of $NNODES nodes failed and $((NNODES - seen)) never reported (pbsdsh)" >&2
  exit 1
fi
