"""What a batch system and a site ask of a job, each in its grammar: the wall time, the
queue, the site's own fields, the requeue lead, the container runtime and what it binds in
(--site-lib, --volume host paths). Pure; each step raises one InputError naming the flag.
"""

from __future__ import annotations

from dataclasses import replace

from torchpod.contract import SITE_LIB
from torchpod.errors import InputError

from .. import grammars
from . import jobs, sitegrammar
from .jobspec import REQUEUE_KINDS, RUNTIMES, JobSpec

# --requeue-lead: "due to the resolution of event handling by Slurm, the signal may be sent
# up to 60 seconds earlier than specified" (sbatch(1), Slurm 22.05).
SIGNAL_EARLY = 60
HOST_PATH_CHARS = grammars.BIND_PATH_CHARS



def walltime_in_hours(spec: JobSpec) -> JobSpec:
    """D-HH:MM:SS as hours (HH:MM:SS), which every batch system takes; an hour of the day of
    24 or more, or any other form, is left for the walltime check to refuse."""
    days = grammars.WALLTIME_DAYS.fullmatch(spec.walltime) if isinstance(spec.walltime, str) else None
    if not days or int(days.group(2)) >= 24:
        return spec
    hours = int(days.group(1)) * 24 + int(days.group(2))
    return replace(spec, walltime=f"{hours:02d}:{days.group(3)}:{days.group(4)}")


def check_walltime(spec: JobSpec) -> JobSpec:
    """--walltime HH:MM:SS, more than zero (walltime_in_hours has turned D-HH:MM:SS into hours)."""
    if (not isinstance(spec.walltime, str) or not grammars.WALLTIME.fullmatch(spec.walltime)
            or set(spec.walltime) <= {"0", ":"}):
        raise InputError(f"--walltime={spec.walltime!r}; expected HH:MM:SS or D-HH:MM:SS with hours of a day below "
                         "24, minutes and seconds below 60 and more than zero in all, e.g. 01:30:00 or 2-00:00:00")
    return spec


def check_queue(spec: JobSpec) -> JobSpec:
    """--queue in its kind's grammar (sitegrammar.queues)."""
    if spec.queue:
        sitegrammar.queues(spec.queue, jobs.kind(spec.scheduler))
    return spec


def check_site_lib(spec: JobSpec) -> JobSpec:
    """--site-lib an absolute host path a container runtime can bind."""
    if spec.site_lib and (not isinstance(spec.site_lib, str) or not grammars.BIND_PATH.fullmatch(spec.site_lib)
                          or len(spec.site_lib) > grammars.BIND_PATH_MAX):
        raise InputError(f"--site-lib={spec.site_lib!r}; expected an absolute host path of {HOST_PATH_CHARS} "
                         "(no ',' or ':', which split a bind, and no spaces, quotes, '$', ';' or control "
                         "characters)")
    return spec


def check_site_fields(spec: JobSpec) -> JobSpec:
    """--account, --qos, --constraint, --reservation, --exclude, --switches, --directive and
    --gpu-model in their grammars (sitegrammar)."""
    sitegrammar.check_site_fields(spec)
    sitegrammar.check_gpu_model(spec, jobs.kind(spec.scheduler))
    return spec


def check_requeue(spec: JobSpec) -> JobSpec:
    """--requeue-lead: Slurm's alone (sbatch --signal and --requeue; no other kind carries
    it), and short enough that the job works before it is signalled: the signal may come
    SIGNAL_EARLY s before the lead, and a job signalled as it starts would requeue for ever."""
    if not spec.requeue_lead:
        return spec
    if spec.scheduler not in REQUEUE_KINDS:
        raise InputError(f"--requeue-lead={spec.requeue_lead} is for --scheduler {jobs.choices(REQUEUE_KINDS)} "
                         f"(sbatch --signal and --requeue); a {spec.scheduler} job cannot carry it: leave it out")
    hours, minutes, seconds = (int(part) for part in spec.walltime.split(":"))
    total = hours * 3600 + minutes * 60 + seconds
    if spec.requeue_lead + SIGNAL_EARLY >= total:
        fix = (f"a lead below {total - SIGNAL_EARLY} s, or a longer --walltime" if total - SIGNAL_EARLY > 1
               else f"a --walltime longer than {spec.requeue_lead + SIGNAL_EARLY} s")
        raise InputError(f"--requeue-lead={spec.requeue_lead} with --walltime={spec.walltime} ({total} s): Slurm may "
                         f"signal up to {SIGNAL_EARLY} s before the lead, so the job could be signalled as it "
                         f"starts and requeue for ever; expected {fix}")
    return spec


def check_runtime(spec: JobSpec) -> JobSpec:
    """--runtime known and one the kind can run, filled in when left out: the kind's first,
    else apptainer (jobs.DEFAULT_RUNTIME) for an HPC job and none for Kubernetes."""
    allowed = jobs.kind(spec.scheduler).runtimes  # (): every runtime (jobs.JobKind)
    runtime = spec.runtime or (allowed[0] if allowed else jobs.DEFAULT_RUNTIME if not spec.kube else "none")
    if runtime not in RUNTIMES:
        raise InputError(f"--runtime={spec.runtime!r} is unknown; expected one of {', '.join(RUNTIMES)}")
    if allowed and runtime not in allowed:
        raise InputError(f"--runtime={runtime} with --scheduler {spec.scheduler}, which runs the image itself; "
                         f"expected {jobs.choices(allowed)}: leave --runtime out")
    if spec.kube and runtime != "none":
        raise InputError(f"--runtime={runtime} is for HPC job scripts; Kubernetes runs the image itself: leave it out")
    return replace(spec, runtime=runtime)


def check_binds(spec: JobSpec) -> JobSpec:
    """What a container runtime binds in (--volume host paths, --site-lib), only where there is
    a container, and --site-lib exactly where the preset's fabric needs a site plugin."""
    runtime = spec.runtime
    if spec.volume and not spec.kube and runtime == "none":
        raise InputError(f"--volume {spec.volume[0]} with --runtime none: a host path is bound into a container, "
                         "and this job runs in the nodes' own environment, which sees the host's paths as they "
                         "are; expected it left out, or a container runtime")
    if spec.site_lib and runtime == "none":
        raise InputError(f"--site-lib={spec.site_lib} with --runtime none: it is bound into a container, and this "
                         "job runs in the nodes' own environment, where torchpod looks for the plugin itself; "
                         "expected it left out, or a container runtime")
    if spec.site_lib and spec.fabric != "slingshot":
        raise InputError(f"--site-lib is for Slingshot presets; preset {spec.preset or '(none)'} needs no site plugin "
                         "directory (EFA binds the EFA installer's /opt/amazon)")
    if spec.fabric == "slingshot" and runtime != "none" and not spec.site_lib:
        raise InputError(f"--preset {spec.preset} (Slingshot) with --runtime {runtime} needs --site-lib HOSTDIR: the "
                         "host directory with the site's aws-ofi-nccl build (libnccl-net.so), bound at " + SITE_LIB)
    if spec.fabric == "slingshot" and spec.kube:
        raise InputError(f"--preset {spec.preset} is a Slingshot HPC shape; "
                         "expected --scheduler slurm, pbs or pbs-pals")
    return spec
