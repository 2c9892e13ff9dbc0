"""torchpod_toolkit.manifests.hpc: every Slurm/PBS/LSF job script starts one launcher per node,
fetches the image once, binds the site's net plugin where the launcher looks, and passes
every variable family the launcher reads into the container; a SkyPilot task runs the image
on every node with one quoted `run` line (SkyPilot's own schema judges it in the integration tier)."""

from __future__ import annotations

import shlex

import pytest
import yaml

from torchpod.contract import SCHEDULER_VARS, SETTINGS
from torchpod_toolkit.manifests import hpc
from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE, SITE_LIB_HOST, SPECS, spec_id


@pytest.mark.parametrize("spec", [s for s in SPECS if not s.kube], ids=spec_id)
def test_hpc_script_starts_one_launcher_per_node(spec):
    (out,) = render_mod.render(spec)
    text = out.text
    if spec.scheduler == "skypilot":  # SkyPilot starts `run` once on every node itself
        task = yaml.safe_load(text)
        assert task["num_nodes"] == spec.nodes and task["run"].startswith("torchpod run ")
        assert "\n" not in task["run"] and "torchrun" not in text
        return
    # torchpod named (no container, pyxis), or the image's ENTRYPOINT given `run --` (docker,
    # podman, enroot start: the imported image's /etc/rc execs the ENTRYPOINT)
    launch = [ln for ln in text.splitlines() if "torchpod run" in ln or " run -- " in ln]
    assert len(launch) == 1, text  # exactly one launch line, and it fans out per node
    line = launch[0]
    if spec.scheduler == "slurm":
        assert line.startswith("srun --ntasks-per-node=1") and "#SBATCH --ntasks-per-node=1" in text
    elif spec.scheduler == "lsf":
        assert line.startswith('blaunch -u "$LSB_DJOB_HOSTFILE" -no-shell ') and '#BSUB -R "span[ptile=1]' in text
        assert "LSB_DJOB_HOSTFILE:" in line or spec.runtime == "none"  # the host file reaches the container
    elif spec.scheduler == "pbs-pals":
        assert line.startswith('mpiexec -n "$NNODES" --ppn 1') and ":mpiprocs=1" in text
    else:
        assert line.startswith("pbsdsh -- ") and ":mpiprocs=1" in text
        assert "PBS_NODEFILE" in line or spec.runtime == "none"  # the nodefile reaches the container
    assert "torchrun" not in text  # the launcher, not a hand-written torchrun
    if spec.runtime in ("apptainer", "enroot"):
        assert text.count(" pull ") + text.count("enroot import") == 1  # fetched once per job


@pytest.mark.parametrize("runtime, form", [("apptainer", "--bind {h}:{c}:ro"), ("podman", "-v {h}:{c}:ro"),
                                           ("docker", "-v {h}:{c}:ro"), ("enroot", "{h}:{c}:ro")])
def test_hpc_scripts_bind_the_sites_plugin_where_the_launcher_looks(runtime, form):
    spec = check(JobSpec("slurm", 2, IMAGE, ("t.py",), runtime=runtime, preset="hpe-slingshot-gh200",
                         gpus_per_node=4, site_lib=SITE_LIB_HOST))
    (out,) = render_mod.render(spec)
    binds = spec.fabric_binds()
    assert {c for _, c in binds} >= {"/opt/torchpod/site/lib", "/opt/torchpod/site/deps/libcxi.so.1"}
    for host, inside in binds:
        assert form.format(h=host, c=inside) in out.text, out.text
    assert "Net plugin: bound in from the host" in out.text


# (under Slurm, enroot runs through pyxis, which passes the task's environment through)
@pytest.mark.parametrize("scheduler, runtime, flag", [
    (s, r, f) for s in ("slurm", "pbs", "pbs-pals", "lsf") for r, f in (("podman", "--env"), ("docker", "-e"),
                                                                         ("enroot", "--env"))
    if (s, r) != ("slurm", "enroot")])
def test_runtimes_that_clear_the_environment_are_handed_every_variable_the_launcher_reads(scheduler, runtime, flag):
    """The names come from the contract the detector checks itself against, and every
    TORCHPOD_* setting with them, each by name: never a pattern, never a hand list."""
    family = {"pbs-pals": "pbs"}.get(scheduler, scheduler)
    (out,) = render_mod.render(JobSpec(scheduler, 2, IMAGE, ("t.py",), runtime=runtime, gpus_per_node=4))
    words = shlex.split(out.text.rstrip().splitlines()[-1] if scheduler != "pbs" else
                        next(ln for ln in out.text.splitlines() if ln.startswith("pbsdsh") and " run " in ln))
    handed = {words[i + 1] for i, w in enumerate(words[:-1]) if w == flag}
    wanted = set(SCHEDULER_VARS[family]) | {s.name for s in SETTINGS}
    assert wanted <= handed, sorted(wanted - handed)
    assert not {h for h in handed if "*" in h}, handed
    others = {n for f, names in SCHEDULER_VARS.items() if f != family for n in names}
    assert not handed & others, sorted(handed & others)


