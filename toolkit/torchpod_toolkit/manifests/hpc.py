"""Batch scripts for Slurm and PBS Pro that start exactly one launcher per node, inside the
site's container runtime, with the image pulled or converted once per job. Pure: returns
the script's text.

Why one launcher per node: `torchpod` (like torchrun) is a per-node agent that starts the
node's GPU processes itself. A script that runs it once, on the batch host only, leaves the
other nodes out of the rendezvous: the `RendezvousTimeoutError` of a PBS script that runs
torchrun on its first node only.

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

import hashlib
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from torchpod.contract import ENV_PRESET, SETTINGS
from torchpod.errors import InputError

from . import jobs, resources, sitegrammar, yamltext

if TYPE_CHECKING:  # the renderers take a checked spec; spec.py imports no renderer
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
WORKDIR = "/workspace"

# docker run as the user who submitted the job (numeric, as the batch shell knows them): the
# files the job writes in the submit directory stay theirs, and the container is not root.
USER_IDS = '"$(id -u):$(id -g)"'
# The only text a script holds unquoted: torchpod's own expansions, each a double-quoted
# variable the batch shell fills in. No user value is ever one of them.
# Each batch kind's job id and node file (its record) are among them.
EXPANSIONS = frozenset({'"$SIF"', '"$SQSH"', '"$RC"', '"$PART"', '"$NNODES"', '"$PBS_O_WORKDIR"', f'"$PWD:{WORKDIR}"',
                        '"$PWD"', '"$PATH"', '"$STATUS"', '"$LSB_DJOB_HOSTFILE"', USER_IDS,
                        *(f'"${k.job_id}"' for k in jobs.KINDS if k.job_id),
                        *(f'"${k.node_file}:${k.node_file}{ro}"' for k in jobs.KINDS if k.node_file
                          for ro in (":ro", ""))})
# pbsdsh runs a program with its arguments, not a shell line (openpbs cd7ab5e, src/cmds/
# pbsdsh.c: tm_spawn of argv, with the MoM's environment, not the job script's), and returns
# 0 whatever its tasks did. Its tasks start in $HOME with the MoM's PATH, so this fixed bash
# program changes to the directory the job script expanded ($1), takes the script's PATH
# ($2), runs the rest of its arguments as they are, and writes its exit status into the
# status directory ($3) under its node number, for the job script to check.
PBSDSH_TASK = ('cd "$1" && export PATH="$2" && status="$3" && shift 3 && '
               '{ "$@"; rc=$?; echo "$rc" > "$status/node-$PBS_NODENUM"; exit "$rc"; }')
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
# blaunch's tasks get the job's environment; they too start in no directory the job names.
BLAUNCH_CD_EXEC = 'cd "$1" && shift && exec "$@"'
# After pbsdsh: every node's task must have written 0. Fixed text.
PBSDSH_CHECK = (
    "# pbsdsh returns 0 whatever its tasks did (openpbs src/cmds/pbsdsh.c): their own statuses decide",
    "seen=0 failed=0",
    'for f in "$STATUS"/node-*; do',
    '  [ -f "$f" ] || continue',
    '  seen=$((seen + 1)); rc=""; read -r rc < "$f" || true; [ "$rc" = 0 ] || failed=$((failed + 1))',
    "done",
    'rm -r "$STATUS"',
    'if [ "$seen" != "$NNODES" ] || [ "$failed" != 0 ]; then',
    '  echo "torchpod: $failed of $NNODES nodes failed and $((NNODES - seen)) never reported (pbsdsh)" >&2',
    "  exit 1",
    "fi",
)
# Line 2 of every script (a directive right after the shebang covers the whole file):
# SC2016 warns of '$x' in single quotes and SC1003 of '\' (a word that is one backslash),
# which is exactly how shlex.quote hands such an argument to torchpod.
SHELLCHECK = "# shellcheck disable=SC2016,SC1003  # single-quoted words reach torchpod as written, on purpose"

_SAFE = re.compile(r"[A-Za-z0-9@%+=:,./_-]+", re.ASCII)  # shlex.quote's set: no quoting needed
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


class Sh(str):
    """A token the batch shell expands (``"$SIF"``): written as is, so only the fixed
    EXPANSIONS are allowed; anything else is a bug in this module, never user input."""

    def __new__(cls, text: str) -> "Sh":
        if text not in EXPANSIONS:
            raise ValueError(f"Sh({text!r}): only torchpod's own expansions {sorted(EXPANSIONS)} go unquoted")
        return super().__new__(cls, text)


class Cat(tuple):
    """One shell word joined, with no space, from literal text (quoted) and Sh expansions:
    ``Cat('--container-image=', Sh('"$SQSH"'))`` is ``--container-image="$SQSH"``."""

    def __new__(cls, *parts) -> "Cat":
        return super().__new__(cls, parts)


def quote(word: str, *, ascii_only: bool = False) -> str:
    r"""One shell word that bash reads back as exactly ``word``.

    Printable text gets shlex.quote. A word with a control character (a newline, CR, ...)
    gets bash's ANSI-C quoting, ``$'...'`` with ``\n``, ``\r``, ``\t``, ``\xNN`` (bash(1),
    QUOTING), so a value never starts a new line of the file. With ``ascii_only`` every
    character outside printable ASCII is escaped too (``\uNNNN``, ``\UNNNNNNNN``): the form
    of the Regenerate comment, which must not hold U+0085, U+2028 or U+2029 raw either.
    Scripts keep non-ASCII text raw (UTF-8 inside quotes, C1 controls included): bash passes
    those bytes through whatever the node's locale, where ``\u`` depends on it (bash 5.2
    under LC_ALL=C writes ``$'\u0085'`` back as the six characters)."""
    if _SAFE.fullmatch(word):
        return word
    plain = all(" " <= ch <= "~" or (not ascii_only and ch >= "\x80") for ch in word)
    if plain:
        return shlex.quote(word)
    out = []
    for ch in word:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F or (ascii_only and 0x80 <= code):
            out.append(f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def word(part) -> str:
    """A literal quoted, an Sh expansion as written, a Cat joined from its parts."""
    if isinstance(part, Sh):
        return str(part)
    if isinstance(part, Cat):
        return "".join(word(p) for p in part)
    return quote(part)


def line(argv) -> str:
    """One shell command line: every word quoted by construction."""
    return " ".join(word(a) for a in argv)


def _name(spec: JobSpec) -> str:
    """The job's name, written into directive lines and file names as is: spec.check held it
    to its kind's grammar (sitegrammar.check_job_name), whose characters need no quoting;
    re-checked so this module never depends on a caller having checked."""
    if not sitegrammar.job_name_ok(spec.name, jobs.kind(spec.scheduler)) or not _SAFE.fullmatch(spec.name):
        raise ValueError(f"job name {spec.name!r} reached hpc.py unchecked")
    return spec.name


def _torchpod(spec: JobSpec) -> list[str]:
    args = ["torchpod", "run"]
    if spec.rdzv == "etcd":
        args += ["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", spec.etcd_endpoint]
    options, words = spec.launch()
    return args + [*options, "--", *words]


def _env_pairs(spec: JobSpec) -> list[str]:
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
    return f"{_name(spec)}-{hashlib.sha256(spec.image.encode()).hexdigest()[:12]}.{suffix}"


# sbatch's short options and the long ones they stand for (sbatch(1), Slurm 22.05), so that a
# passed-through -t is known as the --time the script already sets
SBATCH_SHORT = {"-A": "--account", "-C": "--constraint", "-c": "--cpus-per-task", "-G": "--gpus", "-J": "--job-name",
                "-N": "--nodes", "-n": "--ntasks", "-o": "--output", "-e": "--error", "-p": "--partition",
                "-q": "--qos", "-t": "--time", "-w": "--nodelist", "-x": "--exclude", "-D": "--chdir"}
# the PBS resources torchpod's own `-l` lines set: another -l may add others (filesystems=...)
PBS_OWN_RESOURCES = ("select", "place", "walltime")


def _directive_name(word: str, short: dict[str, str]) -> str:
    """The option a directive's first word names: ``--time=1`` and ``-t`` are both --time."""
    name = word.split("=", 1)[0]
    if not name.startswith("--") and len(name) > 2 and name[:2] in short:
        name = name[:2]  # a short option glued to its value: -t60
    return short.get(name, name)


