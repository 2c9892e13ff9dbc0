"""The container runtimes a batch script can run the image with, one ``Runtime`` record each:
how the job fetches or converts the image once (``prepare``), and the argv that runs
torchpod inside it on one node (``command``). The scheduler's script (``hpc``) puts these
lines after its own directives and its own way of starting one task per node.

Apptainer (``exec --nv``, a SIF pulled once into the submit directory), enroot (a squashfs
imported once; under Slurm through pyxis' ``srun --container-image``, which names torchpod
itself, elsewhere ``enroot start`` with an rc script that runs torchpod whatever the image's
ENTRYPOINT), podman-hpc (``pull`` once: it migrates the image to every node's squashfs store), Docker
(``pull`` once per node), or none (the nodes' own environment has torchpod, e.g. the image
itself; used by the tests). Every word is quoted by construction (``shellwords``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from torchpod.contract import ENV_PRESET, SETTINGS

from . import jobs
from .shellwords import USER_IDS, WORKDIR, Sh, job_name, line

if TYPE_CHECKING:  # the writers take a checked spec; spec.py imports no writer
    from .spec import JobSpec


# What a runtime that starts with a cleared environment (enroot start, docker run, podman
# run) must be handed by name: the variables torchpod's detector for the batch system reads
# (the kind's record takes them from contract.SCHEDULER_VARS, the same tuple the detector
# checks itself against) and every
# TORCHPOD_* setting, so a job script's `export TORCHPOD_DOCTOR=1` reaches the launcher.
# enroot's `--env NAME` copies the caller's value and sets an unset name to "" (NVIDIA/enroot
# 8ea147d, src/runtime.sh runtime::_do_environ), which torchpod reads as unset.
_SETTING_NAMES = tuple(s.name for s in SETTINGS)


def forwarded(spec: JobSpec) -> tuple[str, ...]:
    """The names a runtime that clears the environment is handed: the kind's scheduler
    variables (its record's ``forwards``) and every TORCHPOD_* setting."""
    return jobs.kind(spec.scheduler).forwards + _SETTING_NAMES


# Which of the node's GPUs are the job's, by batch system: OpenPBS's cgroups hook names them
# by UUID in CUDA_VISIBLE_DEVICES (src/hooks/cgroups/pbs_cgroups.PY, with CUDA_DEVICE_ORDER);
# LSF by global id in CUDA_VISIBLE_DEVICES; Slurm by global id in SLURM_STEP_GPUS, its
# CUDA_VISIBLE_DEVICES being relative to the task's device cgroup (srun(1)), which a
# container dockerd starts is outside of.
GPU_SELECTION = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
# enroot's GPU hook does nothing unless NVIDIA_VISIBLE_DEVICES is set, and mounts no libcuda
# unless NVIDIA_DRIVER_CAPABILITIES has compute (NVIDIA/enroot 8ea147d, conf/hooks/98-nvidia.sh;
# NVIDIA's CUDA images set both, torchpod's image sets neither, so that a Kubernetes pod that
# asked for no GPU is never handed every GPU by the device plugin's environment strategy).
# "all": the devices enroot exposes; the job's CUDA_VISIBLE_DEVICES then picks the job's.
NVIDIA_ENV = ("NVIDIA_VISIBLE_DEVICES=all", "NVIDIA_DRIVER_CAPABILITIES=compute,utility")
# docker pull on every node under pbsdsh, which runs a program with its arguments, not a shell
# line, in $HOME with the MoM's PATH (hpc.PBSDSH_TASK): this fixed bash program takes the job
# script's PATH ($1) and runs the rest of its arguments as they are, discarding their output.
PBSDSH_QUIET = 'export PATH="$1" && shift && exec "$@" >/dev/null'
# docker run on one node, as a fixed bash program: dockerd starts the container outside the
# job, so cancelling the job stops the docker client, not the container (which keeps the
# node's GPUs). The container is named for the job ($1) and the node, labelled with the job,
# and a TERM, INT or HUP from the batch system (scancel, qdel, bkill send one before SIGKILL)
# stops it; --rm then removes it. Under Slurm with GPUs it also takes the step's GPUs by
# global id (srun(1): SLURM_STEP_GPUS, set in the step's task, not the batch shell); docker/cli
# opts/gpus.go reads --gpus as CSV, so the list is quoted inside the value.
_DOCKER_TASK = ('job="$1"; shift; name="torchpod-${{job//[^A-Za-z0-9_.-]/_}}-${{HOSTNAME//[^A-Za-z0-9_.-]/_}}"; '
                'trap \'docker stop --time 20 "$name" >/dev/null 2>&1; exit 143\' TERM INT HUP; '
                'docker run --name "$name" --label "torchpod.job=$job"{gpus} "$@" & wait "$!"')
DOCKER_TASK = _DOCKER_TASK.format(gpus="")
DOCKER_STEP_GPUS = _DOCKER_TASK.format(
    gpus=' --gpus "\\"device=${SLURM_STEP_GPUS:?is not set: Slurm gave this step no GPU ids (a gres/gpu job on '
         'nodes whose gres.conf lists the GPUs sets it)}\\""')


def torchpod_argv(spec: JobSpec) -> list[str]:
    """``torchpod run``, the rendezvous it is told (an etcd it cannot derive), then the job's
    launch options and the words of its command."""
    args = ["torchpod", "run"]
    if spec.rdzv == "etcd":
        args += ["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", spec.etcd_endpoint]
    options, words = spec.launch()
    return args + [*options, "--", *words]


def env_pairs(spec: JobSpec) -> list[str]:
    """NAME=VALUE of the fabric preset the launcher applies, if the job names one."""
    return [f"{ENV_PRESET.name}={spec.preset}"] if spec.preset else []


def _user_names(spec: JobSpec) -> tuple[str, ...]:
    """The names of the job's --env pairs: a runtime that clears the environment is handed
    each by name, its value set on the node by ``env`` (container_command)."""
    return tuple(item.partition("=")[0] for item in spec.env)


def _enroot_ref(image: str) -> str:
    """enroot's docker:// form separates a registry host from the path with '#'."""
    first = image.split("/", 1)[0]
    return image.replace("/", "#", 1) if ("." in first or ":" in first) and "/" in image else image


def image_file(spec: JobSpec, suffix: str) -> str:
    """The name of the image file a job pulls once into its submit directory: the job's name
    and a digest of the image reference, so a job re-rendered for another image (a new tag, a
    digest) pulls that one rather than running the file an earlier image left there."""
    return f"{job_name(spec)}-{hashlib.sha256(spec.image.encode()).hexdigest()[:12]}.{suffix}"




def _sif(spec: JobSpec, per_node: list) -> list[str]:
    return [f"# {image_file(spec, 'sif')}: {spec.image}'s own file; another --image pulls another",
            'SIF="${TORCHPOD_SIF:-$PWD/' + image_file(spec, "sif") + '}"  # on a filesystem every node sees',
            '[ -f "$SIF" ] || ' + line(["apptainer", "pull", Sh('"$SIF"'), "docker://" + spec.image])]


def _sqsh(spec: JobSpec, per_node: list) -> list[str]:
    """enroot import writes its squashfs in place (mksquashfs to the output), so an import
    killed half-way leaves a truncated file the next run would reuse: import under a name
    of this job's, then rename (atomic within the directory)."""
    return [f"# {image_file(spec, 'sqsh')}: {spec.image}'s own file; another --image imports another",
            'SQSH="${TORCHPOD_SQSH:-$PWD/' + image_file(spec, "sqsh") + '}"  # on a filesystem every node sees',
            'if [ ! -f "$SQSH" ]; then',
            '  PART="$SQSH.part-$' + jobs.kind(spec.scheduler).job_id + '"  # renamed only once whole',
            '  ' + line(["enroot", "import", "-o", Sh('"$PART"'), "docker://" + _enroot_ref(spec.image)]),
            '  ' + line(["mv", "-f", Sh('"$PART"'), Sh('"$SQSH"')]),
            "fi"]


def _podman_pull(spec: JobSpec, per_node: list) -> list[str]:
    return [line(["podman-hpc", "pull", spec.image]) + "  # podman-hpc migrates it to every node"]


def _docker_pull(spec: JobSpec, per_node: list) -> list[str]:
    pull = ["docker", "pull", "-q", spec.image]
    if per_node[0] == "pbsdsh":  # a program, not a shell line: a fixed bash program discards the output
        return [line([*per_node, "/bin/bash", "-c", PBSDSH_QUIET, "bash", Sh('"$PATH"'), *pull]) + "  # once per node"]
    return [line([*per_node, *pull]) + " >/dev/null  # once per node"]


def bound_at_run_time(spec: JobSpec) -> tuple[str, ...]:
    """The host paths a container bind takes from the batch shell: the submit directory
    always, and the node file where the launcher reads the host list (the kind's record)."""
    node_file = jobs.kind(spec.scheduler).node_file
    return ("PWD", node_file) if node_file else ("PWD",)


def bind_guard(spec: JobSpec) -> list[str]:
    """Lines that stop the job when a path it binds holds ',' or ':': a bind is HOST:CONTAINER
    (Apptainer --bind, docker/podman -v, enroot --mount, pyxis --container-mounts) and
    Apptainer and pyxis split a list of them at ',', so such a directory would silently bind
    the wrong path. Fixed text: the paths are the shell's, checked when the job runs."""
    names = bound_at_run_time(spec)
    return ["# every host path bound into the container: a ',' or ':' in it would split the bind",
            *(f'case "${n}" in *[,:]*) echo "torchpod: {n}=${n} holds \',\' or \':\', which split a container '
              'bind; expected a path without them (submit from another directory)" >&2; exit 2 ;; esac'
              for n in names)]


def prepare(spec: JobSpec, per_node: list, *, pyxis: bool = False) -> list[str]:
    """Lines that fetch or convert the image once for the job (``per_node``: the argv
    prefix that runs a command once on every node), after the bind guard of a runtime that
    binds paths; for `enroot start` (not pyxis, which names torchpod itself) its rc script."""
    lines = RUNTIMES[spec.runtime].prepare(spec, per_node)
    if spec.runtime == "enroot" and not pyxis:
        lines += _enroot_rc(spec)
    return [*bind_guard(spec), *lines] if spec.runtime != "none" else lines


# enroot start runs the container's command script with the words after the image: an
# imported image's /etc/rc changes to its WorkingDir and runs `exec ENTRYPOINT "$@"`
# (NVIDIA/enroot 8ea147d, src/docker.sh docker::configure), so torchpod's words would go to
# whatever ENTRYPOINT the image has. `--rc SCRIPT` replaces it (doc/cmd/start.md), run as
# `sh SCRIPT ARGS...` (bin/enroot-switchroot.c sys_init): this one changes to the bound
# submit directory and runs the words as they are, torchpod named first.
ENROOT_RC = (f"cd {WORKDIR} || exit 1", 'exec "$@"')


def _enroot_rc(spec: JobSpec) -> list[str]:
    """Written whole, then renamed (atomic within the directory): a job that read the file
    half-written would run an empty script, which exits 0 without starting torchpod."""
    part = '"$RC.part-$' + jobs.kind(spec.scheduler).job_id + '"'
    return ['RC="$PWD/' + image_file(spec, "enroot-rc") + '"  # enroot start --rc: torchpod, whatever the '
            "image's ENTRYPOINT",
            line(["printf", "%s\\n", *ENROOT_RC]) + " > " + part,
            f'mv -f {part} "$RC"']


def binds(spec: JobSpec, *, flags: bool = True) -> list:
    """HOST:CONTAINER[:ro] of every bind, the form Apptainer --bind, docker/podman -v and
    pyxis take: the submit directory, the PBS or LSF node file (the launcher reads the node
    list there, under /var/spool/pbs or the job's .lsbatch directory), the site's plugin.
    enroot's --mount is an fstab entry, colon-separated, with no ``ro`` there (``flags=False``)."""
    out: list = [Sh(f'"$PWD:{WORKDIR}"')]
    nodefile = jobs.kind(spec.scheduler).node_file
    if nodefile:
        out.append(Sh(f'"${nodefile}:${nodefile}:ro"' if flags else f'"${nodefile}:${nodefile}"'))
    for host, inside in spec.fabric_binds():  # host paths spec.check held to HOST_PATH_CHARS
        if any(ch in host or ch in inside for ch in ",:"):
            raise ValueError(f"bind path {host!r} -> {inside!r} reached hpc.py unchecked")
        out.append(f"{host}:{inside}:ro" if flags else f"{host}:{inside}")
    for v in spec.volumes:  # --volume hostpath:..., paths podfields held to its grammar (no ',' or ':')
        out.append(f"{v.source}:{v.path}:ro" if flags and v.read_only else f"{v.source}:{v.path}")
    return out


def _apptainer(spec: JobSpec, forward: tuple[str, ...]) -> list:
    # exec, not run: the ENTRYPOINT is named explicitly; the environment passes through.
    # --nv (the driver and every GPU device) only for a job that holds GPUs: the job's own
    # CUDA_VISIBLE_DEVICES, passed through, then picks them.
    out: list = ["apptainer", "exec", *(["--nv"] if spec.gpus_per_node else [])]
    for b in binds(spec):
        out += ["--bind", b]
    out += ["--pwd", WORKDIR]
    for pair in env_pairs(spec):
        out += ["--env", pair]
    return out + [Sh('"$SIF"'), *torchpod_argv(spec)]


def _enroot(spec: JobSpec, forward: tuple[str, ...]) -> list:
    """enroot start clears the environment (NVIDIA/enroot 8ea147d, bin/common.h clearenv):
    every variable torchpod reads is named, and for a job holding GPUs the hook's two and
    the job's GPU selection."""
    out: list = ["enroot", "start", "--rc", Sh('"$RC"')]
    for b in binds(spec, flags=False):
        out += ["--mount", b]
    names = forward + (GPU_SELECTION if spec.gpus_per_node else ()) + _user_names(spec)
    for item in [*names, *(NVIDIA_ENV if spec.gpus_per_node else ()), *env_pairs(spec)]:
        out += ["--env", item]
    # the rc script (ENROOT_RC) runs the words as they are: torchpod is named, whatever the ENTRYPOINT
    return out + [Sh('"$SQSH"'), *torchpod_argv(spec)]


def _engine_run(spec: JobSpec, out: list, forward: tuple[str, ...]) -> list:
    """The rest of a podman-hpc / docker run: host network and IPC, binds, torchpod as the
    entrypoint, the image."""
    out = out + ["--network", "host", "--ipc", "host"]
    for b in binds(spec):
        out += ["-v", b]
    out += ["-w", WORKDIR]
    for pair in env_pairs(spec):
        out += ["-e", pair]
    # --entrypoint: torchpod on the image's PATH, whatever the image's ENTRYPOINT
    return out + ["--entrypoint", "torchpod", spec.image, *torchpod_argv(spec)[1:]]


def _podman(spec: JobSpec, forward: tuple[str, ...]) -> list:
    """podman-hpc run passes only what --env names; --gpu (every GPU, in the job's cgroup)
    only for a job that holds GPUs, with the job's selection."""
    out: list = ["podman-hpc", "run", "--rm", *(["--gpu"] if spec.gpus_per_node else [])]
    for name in forward + (GPU_SELECTION if spec.gpus_per_node else ()) + _user_names(spec):
        out += ["--env", name]
    return _engine_run(spec, out, forward)


def _docker(spec: JobSpec, forward: tuple[str, ...]) -> list:
    """docker run passes only what -e names, and dockerd starts the container outside the
    job's cgroup (NVIDIA/nvidia-container-toolkit GitHub #211): under Slurm it is handed the
    step's GPUs by global id; under PBS and LSF every GPU and the job's selection."""
    out: list = ["docker", "run", "--rm", "--user", Sh(USER_IDS)]
    slurm_gpus = bool(spec.gpus_per_node) and jobs.kind(spec.scheduler).step_gpus
    names = forward + (GPU_SELECTION if spec.gpus_per_node and not slurm_gpus else ()) + _user_names(spec)
    out += [*(["--gpus", "all"] if spec.gpus_per_node and not slurm_gpus else []), "--ulimit", "memlock=-1"]
    for name in names:
        out += ["-e", name]
    out = _engine_run(spec, out, forward)
    # a fixed bash program on the node names the container, stops it when the job is
    # cancelled and (Slurm with GPUs) reads the step's GPU ids; the words reach docker run as they are
    program = DOCKER_STEP_GPUS if slurm_gpus else DOCKER_TASK
    return ["/bin/bash", "-c", program, "bash", Sh(f'"${jobs.kind(spec.scheduler).job_id}"'), *out[2:]]


def bare(spec: JobSpec, forward: tuple[str, ...]) -> list:
    """torchpod on the node itself. A job that holds no GPU hides the node's: a batch system
    without a device cgroup (LSF by default) leaves every GPU of the host reachable."""
    env = [*env_pairs(spec), *([] if spec.gpus_per_node else ["CUDA_VISIBLE_DEVICES="])]
    return (["env", *env] if env else []) + torchpod_argv(spec)


def container_command(spec: JobSpec, forward: tuple[str, ...]) -> list:
    """The argv that runs torchpod on one node under ``spec.runtime``, after ``env`` with the
    job's --env pairs: each pair one argv word, whatever it holds (Apptainer passes the
    environment through; enroot, podman and docker are handed the names)."""
    command = RUNTIMES[spec.runtime].command(spec, forward)
    return ["env", *spec.env, *command] if spec.env else command


@dataclass(frozen=True)
class Runtime:
    """One container runtime of the HPC scripts: how the job fetches the image once, and
    the argv that runs torchpod in it on one node."""

    name: str
    prepare: Callable[..., list]  # (spec, per_node argv prefix) -> lines run once per job
    command: Callable[..., list]  # (spec, the scheduler's variables to forward) -> argv
    pyxis: bool = False  # under Slurm, srun runs the image itself (pyxis' --container-image)


# One record per jobs.RUNTIMES name, in its order (a unit test holds the two to each other).
RUNTIMES: dict[str, Runtime] = {r.name: r for r in (
    Runtime("apptainer", _sif, _apptainer),
    Runtime("enroot", _sqsh, _enroot, pyxis=True),
    Runtime("podman", _podman_pull, _podman),
    Runtime("docker", _docker_pull, _docker),
    Runtime("none", lambda spec, per_node: [], bare),  # the nodes' own environment has torchpod
)}
DEFAULT_RUNTIME = jobs.DEFAULT_RUNTIME
