"""Stand-ins for the programs a generated job script runs, so the tests can execute the
script with bash and see exactly what reaches ``torchpod``, on every node, with which
environment and which GPUs. Shared by the manifest tests (a plain module on pytest's
pythonpath); nothing here is upstream code. Each stub does to the command line, the
environment, the GPUs and the exit status what the real tool does, as its source says
(cited per stub), and is never kinder:

- fan-outs (srun, mpiexec, pbsdsh, blaunch) start the command once per node, in order, with
  the variables the real launcher gives each task; pbsdsh's tasks get the MoM's
  environment, not the script's, and pbsdsh exits 0 whatever its tasks did;
- container runtimes strip their options and the image and run what the container would
  (``exec`` a command, or the image's ENTRYPOINT ``torchpod``), with the environment the
  runtime builds: enroot clears it and keeps only the image's, its environ.d files and
  ``--env``; docker and podman keep only ``-e``/``--env``; Apptainer and pyxis pass the
  caller's;
- GPUs: every node has 8 (ids 0-7, UUIDs GPU-0..GPU-7: ``STUB_NODE_GPUS``); a job that asked
  for 4 holds 4-7 (``STUB_JOB_GPUS``; the scheduler's own variables say so as each real one
  does: Slurm with ConstrainDevices, OpenPBS's cgroups hook, LSF). A process in the job's
  device cgroup reaches only the GPUs the cgroup holds (``STUB_CGROUP_GPUS``, set by the
  fan-out); Docker's containers are started by dockerd, outside it. Each runtime exposes
  the GPUs its flags and hooks expose, and the container gets ``STUB_GPUS_ENUMERATED``:
  the host ids CUDA would enumerate there, in order. The test applies the
  CUDA_VISIBLE_DEVICES the process sees to that list.

``STUB_*`` variables are the model's (the node's hardware, the task's identity), carried
through every runtime as the hardware would be; ``STUB_FAIL_NODE=i`` makes torchpod exit 3
on node i. A stub that meets an option it does not model, or a malformed value, records
``STUB-ERROR`` and exits 97: a change in the generator then fails the tests loudly instead
of being guessed at.

The stubs use bash builtins only, so a test's PATH can hold nothing but this directory (and
the real ``sort``, ``wc``, ``env``, ``id``, ``mkdir``, ``mv`` and ``rm`` the scripts use):
any other command a script tries to run reaches bash's ``command_not_found_handle``, which
the environment of ``job_env`` defines to record ``NOT-FOUND``.
"""

from __future__ import annotations

import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

ERROR = "STUB-ERROR"
NOT_FOUND = "NOT-FOUND"
ENV_RECORD = "torchpod-env"  # what torchpod saw: TORCHPOD_PRESET, SLURM_JOB_ID, PBS_NODEFILE,
# LSB_DJOB_HOSTFILE (or <unset>)
ENVIRON_RECORD = "torchpod-environ"  # torchpod's whole environment, one NAME=VALUE per field
REAL_TOOLS = ("sort", "wc", "env", "id", "mkdir", "mv", "rm")  # coreutils the scripts may run; the real ones
MOM_BIN = "mom-bin"  # in the stubs' folder: the PATH of pbs_mom's tasks, the real tools and no runtime
NODE_GPUS = "0,1,2,3,4,5,6,7"
JOB_GPUS = "4,5,6,7"  # the 4 GPUs per node a job that asks for 4 holds

_PRELUDE = r"""#!/bin/bash
# Test stub for %(name)s (tests/manifest_stubs.py). %(doc)s
set -u -f
LOG=%(log)s
NAME=%(name)s
record() { local n=$1; shift; printf '%%s\0' "$n" "$#" "$@" >> "$LOG"; }
fail() { record STUB-ERROR "$NAME: $*"; printf 'stub %%s: %%s\n' "$NAME" "$*" >&2; exit 97; }
need() { [ "$1" -ge 2 ] || fail "$2 needs a value"; }  # need $# "$1": an option and its value
setenv() {  # KEY=VALUE as the runtime's --env/-e would set it inside the container
  case "$1" in
    [A-Za-z_]*=*) export "${1%%%%=*}=${1#*=}" ;;
    [A-Za-z_]*) ;;  # a bare NAME (or a NAME_* pattern): passed from the caller's environment
    *) fail "environment entry $1: expected KEY=VALUE or KEY" ;;
  esac
}
record "$NAME" "$@"
# The host ids CUDA enumerates in a process that can open the GPUs in $1 ("all", or ids and
# GPU-<id> UUIDs, comma-separated) and, when $2 is 1, only those its device cgroup holds.
enumerate_gpus() {
  local mounted=$1 incgroup=$2 out="" id IFS=,
  for id in ${STUB_NODE_GPUS-}; do
    if [ "$mounted" != all ]; then case ",$mounted," in *",$id,"*|*",GPU-$id,"*) ;; *) continue ;; esac; fi
    if [ "$incgroup" = 1 ]; then case ",${STUB_CGROUP_GPUS-}," in *",$id,"*) ;; *) continue ;; esac; fi
    out="${out:+$out,}$id"
  done
  printf '%%s' "$out"
}
# The model's own variables, added to the array envs: every runtime carries them, as the
# hardware would be there whatever the environment.
stub_envs() { local n; for n in $(compgen -e); do case "$n" in STUB_*) envs+=("$n=${!n}") ;; esac; done; }
"""