def passthrough(spec: JobSpec, prefix: str, written: list[str], short: dict[str, str],
                resources: tuple[str, ...] = ()) -> list[str]:
    """The user's --directive lines, each after ``prefix``, refused when it names an option
    the script already sets (``written``: its directive lines), where the two would fight
    over one setting. A batch system whose ``-l`` lists resources (``resources``: those
    the script sets) takes another ``-l`` for any other resource."""
    own = {_directive_name(line[len(prefix):].split()[0], short) for line in written
           if line.startswith(prefix + " ")}
    out = []
    for directive in spec.directive:
        words = directive.split()
        name = _directive_name(words[0], short)
        if resources and name == "-l" and len(words) > 1:
            listed = {item.split("=", 1)[0] for item in words[1].split(":")[0].split(",")}
            taken = sorted(listed & set(resources))
            if taken:
                raise InputError(f"--directive={directive!r} sets -l {taken[0]}, which this script sets itself "
                                 "(--nodes, --walltime); expected a resource torchpod does not set, or its option")
        elif name in own:
            raise InputError(f"--directive={directive!r} sets {name}, which this script sets itself; expected the "
                             f"option torchpod has for it (see `invoke manifests --help`), or another directive")
        out.append(f"{prefix} {directive}")
    return out


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


def _binds(spec: JobSpec, *, flags: bool = True) -> list:
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
    for b in _binds(spec):
        out += ["--bind", b]
    out += ["--pwd", WORKDIR]
    for pair in _env_pairs(spec):
        out += ["--env", pair]
    return out + [Sh('"$SIF"'), *_torchpod(spec)]


