"""Batch scripts for Slurm and PBS Pro that start exactly one launcher per node, inside the
site's container runtime, with the image pulled or converted once per job. Pure: returns
the script's text.

Why one launcher per node: `torchpod` (like torchrun) is a per-node agent that starts the
node's GPU processes itself. A script that runs it once, on the batch host only, leaves the
other nodes out of the rendezvous: the `RendezvousTimeoutError` of seed 001's PBS script.

- Slurm: ``srun --ntasks-per-node=1`` (srun(1)); srun's task environment (SLURM_NODEID,
  SLURM_JOB_NODELIST, ...) is what the launcher reads.
- PBS Pro with Cray PALS: ``mpiexec --ppn 1`` starts one rank per node and copies the job
  script's environment; PALS_NODEID gives the node index.
- PBS Pro without PALS: ``pbsdsh`` starts one task per line of PBS_NODEFILE and has no
  option to start one per host (openpbs src/tools/pbsdsh.c), so the job asks for
  ``mpiprocs=1`` per chunk: one line per node. Its tasks get the MOM's environment and
  PBS_NODENUM, not the job script's exports, so the command passes what it needs itself.

Runtimes: Apptainer (``exec --nv``, a SIF pulled once into the submit directory), enroot
through pyxis (``srun --container-image`` of a squashfs imported once; pyxis does not run
the image's ENTRYPOINT, so ``torchpod`` is named), podman-hpc (``pull`` once: it migrates
the image to every node's squashfs store), Docker (``pull`` once per node), or none (the
nodes' own environment has torchpod, e.g. the image itself; used by the tests).
"""

from __future__ import annotations

import shlex

from .spec import JobSpec

# Variables a container started by Docker must be handed explicitly (docker run has no
# prefix form): the ones torchpod's Slurm and PBS detectors read.
SLURM_VARS = ("SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES",
              "SLURM_NNODES", "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_STEP_ID",
              "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_NODES", "SLURM_STEP_TASKS_PER_NODE",
              "SLURM_TASKS_PER_NODE", "SLURM_GPUS_ON_NODE", "SLURMD_NODENAME")
PBS_VARS = ("PBS_JOBID", "PBS_NODEFILE", "PBS_NODENUM", "PALS_NODEID", "PALS_RANKID", "PALS_LOCAL_RANKID")
WORKDIR = "/workspace"


class Sh(str):
    """A token the batch shell expands (``"$SIF"``, ``"$PWD:/workspace"``): never re-quoted."""


def line(argv) -> str:
    """One shell command line: literal tokens quoted, Sh tokens as written."""
    return " ".join(a if isinstance(a, Sh) else shlex.quote(a) for a in argv)


def _torchpod(spec: JobSpec) -> list[str]:
    args = ["torchpod", "run"]
    if spec.rdzv == "etcd":
        args += ["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", spec.etcd_endpoint]
    return args + ["--", *spec.command]


def _env_pairs(spec: JobSpec) -> list[str]:
    return [f"TORCHPOD_PRESET={spec.preset}"] if spec.preset else []


def _enroot_ref(image: str) -> str:
    """enroot's docker:// form separates a registry host from the path with '#'."""
    first = image.split("/", 1)[0]
    return image.replace("/", "#", 1) if ("." in first or ":" in first) and "/" in image else image


def prepare(spec: JobSpec, per_node: list[str]) -> list[str]:
    """Lines that fetch or convert the image once for the job (``per_node``: the argv
    prefix that runs a command once on every node)."""
    if spec.runtime == "apptainer":
        return ['SIF="${TORCHPOD_SIF:-$PWD/' + spec.name + '.sif}"  # on a filesystem every node sees',
                '[ -f "$SIF" ] || apptainer pull "$SIF" ' + shlex.quote("docker://" + spec.image)]
    if spec.runtime == "enroot":
        return ['SQSH="${TORCHPOD_SQSH:-$PWD/' + spec.name + '.sqsh}"  # on a filesystem every node sees',
                '[ -f "$SQSH" ] || enroot import -o "$SQSH" ' + shlex.quote("docker://" + _enroot_ref(spec.image))]
    if spec.runtime == "podman":
        return [line(["podman-hpc", "pull", spec.image]) + "  # podman-hpc migrates it to every node"]
    if spec.runtime == "docker":
        pull = ["docker", "pull", "-q", spec.image]
        if per_node[0] == "pbsdsh":  # pbsdsh runs a program, not a shell line
            pull = ["/bin/bash", "-c", line(pull) + " >/dev/null"]
            return [line([*per_node, *pull]) + "  # once per node"]
        return [line([*per_node, *pull]) + " >/dev/null  # once per node"]
    return []


