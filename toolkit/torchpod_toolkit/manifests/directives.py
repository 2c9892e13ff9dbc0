"""The directive lines at the top of a batch script (``#SBATCH``, ``#PBS``, ``#BSUB``): the
job's name, its nodes, their CPUs, memory and GPUs, its time limit, queue and account, each
from a value spec.check held to its grammar, then the user's own ``--directive`` lines,
refused where one would fight a line the script already writes (``passthrough``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchpod.errors import InputError

from . import jobs, resources, sitegrammar
from .shellwords import job_name

if TYPE_CHECKING:  # the writers take a checked spec; spec.py imports no writer
    from .spec import JobSpec


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


def slurm(spec: JobSpec) -> list[str]:
    lines = [f"#SBATCH --job-name={job_name(spec)}",
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



def pbs(spec: JobSpec) -> list[str]:
    """The ``#PBS`` lines: one chunk per node of ``mpiprocs=1`` (one PBS_NODEFILE line per
    node), scattered over whole hosts, then the user's own."""
    # ncpus and mem per chunk (one chunk per node): OpenPBS's cgroups hook confines the job to
    # them (src/hooks/cgroups/pbs_cgroups.PY: a cpuset of ncpus CPUs, a memory limit of mem);
    # PBS has no "the whole node" in a select, so the default is sized (resources.per_node)
    node = spec.per_node
    chunk = (f"select={spec.nodes}:ncpus={int(node.cpus)}:mem={resources.pbs_size(node.memory_mi)}:mpiprocs=1"
             + (f":ngpus={spec.gpus_per_node}" if spec.gpus_per_node else ""))
    lines = [f"#PBS -N {job_name(spec)}",
             f"#PBS -l {chunk}",
             "#PBS -l place=scatter:excl",
             f"#PBS -l walltime={spec.walltime}"]
    if spec.queue:
        lines.append(f"#PBS -q {spec.queue}")
    if spec.account:
        lines.append(f"#PBS -A {spec.account}")
    lines.append("#PBS -j oe")
    return lines + passthrough(spec, "#PBS", lines, {}, PBS_OWN_RESOURCES)


def lsf(spec: JobSpec) -> list[str]:
    """The ``#BSUB`` lines: ``-n NODES -R "span[ptile=1]"`` asks for one slot on each of NODES
    hosts; ``-gpu "num=N:j_exclusive=yes"`` is per host, and keeps other jobs off the job's
    GPUs (LSF 10.1.0.5+ GPU syntax: bsub -gpu, j_exclusive defaults to no); then the user's own."""
    lines = [f"#BSUB -J {job_name(spec)}",
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
    lines.append(f"#BSUB -o {job_name(spec)}-%J.out")
    return lines + passthrough(spec, "#BSUB", lines, {})