def _enroot(spec: JobSpec, forward: tuple[str, ...]) -> list:
    """enroot start clears the environment (NVIDIA/enroot 8ea147d, bin/common.h clearenv):
    every variable torchpod reads is named, and for a job holding GPUs the hook's two and
    the job's GPU selection."""
    out: list = ["enroot", "start", "--rc", Sh('"$RC"')]
    for b in _binds(spec, flags=False):
        out += ["--mount", b]
    names = forward + (GPU_SELECTION if spec.gpus_per_node else ()) + _user_names(spec)
    for item in [*names, *(NVIDIA_ENV if spec.gpus_per_node else ()), *_env_pairs(spec)]:
        out += ["--env", item]
    # the rc script (ENROOT_RC) runs the words as they are: torchpod is named, whatever the ENTRYPOINT
    return out + [Sh('"$SQSH"'), *_torchpod(spec)]


def _engine_run(spec: JobSpec, out: list, forward: tuple[str, ...]) -> list:
    """The rest of a podman-hpc / docker run: host network and IPC, binds, torchpod as the
    entrypoint, the image."""
    out = out + ["--network", "host", "--ipc", "host"]
    for b in _binds(spec):
        out += ["-v", b]
    out += ["-w", WORKDIR]
    for pair in _env_pairs(spec):
        out += ["-e", pair]
    # --entrypoint: torchpod on the image's PATH, whatever the image's ENTRYPOINT
    return out + ["--entrypoint", "torchpod", spec.image, *_torchpod(spec)[1:]]


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


def _bare(spec: JobSpec, forward: tuple[str, ...]) -> list:
    """torchpod on the node itself. A job that holds no GPU hides the node's: a batch system
    without a device cgroup (LSF by default) leaves every GPU of the host reachable."""
    env = [*_env_pairs(spec), *([] if spec.gpus_per_node else ["CUDA_VISIBLE_DEVICES="])]
    return (["env", *env] if env else []) + _torchpod(spec)


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
    Runtime("none", lambda spec, per_node: [], _bare),  # the nodes' own environment has torchpod
)}
DEFAULT_RUNTIME = jobs.DEFAULT_RUNTIME


