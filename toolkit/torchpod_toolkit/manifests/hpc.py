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

The container runtime's part of each script (fetching the image once, the argv that runs
torchpod in it) is ``runtimes``; the directive lines at the top of each script are
``directives``; every word is quoted by construction (``shellwords``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import directives, jobs, resources, yamltext
from .runtimes import NVIDIA_ENV, RUNTIMES, bare, binds, container_command, env_pairs, forwarded, prepare, torchpod_argv
from .shellwords import SHELLCHECK, WORKDIR, Cat, Sh, job_name, line

if TYPE_CHECKING:  # the renderers take a checked spec; spec.py imports no renderer
    from .spec import JobSpec

# pbsdsh runs a program with its arguments, not a shell line (openpbs cd7ab5e, src/cmds/
# pbsdsh.c: tm_spawn of argv, with the MoM's environment, not the job script's), and returns
# 0 whatever its tasks did. Its tasks start in $HOME with the MoM's PATH, so this fixed bash
# program changes to the directory the job script expanded ($1), takes the script's PATH
# ($2), runs the rest of its arguments as they are, and writes its exit status into the
# status directory ($3) under its node number, for the job script to check.
PBSDSH_TASK = ('cd "$1" && export PATH="$2" && status="$3" && shift 3 && '
               '{ "$@"; rc=$?; echo "$rc" > "$status/node-$PBS_NODENUM"; exit "$rc"; }')
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



def _slurm_launch(spec: JobSpec, step: list) -> list[str]:
    """The comment and the command line that start one launcher per node."""
    if RUNTIMES[spec.runtime].pyxis:
        # pyxis: --container-mounts=SRC:DST[:FLAGS][,...] (NVIDIA/pyxis README)
        mounts: list = []
        for b in binds(spec):
            mounts += [",", b] if mounts else [b]
        # --no-container-entrypoint (pyxis >= 0.10.0): a site whose plugstack enables
        # execute_entrypoint would otherwise run pyxis's own probe through torchpod
        run = [*step, Cat("--container-image=", Sh('"$SQSH"')), Cat("--container-mounts=", *mounts),
               f"--container-workdir={WORKDIR}", "--no-container-entrypoint"]
        if spec.preset:
            run.append("--export=ALL," + ",".join(env_pairs(spec)))
        gpus = []
        if spec.gpus_per_node:  # read by enroot's GPU hook from the task's environment (NVIDIA_ENV)
            gpus = ["# enroot's GPU hook exposes nothing unless told to: the job's device cgroup and",
                    "# CUDA_VISIBLE_DEVICES then keep the job to its own GPUs",
                    "export " + " ".join(NVIDIA_ENV)]
        return [*gpus, "# one launcher per node, through pyxis; pyxis does not run the image's ENTRYPOINT,",
                "# so torchpod is named", line([*run, *(["env", *spec.env] if spec.env else []), *torchpod_argv(spec)])]
    return ["# one launcher per node (torchpod starts the node's GPU processes itself)",
            line([*step, *container_command(spec, forwarded(spec))])]


def slurm_script(spec: JobSpec, header: list[str]) -> str:
    lines = ["#!/bin/bash", SHELLCHECK, *directives.slurm(spec), *header, "set -euo pipefail", ""]
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
    lines = ["#!/bin/bash", SHELLCHECK, *directives.pbs(spec), *header, "set -euo pipefail",
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



def lsf_script(spec: JobSpec, header: list[str]) -> str:
    """bsub script: its directives (directives.lsf) ask for one slot on each of NODES hosts,
    so LSB_DJOB_HOSTFILE lists every host once, and ``blaunch -u "$LSB_DJOB_HOSTFILE"``
    starts one task on each host listed there (IBM LSF 10.1, blaunch(8): -u host_file runs
    the task on every host in the file). ``-no-shell`` (blaunch(8): no intermediate shell)
    hands each word over as an argument instead of a command line a remote shell re-parses;
    the fixed bash program BLAUNCH_CD_EXEC changes to the submit directory this script
    expanded, since blaunch names no working directory for its tasks."""
    lines = ["#!/bin/bash", SHELLCHECK, *directives.lsf(spec), *header, "set -euo pipefail", ""]
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
    task: dict = {"name": job_name(spec), "num_nodes": spec.nodes, "resources": asked, "workdir": "."}
    if spec.env:  # SkyPilot sets them for `run` (task envs)
        task["envs"] = dict(item.partition("=")[::2] for item in spec.env)
    return {**task,
            "run": line(bare(spec, ()))}


def skypilot_file(spec: JobSpec, header: list[str]) -> str:
    """The task YAML: the header's comments, then the object in the rendered files' YAML."""
    return "\n".join(header) + "\n" + yamltext.dump([skypilot_task(spec)])