STUBS: dict[str, tuple[str, str]] = {}  # name -> (the CLI reference it follows, body)

# enroot's NVIDIA hook (NVIDIA/enroot 8ea147d, conf/hooks/98-nvidia.sh): NVIDIA_* from the
# caller's environment first (`[ -v key ]`), then the container's; no GPU at all unless
# NVIDIA_VISIBLE_DEVICES is set and not "void"; NVIDIA_DRIVER_CAPABILITIES defaults to
# "utility", which mounts no libcuda, so nothing can use a GPU without "compute" (or "all").
# Reads the container's environment (NAME=VALUE lines) on stdin; prints the enumerated ids.
_NVIDIA_HOOK = r"""
nvidia_hook() {
  local devices caps line
  devices=${NVIDIA_VISIBLE_DEVICES-}; caps=${NVIDIA_DRIVER_CAPABILITIES-}
  if [ -z "${NVIDIA_VISIBLE_DEVICES+x}" ] || [ -z "${NVIDIA_DRIVER_CAPABILITIES+x}" ]; then
    while IFS= read -r line; do
      case "$line" in
        NVIDIA_VISIBLE_DEVICES=*) [ -n "${NVIDIA_VISIBLE_DEVICES+x}" ] || devices=${line#*=} ;;
        NVIDIA_DRIVER_CAPABILITIES=*) [ -n "${NVIDIA_DRIVER_CAPABILITIES+x}" ] || caps=${line#*=} ;;
      esac
    done
  fi
  [ "${devices:-void}" != void ] && [ "$devices" != none ] || return 0
  case ",${caps:-utility}," in *,compute,*|*,all,*) enumerate_gpus "$devices" 1 ;; esac
}
"""

STUBS["srun"] = ("srun(1) (Slurm 22.05): `srun [OPTIONS...] executable [args...]`, options end at the first "
                 "non-option (getopt '+') or at `--`; --export=ALL|NAME[=VALUE],...; one task per node here "
                 "(--ntasks-per-node=1), each with SLURM_NODEID, SLURM_PROCID, SLURM_LOCALID, SLURM_STEP_* and, "
                 "for a job holding GPUs with ConstrainDevices=yes, SLURM_STEP_GPUS (global ids) and "
                 "CUDA_VISIBLE_DEVICES relative to the device cgroup (srun(1) OUTPUT ENVIRONMENT VARIABLES); "
                 "srun exits with a failed task's status; -c/--cpus-per-task N sets the step's SLURM_CPUS_PER_TASK and "
                 "may not exceed the job's. pyxis (NVIDIA/pyxis 0.24.0 README) adds "
                 "--container-image/--container-mounts/--container-workdir/--[no-]container-entrypoint and "
                 "runs the command itself in the container (enroot, so its NVIDIA hook), with the task's "
                 "environment passed through.", _NVIDIA_HOOK + r"""
image=""
nodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
# pyxis runs the image's ENTRYPOINT first when the site's plugstack says execute_entrypoint=1
# (STUB_PYXIS_EXECUTE_ENTRYPOINT here; pyxis config.c) or PYXIS_CONTAINER_ENTRYPOINT=1 (args.c),
# unless --no-container-entrypoint: then torchpod would be handed pyxis's own `sh -c` probe
entrypoint=${PYXIS_CONTAINER_ENTRYPOINT:-${STUB_PYXIS_EXECUTE_ENTRYPOINT:-0}}
export_list() {
  local IFS=, item
  for item in $1; do
    case "$item" in
      ALL) ;;
      NONE|NIL) fail "--export=$1: NONE/NIL is not modelled" ;;
      *) setenv "$item" ;;
    esac
  done
}
while [ $# -gt 0 ]; do
  case "$1" in
    --container-image=*) image=${1#*=}; shift ;;
    --container-image) need $# "$1"; image=$2; shift 2 ;;
    --export=*) export_list "${1#*=}"; shift ;;
    --export) need $# "$1"; export_list "$2"; shift 2 ;;
    --nodes=*) nodes=${1#*=}; shift ;;
    --nodes|-N) need $# "$1"; nodes=$2; shift 2 ;;
    --ntasks-per-node=1|--kill-on-bad-exit=*|--container-mounts=*|--container-workdir=*|--mpi=*) shift ;;
    --ntasks-per-node=*) fail "$1: one task per node is what the scripts ask for" ;;
    --container-mounts|--container-workdir|--mpi) need $# "$1"; shift 2 ;;
    --cpus-per-task=*|-c)  # a whole number, no more than the job's own (sbatch -c sets SLURM_CPUS_PER_TASK)
      if [ "$1" = -c ]; then need $# "$1"; cpt=$2; shift; else cpt=${1#*=}; fi
      case "$cpt" in ''|*[!0-9]*|0*) fail "--cpus-per-task=$cpt: expected a positive whole number" ;; esac
      [ "$cpt" -le "${SLURM_CPUS_PER_TASK:-$cpt}" ] || fail "--cpus-per-task=$cpt: over the job's $SLURM_CPUS_PER_TASK"
      export SLURM_CPUS_PER_TASK=$cpt; shift ;;
    --no-container-entrypoint) entrypoint=0; shift ;;
    --container-entrypoint) entrypoint=1; shift ;;
    --kill-on-bad-exit|-K) shift ;;
    --) shift; break ;;
    -*) fail "unknown option $1" ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || fail "no executable"
if [ -n "$image" ] && [ ! -f "$image" ]; then fail "--container-image $image: no such squashfs file"; fi
if [ -n "$image" ] && [ "$entrypoint" = 1 ]; then
  echo "pyxis: container start failed: the image's ENTRYPOINT (torchpod) refused pyxis's sh -c probe" >&2
  exit 1
fi
case "$nodes" in ''|*[!0-9]*|0) fail "node count '$nodes'" ;; esac
status=0
for ((node = 0; node < nodes; node++)); do
  (
    export SLURM_NODEID=$node SLURM_PROCID=$node SLURM_LOCALID=0 SLURM_STEP_ID=0
    export SLURM_STEP_NODELIST=${SLURM_JOB_NODELIST-} SLURM_STEP_NUM_NODES=$nodes
    export SLURM_STEP_TASKS_PER_NODE="1(x$nodes)" STUB_NODE=$node STUB_CGROUP_GPUS=${STUB_JOB_GPUS-}
    if [ -n "${STUB_JOB_GPUS-}" ]; then
      export SLURM_STEP_GPUS=$STUB_JOB_GPUS CUDA_VISIBLE_DEVICES=0,1,2,3  # relative to the cgroup
    fi
    if [ -n "$image" ]; then  # pyxis: enroot start in the task's cgroup, the task's environment
      STUB_GPUS_ENUMERATED=$(nvidia_hook < /dev/null)  # the image's environment holds no NVIDIA_*
      export STUB_GPUS_ENUMERATED
    fi
    exec "$@"
  ) || { rc=$?; [ "$status" != 0 ] || status=$rc; }
done
exit "$status"
""")