# --requeue-lead (spec.requeue_lead): `sbatch --signal=B:USR1@N` sends USR1 to the batch shell
# alone (sbatch(1); slurmstepd kill()s the batch shell's pid, not its process group: SchedMD/slurm
# slurm-22-05-9-1 src/slurmd/slurmstepd/req.c), so the script passes it on. bash runs a trap as
# soon as a signal ends the `wait` builtin, not while a foreground command runs (bash(1),
# SIGNALS), hence the step runs in the background; srun forwards USR1 to every task (srun(1),
# SIGNALS AND ESCAPE SEQUENCES; src/srun/libsrun/srun_job.c _srun_signal_mgr), torchpod to
# torchrun, and torchrun (--signals-to-handle, torch >= 2.10) to its workers. Once the step has
# ended, the script requeues its job with `scontrol requeue` (Lightning does the same from rank
# 0's handler: Lightning-AI/pytorch-lightning 03d34b2c, src/lightning/pytorch/trainer/connectors/
# signal_connector.py; here the batch shell does it, since scontrol is on the node, not in the
# image). It requeues whatever the step's status: torchrun exits 1 after any signal it handles
# (torch/distributed/elastic/agent/server/api.py re-raises SignalException), so a worker's own
# exit code never reaches this shell. --open-mode=append keeps the first run's output: a
# requeued job writes the same file, truncated by default (JobFileAppend=0, slurm.conf(5)).
# Fixed text: no user value is in it.
SLURM_REQUEUE = (
    "# Near its time limit Slurm sends USR1 to this shell alone (--signal=B:USR1): it goes on to the",
    "# training step (srun, torchpod, torchrun, the workers, which save a snapshot and stop); then the",
    "# job requeues itself, and the next run resumes from the snapshot.",
    "usr1=0",
    "# shellcheck disable=SC2317  # run by the trap below, which shellcheck does not follow",
    "on_usr1() {",
    "  usr1=$((usr1 + 1))",
    '  echo "torchpod: job $SLURM_JOB_ID got USR1 ahead of its time limit; passing it to the training step" >&2',
    "}",
    "trap on_usr1 USR1",
    "requeue_job() {",
    '  echo "torchpod: requeueing job $SLURM_JOB_ID; its next run resumes from the snapshot" >&2',
    '  exec scontrol requeue "$SLURM_JOB_ID"',
    "}",
)
# The trap only counts: the loop passes each USR1 on once the step's pid is known. A trapped
# signal ends `wait` at once; one that lands between two commands, just before `wait`, waits
# for the sleep, a second at most (a blocking `wait "$step"` would hold it until the step ends).
SLURM_REQUEUE_WAIT = (
    "step=$!",
    "# pass each USR1 on to the step: a trapped signal ends `wait` at once, the sleep within a second",
    "passed=0",
    'while kill -0 "$step" 2>/dev/null; do',
    '  while [ "$passed" -lt "$usr1" ]; do passed=$((passed + 1)); kill -USR1 "$step" 2>/dev/null || true; done',
    '  sleep 1 & wait "$!" || true',
    "done",
    "status=0",
    'wait "$step" || status=$?',
    '[ "$usr1" = 0 ] || requeue_job',
    'exit "$status"',
)


def _slurm_resources(spec: JobSpec) -> list[str]:
    """CPUs and memory. By default the whole node: ``--exclusive`` gives the job every CPU of
    its nodes, ``--mem=0`` all their memory (sbatch(1), --exclusive and --mem), and a step
    started without --exact gets all of the job's CPUs on each node (srun(1), --exact:
    "By default, all non-GRES resources on each node in the step allocation will be used";
    Slurm 22.05). Given --cpus-per-node, the task asks for them (--cpus-per-task, on srun
    too: srun does not inherit sbatch's, srun(1) -c) and the node may be shared."""
    node = spec.per_node
    if node.whole_node:
        lines = ["#SBATCH --exclusive"]
    else:
        lines = [f"#SBATCH --cpus-per-task={int(node.cpus)}"]
    memory = "0" if node.whole_node and not node.memory_given else resources.slurm_size(node.memory_mi)
    return lines + [f"#SBATCH --mem={memory}"]