def container_command(spec: JobSpec, forward: tuple[str, ...]) -> list[str]:
    """The argv that runs torchpod on one node under ``spec.runtime``."""
    inner = _torchpod(spec)
    env = _env_pairs(spec)
    binds = [Sh(f'"$PWD:{WORKDIR}"')]
    if forward is PBS_VARS:  # the launcher reads the node list from PBS_NODEFILE (under /var/spool/pbs)
        binds.append(Sh('"$PBS_NODEFILE:$PBS_NODEFILE:ro"'))
    binds += [f"{host}:{inside}:ro" for host, inside in spec.fabric_binds()]  # the site's plugin and libfabric
    if spec.runtime == "apptainer":
        # exec, not run: the ENTRYPOINT is named explicitly; the environment passes through
        out = ["apptainer", "exec", "--nv"]
        for b in binds:
            out += ["--bind", b]
        out += ["--pwd", WORKDIR]
        for pair in env:
            out += ["--env", pair]
        return out + [Sh('"$SIF"'), *inner]
    if spec.runtime == "enroot":
        out = ["enroot", "start"]
        for b in binds:
            out += ["--mount", Sh(b.replace(":ro", ""))]
        for pair in env:
            out += ["--env", pair]
        return out + [Sh('"$SQSH"'), *inner]
    if spec.runtime in ("podman", "docker"):
        if spec.runtime == "podman":
            out = ["podman-hpc", "run", "--rm", "--gpu"]
            for prefix in sorted({name.split("_")[0] + "_*" for name in forward}):  # SLURM_*, or PBS_* and PALS_*
                out += ["--env", prefix]
        else:
            out = ["docker", "run", "--rm", "--gpus", "all", "--ulimit", "memlock=-1"]
            for name in forward:
                out += ["-e", name]
        out += ["--network", "host", "--ipc", "host"]
        for b in binds:
            out += ["-v", b]
        out += ["-w", WORKDIR]
        for pair in env:
            out += ["-e", pair]
        return out + [spec.image, *inner[1:]]  # the image's ENTRYPOINT is torchpod
    return (["env", *env] if env else []) + inner


def slurm_script(spec: JobSpec, header: list[str]) -> str:
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name={spec.name}",
             f"#SBATCH --nodes={spec.nodes}",
             "#SBATCH --ntasks-per-node=1"]
    if spec.gpus_per_node:
        lines.append(f"#SBATCH --gpus-per-node={spec.gpus_per_node}")
    lines.append(f"#SBATCH --time={spec.walltime}")
    if spec.queue:
        lines.append(f"#SBATCH --partition={spec.queue}")
    lines += ["#SBATCH --output=%x-%j.out", *header, "set -euo pipefail", ""]
    step = ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    prep = prepare(spec, step)
    if prep:
        lines += ["# the image, fetched or converted once for the whole job", *prep, ""]
    if spec.runtime == "enroot":
        mounts = ",".join([f"$PWD:{WORKDIR}", *(f"{h}:{c}:ro" for h, c in spec.fabric_binds())])
        run = [*step, Sh('--container-image="$SQSH"'), Sh(f'--container-mounts="{mounts}"'),
               f"--container-workdir={WORKDIR}"]
        if spec.preset:
            run.append("--export=ALL," + ",".join(_env_pairs(spec)))
        lines += ["# one launcher per node, through pyxis; pyxis does not run the image's ENTRYPOINT,",
                  "# so torchpod is named", line([*run, *_torchpod(spec)])]
    else:
        lines += ["# one launcher per node (torchpod starts the node's GPU processes itself)",
                  line([*step, *container_command(spec, SLURM_VARS)])]
    return "\n".join(lines) + "\n"


def pbs_script(spec: JobSpec, header: list[str]) -> str:
    pals = spec.scheduler == "pbs-pals"
    chunk = f"select={spec.nodes}:ncpus=1:mpiprocs=1" + (f":ngpus={spec.gpus_per_node}" if spec.gpus_per_node else "")
    lines = ["#!/bin/bash",
             f"#PBS -N {spec.name}",
             f"#PBS -l {chunk}",
             "#PBS -l place=scatter:excl",
             f"#PBS -l walltime={spec.walltime}"]
    if spec.queue:
        lines.append(f"#PBS -q {spec.queue}")
    lines += ["#PBS -j oe", *header, "set -euo pipefail", 'cd "$PBS_O_WORKDIR"', ""]
    cmd = container_command(spec, PBS_VARS)
    if pals:
        fan = ["mpiexec", "-n", Sh('"$NNODES"'), "--ppn", "1"]
        lines += ['NNODES=$(sort -u "$PBS_NODEFILE" | wc -l)']
        prep = prepare(spec, fan)
        if prep:
            lines += ["# the image, fetched or converted once for the whole job", *prep]
        lines += ["# one launcher per node: --ppn 1; PALS copies this script's environment",
                  line([*fan, *cmd])]
    else:
        fan = ["pbsdsh", "--"]
        prep = prepare(spec, fan)
        if prep:
            lines += ["# the image, fetched or converted once for the whole job", *prep]
        # pbsdsh tasks start in $HOME with the MOM's environment, not this script's: the
        # outer double quotes expand the directory and image paths here, before the fan-out.
        body = line(["cd", Sh('"$PBS_O_WORKDIR"')]) + " && exec " + line(cmd)
        body = body.replace("\\", "\\\\").replace('"', '\\"')
        lines += ["# mpiprocs=1: one PBS_NODEFILE line per node, so pbsdsh starts one launcher per node",
                  f'pbsdsh -- /bin/bash -c "{body}"']
    return "\n".join(lines) + "\n"