@pytest.mark.parametrize("runtime", ["apptainer", "enroot", "podman", "docker", "none"])
def test_requeue_lead_asks_for_the_signal_and_requeue_and_runs_the_step_in_the_background(runtime):
    """--requeue-lead N: sbatch --signal=B:USR1@N, --requeue and --open-mode=append; the trap is
    set before anything else runs (an unhandled USR1 would end the batch shell), the one launch
    line ends in '&', and the script requeues only after waiting for the step."""
    (out,) = render_mod.render(JobSpec("slurm", 2, IMAGE, ("t.py",), runtime=runtime, walltime="02:00:00",
                                       requeue_lead="600"))
    lines = out.text.splitlines()
    directives = [ln for ln in lines if ln.startswith("#SBATCH ")]
    assert directives[-4:] == ["#SBATCH --signal=B:USR1@600", "#SBATCH --requeue", "#SBATCH --open-mode=append",
                               "#SBATCH --output=%x-%j.out"]
    trap = lines.index("trap on_usr1 USR1")
    assert trap < min(i for i, ln in enumerate(lines) if ln.startswith(("srun", "[ -f", "SIF=", "SQSH=", "podman")))
    (launch,) = [i for i, ln in enumerate(lines) if ln.startswith("srun") and ln.endswith(" &")]
    assert " torchpod run -- t.py &" in lines[launch] or " run -- t.py &" in lines[launch]
    before = lines.index(next(ln for ln in lines if ln.startswith('[ "$usr1" = 0 ] || requeue_job')))
    assert before < launch and all(ln.startswith(("#", "export NVIDIA_")) for ln in lines[before + 1:launch]), \
        lines[before:launch]
    assert lines[launch + 1:] == list(hpc.SLURM_REQUEUE_WAIT)
    assert '  exec scontrol requeue "$SLURM_JOB_ID"' in lines  # in requeue_job, after the wait


# --- LSF ------------------------------------------------------------------------------
@pytest.mark.parametrize("walltime, form", [("01:00:00", "1:00"), ("00:00:30", "0:01"), ("12:59:59", "13:00"),
                                            ("100:05:00", "100:05")])
def test_lsf_wall_time_is_hours_and_minutes_rounded_up(walltime, form):
    (out,) = render_mod.render(JobSpec("lsf", 2, IMAGE, ("t.py",), walltime=walltime))
    assert f"\n#BSUB -W {form}\n" in out.text


def test_lsf_asks_one_slot_per_host_and_gpus_per_host():
    (out,) = render_mod.render(JobSpec("lsf", 3, IMAGE, ("t.py",), gpus_per_node=4, queue="gpu_q"))
    assert '#BSUB -n 3\n#BSUB -R "span[ptile=1]"\n#BSUB -x\n#BSUB -gpu "num=4:j_exclusive=yes"\n' in out.text
    assert "#BSUB -q gpu_q\n" in out.text and "# Submit: bsub < train.lsf.bsub" in out.text
    (cpu,) = render_mod.render(JobSpec("lsf", 3, IMAGE, ("t.py",), gpus_per_node=0))
    assert "#BSUB -gpu" not in cpu.text


def test_lsf_containers_get_the_host_file_the_launcher_reads():
    for runtime, bind in (("podman", '-v "$LSB_DJOB_HOSTFILE:$LSB_DJOB_HOSTFILE:ro"'),
                          ("docker", '-v "$LSB_DJOB_HOSTFILE:$LSB_DJOB_HOSTFILE:ro"'),
                          ("enroot", '--mount "$LSB_DJOB_HOSTFILE:$LSB_DJOB_HOSTFILE"')):
        (out,) = render_mod.render(JobSpec("lsf", 2, IMAGE, ("t.py",), runtime=runtime, gpus_per_node=4))
        assert bind in out.text, (runtime, out.text)


# --- SkyPilot ---------------------------------------------------------------------------
def _task(**change) -> dict:
    (out,) = render_mod.render(JobSpec(**{"scheduler": "skypilot", "nodes": 3, "image": IMAGE,
                                          "command": ("train.py", "--lr", "1e-3"), **change}))
    assert out.name.endswith(".skypilot.yaml")
    return yaml.safe_load(out.text)


def test_skypilot_task_runs_the_image_on_every_node():
    task = _task(gpus_per_node=4, preset="aws-p5")
    assert task == {"name": "train", "num_nodes": 3, "workdir": ".",
                    "resources": {"image_id": "docker:" + IMAGE, "cpus": "32+", "memory": "128+",
                                  "accelerators": "H100:4"},
                    "run": "env TORCHPOD_PRESET=aws-p5 torchpod run -- train.py --lr 1e-3"}
    assert "accelerators" not in _task(gpus_per_node=0)["resources"]


def test_skypilot_run_is_one_line_of_quoted_words():
    task = _task(command=("train.py", "a\nb", "$(id)", "it's"))
    assert task["run"] == "torchpod run -- train.py $'a\\nb' '$(id)' 'it'\"'\"'s'"