def _slurm_directives(spec: JobSpec) -> list[str]:
    lines = [f"#SBATCH --job-name={_name(spec)}",
             f"#SBATCH --nodes={spec.nodes}",
             "#SBATCH --ntasks-per-node=1",
             *_slurm_resources(spec)]
    if spec.gpus_per_node:  # sbatch(1) --gpus-per-node=[type:]number
        model = f"{spec.gpu_model}:" if spec.gpu_model else ""
        lines.append(f"#SBATCH --gpus-per-node={model}{spec.gpus_per_node}")
    lines.append(f"#SBATCH --time={spec.walltime}")
    if spec.queue:
        lines.append(f"#SBATCH --partition={spec.queue}")
    # spec.check held each to its grammar
    for name in ("account", "qos", "constraint", "reservation", "exclude", "switches"):
        if getattr(spec, name):
            lines.append(f"#SBATCH --{name}={getattr(spec, name)}")
    if spec.requeue_lead:
        lead = int(spec.requeue_lead)  # spec.check made it a whole number; int() keeps any other text out
        lines += [f"#SBATCH --signal=B:USR1@{lead}", "#SBATCH --requeue", "#SBATCH --open-mode=append"]
    lines.append("#SBATCH --output=%x-%j.out")
    return lines + passthrough(spec, "#SBATCH", lines, SBATCH_SHORT)


def _slurm_launch(spec: JobSpec, step: list) -> list[str]:
    """The comment and the command line that start one launcher per node."""
    if RUNTIMES[spec.runtime].pyxis:
        # pyxis: --container-mounts=SRC:DST[:FLAGS][,...] (NVIDIA/pyxis README)
        mounts: list = []
        for b in _binds(spec):
            mounts += [",", b] if mounts else [b]
        # --no-container-entrypoint (pyxis >= 0.10.0): a site whose plugstack enables
        # execute_entrypoint would otherwise run pyxis's own probe through torchpod
        run = [*step, Cat("--container-image=", Sh('"$SQSH"')), Cat("--container-mounts=", *mounts),
               f"--container-workdir={WORKDIR}", "--no-container-entrypoint"]
        if spec.preset:
            run.append("--export=ALL," + ",".join(_env_pairs(spec)))
        gpus = []
        if spec.gpus_per_node:  # read by enroot's GPU hook from the task's environment (NVIDIA_ENV)
            gpus = ["# enroot's GPU hook exposes nothing unless told to: the job's device cgroup and",
                    "# CUDA_VISIBLE_DEVICES then keep the job to its own GPUs",
                    "export " + " ".join(NVIDIA_ENV)]
        return [*gpus, "# one launcher per node, through pyxis; pyxis does not run the image's ENTRYPOINT,",
                "# so torchpod is named", line([*run, *(["env", *spec.env] if spec.env else []), *_torchpod(spec)])]
    return ["# one launcher per node (torchpod starts the node's GPU processes itself)",
            line([*step, *container_command(spec, forwarded(spec))])]


def slurm_script(spec: JobSpec, header: list[str]) -> str:
    lines = ["#!/bin/bash", SHELLCHECK, *_slurm_directives(spec), *header, "set -euo pipefail", ""]
    if spec.requeue_lead:
        lines += [*SLURM_REQUEUE, ""]
    step = ["srun", "--ntasks-per-node=1", "--kill-on-bad-exit=1"]
    if not spec.per_node.whole_node:
        step.append(f"--cpus-per-task={int(spec.per_node.cpus)}")
    prep = prepare(spec, step, pyxis=True)
    if prep:
        lines += ["# the image, fetched or converted once for the whole job", *prep, ""]
    launch = _slurm_launch(spec, step)
    if spec.requeue_lead:
        # in the background, so that the trap runs while the step does (SLURM_REQUEUE)
        launch = ['[ "$usr1" = 0 ] || requeue_job  # USR1 came before the step started', *launch[:-1],
                  launch[-1] + " &", *SLURM_REQUEUE_WAIT]
    return "\n".join(lines + launch) + "\n"