STUBS["mpiexec"] = ("Cray PALS mpiexec(1) (HPE Cray PALS): `mpiexec [options] executable [args]`; -n/--np RANKS, "
                    "--ppn/-ppn RANKS_PER_NODE; the job's environment is copied to the ranks, each with "
                    "PALS_NODEID, PALS_RANKID, PALS_LOCAL_RANKID; the tasks run in the job's cgroup; mpiexec "
                    "exits non-zero when a rank does.", r"""
ranks="" ppn=1
while [ $# -gt 0 ]; do
  case "$1" in
    -n|--np|-np) need $# "$1"; ranks=$2; shift 2 ;;
    --np=*) ranks=${1#*=}; shift ;;
    --ppn|-ppn) need $# "$1"; ppn=$2; shift 2 ;;
    --ppn=*) ppn=${1#*=}; shift ;;
    --) fail "'--' is not modelled for PALS mpiexec: check mpiexec(1) first" ;;
    -*) fail "unknown option $1" ;;
    *) break ;;
  esac
done
case "$ranks" in ''|*[!0-9]*|0) fail "-n '$ranks': expected a positive number of ranks" ;; esac
[ "$ppn" = 1 ] || fail "--ppn $ppn: one rank per node is what the scripts ask for"
[ $# -gt 0 ] || fail "no executable"
status=0
for ((rank = 0; rank < ranks; rank++)); do
  (
    export PALS_NODEID=$rank PALS_RANKID=$rank PALS_LOCAL_RANKID=0 STUB_NODE=$rank
    export STUB_CGROUP_GPUS=${STUB_JOB_GPUS-}
    exec "$@"
  ) || { rc=$?; [ "$status" != 0 ] || status=$rc; }
done
exit "$status"
""")

# The variables pbs_mom gives a task it spawns (openpbs cd7ab5e, src/resmom/start_exec.c,
# variables_else and the task's environment: the MoM's own, the job's Variable_List, then
# HOME, PBS_JOBNAME, PBS_JOBID, PBS_QUEUE, PBS_JOBCOOKIE, PBS_NODENUM, PBS_TASKNUM, ...), and
# what the cgroups hook writes into the job's environment file (src/hooks/cgroups/
# pbs_cgroups.PY: CUDA_VISIBLE_DEVICES as the GPUs' UUIDs, CUDA_DEVICE_ORDER=PCI_BUS_ID).
# The job script's own exports and its PATH are not among them.
_MOM_TASK_VARS = ("HOME", "PBS_JOBNAME", "PBS_JOBID", "PBS_QUEUE", "PBS_NODEFILE", "PBS_ENVIRONMENT", "PBS_O_WORKDIR",
                  "PBS_O_HOME", "PBS_O_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")