def pbs_script(spec: JobSpec, header: list[str]) -> str:
    mpiexec = jobs.kind(spec.scheduler).mpiexec
    # ncpus and mem per chunk (one chunk per node): OpenPBS's cgroups hook confines the job to
    # them (src/hooks/cgroups/pbs_cgroups.PY: a cpuset of ncpus CPUs, a memory limit of mem);
    # PBS has no "the whole node" in a select, so the default is sized (resources.per_node)
    node = spec.per_node
    chunk = (f"select={spec.nodes}:ncpus={int(node.cpus)}:mem={resources.pbs_size(node.memory_mi)}:mpiprocs=1"
             + (f":ngpus={spec.gpus_per_node}" if spec.gpus_per_node else ""))
    lines = ["#!/bin/bash", SHELLCHECK,
             f"#PBS -N {_name(spec)}",
             f"#PBS -l {chunk}",
             "#PBS -l place=scatter:excl",
             f"#PBS -l walltime={spec.walltime}"]
    if spec.queue:
        lines.append(f"#PBS -q {spec.queue}")
    if spec.account:
        lines.append(f"#PBS -A {spec.account}")
    lines.append("#PBS -j oe")
    lines += [*passthrough(spec, "#PBS", lines, {}, PBS_OWN_RESOURCES), *header, "set -euo pipefail",
              'cd "$PBS_O_WORKDIR"', ""]
    cmd = container_command(spec, forwarded(spec))
    if mpiexec:
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
        # pbsdsh tasks start in $HOME with the MOM's environment, not this script's: this
        # script expands the directory, its PATH and the image paths, and every word reaches
        # the task as its own argument of a fixed bash program (PBSDSH_TASK), never re-parsed.
        lines += ['NNODES=$(sort -u "$PBS_NODEFILE" | wc -l)',
                  "# each node's exit status, on the submit directory every node sees",
                  'STATUS="$PBS_O_WORKDIR/.torchpod-status-$PBS_JOBID"',
                  'mkdir "$STATUS"',
                  "# mpiprocs=1: one PBS_NODEFILE line per node, so pbsdsh starts one launcher per node",
                  line([*fan, "/bin/bash", "-c", PBSDSH_TASK, "bash", Sh('"$PBS_O_WORKDIR"'), Sh('"$PATH"'),
                        Sh('"$STATUS"'), *cmd]),
                  *PBSDSH_CHECK]
    return "\n".join(lines) + "\n"


def _lsf_walltime(walltime: str) -> str:
    """bsub -W takes [hour:]minute (IBM LSF 10.1, bsub -W): HH:MM:SS with seconds rounded up."""
    hours, minutes, seconds = (int(part) for part in walltime.split(":"))
    minutes += 1 if seconds else 0
    return f"{hours + minutes // 60}:{minutes % 60:02d}"


def _lsf_resources(spec: JobSpec) -> list[str]:
    """The -R string and CPUs and memory. By default ``-x``: the job holds its hosts alone,
    and LSF binds its tasks to no CPU (IBM LSF 10.1, bsub -x; "By default, there is no
    processor binding"). Given --cpus-per-node, ``affinity[core(N)]`` binds each task (one
    per host) to N cores (IBM LSF 10.1, "Affinity resource requirement strings"); given or
    not exclusive, ``rusage[mem=SIZE]`` reserves the memory of the one slot on each host."""
    node = spec.per_node
    parts = ["span[ptile=1]"]
    if not node.whole_node:
        parts.append(f"affinity[core({int(node.cpus)})]")
    if node.memory_given or not node.whole_node:
        parts.append(f"rusage[mem={resources.lsf_size(node.memory_mi)}]")
    return [f'#BSUB -R "{" ".join(parts)}"', *(["#BSUB -x"] if node.whole_node else [])]


def lsf_script(spec: JobSpec, header: list[str]) -> str:
    """bsub script: ``-n NODES -R "span[ptile=1]"`` asks for one slot on each of NODES hosts,
    so LSB_DJOB_HOSTFILE lists every host once, and ``blaunch -u "$LSB_DJOB_HOSTFILE"``
    starts one task on each host listed there (IBM LSF 10.1, blaunch(8): -u host_file runs
    the task on every host in the file). ``-no-shell`` (blaunch(8): no intermediate shell)
    hands each word over as an argument instead of a command line a remote shell re-parses;
    the fixed bash program BLAUNCH_CD_EXEC changes to the submit directory this script
    expanded, since blaunch names no working directory for its tasks. ``-gpu "num=N:j_exclusive=yes"``
    is per host, and keeps other jobs off the job's GPUs (LSF 10.1.0.5+ GPU syntax: bsub -gpu,
    j_exclusive defaults to no)."""
    lines = ["#!/bin/bash", SHELLCHECK,
             f"#BSUB -J {_name(spec)}",
             f"#BSUB -n {spec.nodes}",
             *_lsf_resources(spec)]
    if spec.gpus_per_node:  # j_exclusive=yes: LSF's default (no) lets other jobs share the job's GPUs
        model = f":gmodel={spec.gpu_model}" if spec.gpu_model else ""
        lines.append(f'#BSUB -gpu "num={spec.gpus_per_node}{model}:j_exclusive=yes"')
    lines.append(f"#BSUB -W {_lsf_walltime(spec.walltime)}")
    if spec.queue:  # several: bsub -q "q1 q2", the first that takes the job (bsub -q, LSF 10.1)
        names = " ".join(sitegrammar.queues(spec.queue, jobs.kind(spec.scheduler)))
        lines.append(f'#BSUB -q "{names}"' if " " in names else f"#BSUB -q {names}")
    if spec.account:  # LSF charges a job to its project (bsub -P)
        lines.append(f"#BSUB -P {spec.account}")
    lines.append(f"#BSUB -o {_name(spec)}-%J.out")
    lines += [*passthrough(spec, "#BSUB", lines, {}), *header, "set -euo pipefail", ""]
    fan = ["blaunch", "-u", Sh('"$LSB_DJOB_HOSTFILE"'), "-no-shell"]
    prep = prepare(spec, fan)
    if prep:
        lines += ["# the image, fetched or converted once for the whole job", *prep, ""]
    lines += ["# span[ptile=1]: one LSB_DJOB_HOSTFILE line per host, so blaunch -u starts one launcher per host",
              line([*fan, "/bin/bash", "-c", BLAUNCH_CD_EXEC, "bash", Sh('"$PWD"'),
                    *container_command(spec, forwarded(spec))])]
    return "\n".join(lines) + "\n"


# SkyPilot asks for GPUs by type and count (resources.accelerators, "NAME:COUNT"); the job
# request names only a count, so the task asks for this type, which the header says to change.
SKYPILOT_GPU = "H100"


def skypilot_task(spec: JobSpec) -> dict:
    """The SkyPilot task (skypilot-org/skypilot 0.14.1, sky/utils/schemas.py get_task_schema):
    ``num_nodes``, ``resources`` with ``image_id: docker:IMAGE`` (SkyPilot starts the image
    with ``--entrypoint=/bin/bash --net=host`` and runs the task inside it:
    sky/provision/docker_utils.py) and ``accelerators``, ``workdir: .`` (synced to every
    node, where ``run`` starts), and ``run``, which SkyPilot starts once on every node with
    bash: one line of argv words, each quoted by construction."""
    node = spec.per_node  # at least this much: SkyPilot picks the instance ("N+", sky/resources.py)
    asked: dict = {"image_id": "docker:" + spec.image, "cpus": f"{int(node.cpus)}+",
                   "memory": resources.skypilot_gb(node.memory_mi)}
    if spec.gpus_per_node:
        asked["accelerators"] = f"{spec.gpu_model or SKYPILOT_GPU}:{spec.gpus_per_node}"
    task: dict = {"name": _name(spec), "num_nodes": spec.nodes, "resources": asked, "workdir": "."}
    if spec.env:  # SkyPilot sets them for `run` (task envs)
        task["envs"] = dict(item.partition("=")[::2] for item in spec.env)
    return {**task,
            "run": line(_bare(spec, ()))}


def skypilot_file(spec: JobSpec, header: list[str]) -> str:
    """The task YAML: the header's comments, then the object in the rendered files' YAML."""
    return "\n".join(header) + "\n" + yamltext.dump([skypilot_task(spec)])