STUBS["pbsdsh"] = ("pbsdsh (openpbs cd7ab5e, src/cmds/pbsdsh.c): getopt(\"c:n:svo\") then `-- program [args...]`, "
                   "spawned with tm_spawn(argv, envp=NULL) on every node of PBS_NODEFILE (one line per node with "
                   "mpiprocs=1): an argv, no shell, in $HOME, with the MoM's environment (its PATH, the job's "
                   "PBS_* and PBS_NODENUM), not the job script's; a task's exit status is only printed, and "
                   "pbsdsh returns 0. It refuses to run outside a job (no PBS_ENVIRONMENT).", r"""
[ -n "${PBS_ENVIRONMENT-}" ] || fail "not executing under PBS"
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    -c|-n) need $# "$1"; shift 2 ;;
    -c?*|-n?*|-s|-v|-o) shift ;;
    -*) fail "unknown option $1" ;;
    *) fail "program $1 before '--': glibc getopt would permute and read its options as pbsdsh's" ;;
  esac
done
[ $# -gt 0 ] || fail "no program"
[ -f "${PBS_NODEFILE-}" ] || fail "no PBS_NODEFILE"
node=0
while IFS= read -r host; do
  [ -n "$host" ] || continue
  envs=("PATH=${0%/*}/""" + MOM_BIN + r"""" "PBS_NODENUM=$node" "PBS_TASKNUM=0000000$node" "STUB_NODE=$node"
        "STUB_CGROUP_GPUS=${STUB_JOB_GPUS-}")
  for name in """ + " ".join(_MOM_TASK_VARS) + r"""; do [ -z "${!name+x}" ] || envs+=("$name=${!name}"); done
  for name in $(compgen -e); do
    case "$name" in STUB_NODE|STUB_CGROUP_GPUS) ;; STUB_*) envs+=("$name=${!name}") ;; esac
  done
  rc=0
  ( cd "$HOME" || exit 1; exec env -i "${envs[@]}" "$@" ) < /dev/null || rc=$?
  [ "$rc" = 0 ] || printf 'pbsdsh: task 0x%08X exit status %d\n' "$node" "$rc"
  node=$((node + 1))
done < "$PBS_NODEFILE"
exit 0
""")

STUBS["blaunch"] = ("IBM LSF 10.1 blaunch(8): `blaunch [-n] [-u host_file | -z host_name ... | host_name] "
                    "[-use-login-shell | -no-shell] command [argument ...]`, only inside an LSF job; -u runs the "
                    "command on every host the file lists, as a remote task with the job's environment that "
                    "starts in no directory the job names (here $HOME); it exits non-zero when a task does. LSF "
                    "holds no device cgroup unless the site enforces GPUs: every GPU of the host is reachable, "
                    "and CUDA_VISIBLE_DEVICES names the job's by their global ids.", r"""
[ -n "${LSB_JOBID-}" ] || fail "blaunch works only under LSF (no LSB_JOBID)"
hostfile=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n|-no-shell|-use-login-shell) shift ;;
    -u) need $# "$1"; hostfile=$2; shift 2 ;;
    -z) fail "-z is not modelled" ;;
    -*) fail "unknown option $1" ;;
    *) break ;;
  esac
done
[ -n "$hostfile" ] || fail "no -u host_file: a bare first word would be read as a host name"
[ -f "$hostfile" ] || fail "-u $hostfile: no such host file"
[ $# -gt 0 ] || fail "no command"
status=0 node=0
while IFS= read -r host; do
  [ -n "$host" ] || continue
  ( cd "$HOME" || exit 1; export STUB_NODE=$node STUB_CGROUP_GPUS=${STUB_NODE_GPUS-}; exec "$@" ) < /dev/null \
    || { rc=$?; [ "$status" != 0 ] || status=$rc; }
  node=$((node + 1))
done < "$hostfile"
exit "$status"
""")

STUBS["apptainer"] = ("apptainer(1) 1.3: `apptainer pull [--force] [OUTPUT] URI` and `apptainer exec [exec "
                      "options] CONTAINER COMMAND [ARGS...]` (--bind src[:dest[:opts]][,...], --pwd, --env "
                      "KEY=VAL, --nv); exec runs COMMAND in the container, not the runscript, with the caller's "
                      "environment (apptainer docs, \"Environment and Metadata\"), GPUs only with --nv. A "
                      "pull writes OUTPUT in place.", r"""
[ $# -gt 0 ] || fail "no subcommand"
sub=$1; shift
case "$sub" in
  pull)
    while [ $# -gt 0 ]; do
      case "$1" in
        --force|-F|--disable-cache) shift ;;
        --) shift; break ;;
        -*) fail "unknown pull option $1" ;;
        *) break ;;
      esac
    done
    case $# in 1) out=""; uri=$1 ;; 2) out=$1; uri=$2 ;; *) fail "pull: expected [OUTPUT] URI, got $# words" ;; esac
    case "$uri" in docker://?*) ;; *) fail "pull: URI $uri: expected docker://REFERENCE" ;; esac
    if [ -n "$out" ]; then
      [ ! -e "$out" ] || fail "pull: $out exists (apptainer refuses without --force)"
      : > "$out"
    fi
    exit 0 ;;
  exec)
    nv=0
    while [ $# -gt 0 ]; do
      case "$1" in
        --nv) nv=1; shift ;;
        --cleanenv|-e|--containall|-C) fail "$1: the scripts pass the job's environment through" ;;
        --writable-tmpfs|--no-home) shift ;;
        --bind|-B|--pwd|--home|--mount) need $# "$1"; shift 2 ;;
        --bind=*|--pwd=*|--home=*|--mount=*) shift ;;
        --env) need $# "$1"; setenv "$2"; shift 2 ;;
        --env=*) setenv "${1#*=}"; shift ;;
        --) shift; break ;;
        -*) fail "unknown exec option $1" ;;
        *) break ;;
      esac
    done
    [ $# -ge 2 ] || fail "exec: expected CONTAINER COMMAND [ARGS...]"
    [ -f "$1" ] || fail "exec: container $1: no such SIF file"
    shift
    # --nv binds the driver and every /dev/nvidia* (apptainer 1.3, docs "GPU Support"); the
    # process stays in the caller's cgroup, with the caller's environment
    if [ "$nv" = 1 ]; then STUB_GPUS_ENUMERATED=$(enumerate_gpus all 1); else STUB_GPUS_ENUMERATED=""; fi
    export STUB_GPUS_ENUMERATED
    exec "$@" ;;
  *) fail "subcommand $sub is not modelled" ;;
esac
""")

STUBS["enroot"] = ("enroot(1) 3.5 (NVIDIA/enroot 8ea147d, doc/cmd/import.md, start.md): `enroot import [-o "
                   "OUTPUT] docker://[USER@][REGISTRY#]IMAGE[:TAG]` (the URI pattern of src/docker.sh "
                   "docker::import), written in place by mksquashfs, so an import killed half-way leaves a "
                   "truncated file (STUB_KILL_IMPORT=1 plays that); `enroot start [options] [--] IMAGE [COMMAND] "
                   "[ARG...]` with -m/--mount as fstab fields separated by ':'. start clears the environment "
                   "(bin/common.h clearenv) and rebuilds it from the image's, the environ.d files (TERM) and "
                   "--env: NAME=VALUE, or NAME for the caller's value, empty when unset (src/runtime.sh "
                   "runtime::_do_environ); its NVIDIA hook decides the GPUs; then the image's /etc/rc, for an "
                   "imported Docker image `exec ENTRYPOINT \"$@\"` (src/docker.sh docker::configure): here "
                   "ENTRYPOINT [STUB_IMAGE_ENTRYPOINT, torchpod unless set], or the --rc script, run as `sh "
                   "SCRIPT ARGS` (bin/enroot-switchroot.c sys_init) with each --mount target leading to its "
                   "source.", _NVIDIA_HOOK + r"""
SQUASHFS="hsqs torchpod image"  # what a whole import writes (a squashfs starts with the magic hsqs)
[ $# -gt 0 ] || fail "no subcommand"
sub=$1; shift
case "$sub" in
  import)
    out=""
    while [ $# -gt 0 ]; do
      case "$1" in
        -o|--output) need $# "$1"; out=$2; shift 2 ;;
        -a|--arch) need $# "$1"; shift 2 ;;
        --) shift; break ;;
        -*) fail "unknown import option $1" ;;
        *) break ;;
      esac
    done
    [ $# -eq 1 ] || fail "import: expected one URI, got $# words"
    re='^docker://(([^@#/]+)@)?(([^#]+)#)?([[:lower:][:digit:]/._-]+)(:([[:alnum:]._:-]+))?$'
    [[ $1 =~ $re ]] || fail "import: invalid image reference: $1"
    [ -n "$out" ] || fail "import: the scripts always name the output"
    [ ! -e "$out" ] || fail "import: file already exists: $out"
    if [ "${STUB_KILL_IMPORT-}" = 1 ]; then printf 'hsqs' > "$out"; exit 137; fi
    printf '%s' "$SQUASHFS" > "$out"
    exit 0 ;;
  start)
    envs=("PATH=${0%/*}" "HOME=${HOME-}" "TERM=${TERM-}")  # the image's PATH, switchroot's HOME, environ.d
    rc="" mounts=()
    stub_envs
    while [ $# -gt 0 ]; do
      case "$1" in
        --rc) need $# "$1"; rc=$2; [ -f "$rc" ] || fail "No such file or directory: $rc"; shift 2 ;;
        -m|--mount) need $# "$1"; mounts+=("$2"); shift 2 ;;
        -c|--conf) need $# "$1"; shift 2 ;;
        -e|--env) need $# "$1"
          [[ $2 =~ ^[[:alpha:]_][[:alnum:]_]*(=|$) ]] || fail "Invalid argument: $2"
          case "$2" in *=*) envs+=("$2") ;; *) envs+=("$2=${!2-}") ;; esac; shift 2 ;;
        -r|--root|-w|--rw) shift ;;
        --) shift; break ;;
        -*) fail "unknown start option $1" ;;
        *) break ;;
      esac
    done
    [ $# -ge 1 ] || fail "start: expected IMAGE [COMMAND] [ARG...]"
    [ -f "$1" ] || fail "start: image $1: no such squashfs file"
    IFS= read -r content < "$1" || true
    [ "$content" = "$SQUASHFS" ] || fail "start: $1: squashfs truncated (an import did not finish)"
    shift
    envs+=("STUB_GPUS_ENUMERATED=$(printf '%s\n' "${envs[@]}" | nvidia_hook)")
    if [ -n "$rc" ]; then
      # the script runs in the container, where cd to a --mount target reaches its source
      paths=(); for m in ${mounts[@]+"${mounts[@]}"}; do paths+=("${m#*:}=${m%%:*}"); done
      exec env -i "${envs[@]}" STUB_MOUNTS="${paths[*]-}" /bin/bash -c \
        'cd() { local m; for m in $STUB_MOUNTS; do [ "$1" = "${m%%=*}" ] && set -- "${m#*=}"; done; builtin cd "$1"; }
         . "$0"' "$rc" "$@"
    fi
    entry=${STUB_IMAGE_ENTRYPOINT:-torchpod}
    if [ $# -gt 0 ]; then exec env -i "${envs[@]}" "${0%/*}/$entry" "$@"; fi
    exec env -i "${envs[@]}" "${0%/*}/$entry" --help ;;
  *) fail "subcommand $sub is not modelled" ;;
esac
""")

_RUN_OPTIONS = r"""
        --rm|--privileged|--init) shift ;;
        -u|--user) need $# "$1"; case "$2" in [0-9]*:[0-9]*) ;; *) fail "--user $2: expected UID:GID" ;; esac
          case "$2" in *[!0-9:]*) fail "--user $2: expected numeric UID:GID" ;; esac; shift 2 ;;
        -e|--env) need $# "$1"; addenv "$2"; shift 2 ;;
        -e?*) addenv "${1#-e}"; shift ;;
        --env=*) addenv "${1#*=}"; shift ;;
        --gpus) need $# "$1"; gpu_request "$2"; shift 2 ;;
        --gpus=*) gpu_request "${1#*=}"; shift ;;
        --name) need $# "$1"; name=$2; shift 2 ;;
        --entrypoint) need $# "$1"; entry=$2; shift 2 ;;
        --label) need $# "$1"; case "$2" in ?*=*) ;; *) fail "--label $2: expected KEY=VALUE" ;; esac; shift 2 ;;
        --network|--ipc|-v|--volume|-w|--workdir|--shm-size|--ulimit|--device|--cap-add)
          need $# "$1"; shift 2 ;;
        --network=*|--ipc=*|--volume=*|--workdir=*|--shm-size=*|--ulimit=*|--device=*|\
        --cap-add=*) shift ;;
"""

_RUNTIME = r"""
# The container starts with only the variables named by --env/-e: KEY=VALUE, or KEY taken
# from the caller when set%(glob_doc)s.
envs=()
addenv() {
  case "$1" in
    *'*'*) %(glob)s ;;
    [A-Za-z_]*=*) envs+=("$1") ;;
    [A-Za-z_]*) if [ -n "${!1+x}" ]; then envs+=("$1=${!1}"); fi ;;
    *) fail "environment entry $1: expected KEY=VALUE or KEY" ;;
  esac
}
name="" entry=""
# --gpus (docker run reference, "Access an NVIDIA GPU"; docker/cli opts/gpus.go reads the value
# as CSV, so a device list is quoted inside it: '"device=4,5"'): all, or device=ID[,ID...].
gpus=""
gpu_request() {
  local value=$1
  case "$value" in
    all) gpus=all ;;
    '"device='*'"') value=${value#'"device='}; gpus=${value%%'"'} ;;
    device=*,*) fail "--gpus $value: a device list with a comma must be quoted inside the value" ;;
    device=?*) gpus=${value#device=} ;;
    *) fail "--gpus $value: expected all or device=ID[,ID...]" ;;
  esac
  [[ $gpus =~ ^(all|[A-Za-z0-9-]+(,[A-Za-z0-9-]+)*)$ ]] || fail "--gpus $1: expected GPU ids or UUIDs"
}
[ $# -gt 0 ] || fail "no subcommand"
sub=$1; shift
case "$sub" in
  pull)
    while [ $# -gt 0 ]; do
      case "$1" in
        -q|--quiet) shift ;;
        --platform) need $# "$1"; shift 2 ;;
        -*) fail "unknown pull option $1" ;;
        *) break ;;
      esac
    done
    [ $# -eq 1 ] || fail "pull: expected one IMAGE, got $# words"
    exit 0 ;;
  run)
    while [ $# -gt 0 ]; do
      case "$1" in
%(extra)s%(options)s
        --) shift; break ;;
        -*) fail "unknown run option $1" ;;
        *) break ;;
      esac
    done
    [ $# -ge 1 ] || fail "run: expected IMAGE [ARG...]"
    shift
    stub_envs
    envs+=("STUB_GPUS_ENUMERATED=$(enumerate_gpus "$gpus" %(in_cgroup)s)")
    # the container, by name, in the daemon's state (a file beside the stubs): it lives until it
    # ends on its own (--rm removes it) or is stopped; the client dying leaves it running
    [ -n "$name" ] || name="anonymous-$$"
    [[ $name =~ ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$ ]] || fail "--name $name: invalid container name"
    box="${0%%/*}/container-$name"
    if [ -e "$box" ] && [ "$(< "$box")" = running ]; then fail "--name $name: the name is already in use"; fi
    printf running > "$box"
    rc=0
    env -i "${envs[@]}" "${0%%/*}/${entry:-${STUB_IMAGE_ENTRYPOINT:-torchpod}}" "$@" || rc=$?
    if [ "${STUB_DOCKER_BLOCK-}" = 1 ]; then  # training goes on until the container is stopped
      exec 9<> <(:)
      while [ "$(< "$box")" = running ]; do read -r -t 0.05 -u 9 _ || true; done
      exit 137
    fi
    printf removed > "$box"
    exit "$rc" ;;
  stop)
    while [ $# -gt 0 ]; do
      case "$1" in
        -t|--time) need $# "$1"; shift 2 ;;
        -*) fail "unknown stop option $1" ;;
        *) break ;;
      esac
    done
    [ $# -eq 1 ] || fail "stop: expected one CONTAINER"
    box="${0%%/*}/container-$1"
    if [ ! -e "$box" ] || [ "$(< "$box")" != running ]; then
      echo "Error response from daemon: No such container: $1" >&2
      exit 1
    fi
    printf removed > "$box"  # stopped, then removed (--rm)
    record container-stopped "$1"
    exit 0 ;;
  *) fail "subcommand $sub is not modelled" ;;
esac
"""

STUBS["docker"] = ("docker run reference (Docker 27): `docker run [OPTIONS] IMAGE [COMMAND] [ARG...]`, the "
                   "ARGs go to the image's ENTRYPOINT (STUB_IMAGE_ENTRYPOINT, torchpod unless set) or --entrypoint's "
                   "program; `docker pull [-q] IMAGE`. dockerd starts "
                   "the container outside the job's cgroup (NVIDIA/nvidia-container-toolkit GitHub #211): it "
                   "reaches the GPUs --gpus names, whatever the job holds.",
                   _RUNTIME % {"extra": "", "options": _RUN_OPTIONS, "glob_doc": "", "in_cgroup": "0",
                               "glob": 'fail "--env $1: docker takes no NAME* pattern"'})
STUBS["podman-hpc"] = ("podman-hpc (NERSC/podman-hpc README): `podman-hpc pull IMAGE` migrates the image to the "
                       "nodes' squashfs store; `podman-hpc run [--gpu] [--mpi] [podman run options] IMAGE "
                       "[ARG...]` as podman-run(1): ARGs go to the ENTRYPOINT, --env accepts NAME_* patterns.",
                       _RUNTIME % {"extra": "        --gpu) gpus=all; shift ;;\n"
                                            "        --mpi|--openmpi-pmi2|--cuda-mpi) shift ;;\n",
                                   "in_cgroup": "1",
                                   "options": _RUN_OPTIONS, "glob_doc": "; NAME_* passes every variable so named",
                                   "glob": 'local name; for name in $(compgen -e); do case "$name" in '
                                           '"${1%%\\*}"*) envs+=("$name=${!name}") ;; esac; done'})

STUBS["runai"] = ("Run:ai CLI reference (v2.18+): `runai training pytorch submit NAME [flags] -- ARGS`; the "
                  "ARGS go to the image's ENTRYPOINT, or with --command replace it (docs.nvidia.com/run-ai, "
                  "runai training pytorch submit: `--command -- echo \"Hello, World\"`).", r"""
[ "${1-} ${2-} ${3-}" = "training pytorch submit" ] || fail "only 'training pytorch submit' is modelled"
shift 3
[ $# -gt 0 ] || fail "no job name"
case "$1" in -*) fail "job name $1 looks like a flag" ;; esac
shift
while [ $# -gt 0 ]; do
  case "$1" in
    -p|--project|-i|--image|--workers|-g|--gpu-devices-request|--capability|--extended-resource|-e|--environment\
    |--cpu-core-request|--cpu-core-limit|--cpu-memory-request|--cpu-memory-limit)
      need $# "$1"; shift 2 ;;
    --large-shm|--host-network|--command) shift ;;
    --) shift; break ;;
    -*) fail "unknown flag $1" ;;
    *) fail "stray word $1 before '--'" ;;
  esac
done
exit 0
""")

STUBS["ngc-entrypoint"] = ("An image's own ENTRYPOINT that is not torchpod, as NVIDIA's NGC images have "
                           "(/opt/nvidia/nvidia_entrypoint.sh: a banner on stderr, then `exec \"$@\"`): words "
                           "meant for torchpod's ENTRYPOINT (`run -- ...`) fail here.", r"""
echo "== an image's own entrypoint: banner ==" >&2
[ $# -gt 0 ] || exit 0
command -v "$1" >/dev/null || { echo "ngc-entrypoint: $1: command not found" >&2; exit 127; }
exec "$@"
""")

STUBS["torchpod"] = ("The image's ENTRYPOINT: records its argv, the fabric preset it was handed and its whole "
                     "environment; outside any container (runtime none) CUDA enumerates what the task's cgroup "
                     "holds. Exits 3 on node STUB_FAIL_NODE.", r"""
record torchpod-env "${TORCHPOD_PRESET-<unset>}" "${SLURM_JOB_ID-<unset>}" "${PBS_NODEFILE-<unset>}" \
  "${LSB_DJOB_HOSTFILE-<unset>}"
if [ -z "${STUB_GPUS_ENUMERATED+x}" ]; then
  STUB_GPUS_ENUMERATED=$(enumerate_gpus all 1)
  export STUB_GPUS_ENUMERATED
fi
pairs=()
for name in $(compgen -e); do pairs+=("$name=${!name}"); done
record torchpod-environ ${pairs[@]+"${pairs[@]}"}
[ "${STUB_NODE-}" != "${STUB_FAIL_NODE-none}" ] || exit 3
exit 0
""")


def install(bindir: Path, log: Path) -> None:
    """Write every stub into ``bindir`` (recording to ``log``) and link the real tools."""
    bindir.mkdir(parents=True, exist_ok=True)
    for name, (doc, body) in STUBS.items():
        path = bindir / name
        path.write_text(_PRELUDE % {"name": name, "doc": doc.replace("\n", " "), "log": shlex.quote(str(log))}
                        + body)
        path.chmod(0o755)
    (bindir / MOM_BIN).mkdir()
    for tool in REAL_TOOLS:
        real = shutil.which(tool, path="/usr/bin:/bin")
        if real is None:
            raise RuntimeError(f"coreutils' {tool} is missing")
        (bindir / tool).symlink_to(real)
        (bindir / MOM_BIN / tool).symlink_to(real)


def job_env(bindir: Path, log: Path, **extra: str) -> dict[str, str]:
    """The environment a job script runs in: PATH is the stubs only, and a command bash
    cannot find is recorded as NOT-FOUND (bash imports the exported function)."""
    handler = f"() {{ printf '%s\\0' {NOT_FOUND} \"$#\" \"$@\" >> {shlex.quote(str(log))}; return 127; }}"
    return {"PATH": str(bindir), "BASH_FUNC_command_not_found_handle%%": handler, **extra}


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[str, ...]


def read_log(log: Path) -> list[Call]:
    """The calls recorded in ``log``, in order."""
    if not log.exists():
        return []
    fields = [f.decode("utf-8", "surrogateescape") for f in log.read_bytes().split(b"\0")]
    if fields and fields[-1] == "":
        fields.pop()
    calls, i = [], 0
    while i < len(fields):
        name, count = fields[i], int(fields[i + 1])
        calls.append(Call(name, tuple(fields[i + 2:i + 2 + count])))
        i += 2 + count
    return calls


def _split_options(args: tuple[str, ...], with_value: set[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """(option, value) pairs before the first operand, and the operands (after `--` too)."""
    opts, i = [], 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return opts, list(args[i + 1:])
        if not a.startswith("-"):
            break
        if "=" in a and a.startswith("--"):
            opts.append(tuple(a.split("=", 1)))
            i += 1
        elif a in with_value:
            opts.append((a, args[i + 1]))
            i += 2
        else:
            opts.append((a, ""))
            i += 1
    return opts, list(args[i:])


def mounts(call: Call) -> list[tuple[str, str]]:
    """(host, container) of every bind ``call`` asks for, parsed the way the tool parses it:
    apptainer --bind src[:dest[:opts]] split on ','; docker/podman -v src:dest[:opts]; enroot
    --mount fstab fields split on ':'; pyxis --container-mounts SRC:DST[:FLAGS] split on ','."""
    if call.name == "srun":
        opts, _ = _split_options(call.args, {"--container-mounts", "--container-image", "--export", "-N", "-n"})
        specs = [s for o, v in opts if o == "--container-mounts" for s in v.split(",")]
    elif call.name == "apptainer":
        opts, _ = _split_options(call.args[1:], {"--bind", "-B", "--pwd", "--env", "--home", "--mount"})
        specs = [s for o, v in opts if o in ("--bind", "-B") for s in v.split(",")]
    elif call.name == "enroot":
        opts, _ = _split_options(call.args[1:], {"-m", "--mount", "-e", "--env", "-c", "--conf", "--rc"})
        specs = [v for o, v in opts if o in ("-m", "--mount")]
    else:  # docker, podman-hpc
        opts, _ = _split_options(call.args[1:], {"-e", "--env", "--network", "--ipc", "-v", "--volume", "-w",
                                                 "--workdir", "--name", "--shm-size", "--ulimit", "--gpus",
                                                 "-u", "--user", "--label"})
        specs = [v for o, v in opts if o in ("-v", "--volume")]
    out = []
    for spec in specs:
        parts = spec.split(":")
        out.append((parts[0], parts[1] if len(parts) > 1 else parts[0]))
    return out


def operands(call: Call, with_value: set[str]) -> list[str]:
    """The words after ``call``'s options (its subcommand dropped for runtimes)."""
    return _split_options(call.args, with_value)[1]


def realpath(path: Path) -> str:
    return os.path.realpath(path)
