"""torchpod_toolkit.manifests.sitegrammar: --name, --queue and --gpu-model in each batch
system's own grammar, written into its directives as the system reads them; anything else
is one line naming the option, the value and the form."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs, sitegrammar
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE

BATCH = ("slurm", "pbs", "pbs-pals", "lsf")


def script(scheduler: str, **fields) -> str:
    return render(JobSpec(scheduler, 2, IMAGE, ("train.py",), runtime="none", **fields))[0].text


# --- names -----------------------------------------------------------------------------------

@pytest.mark.parametrize("scheduler, directive", [("slurm", "#SBATCH --job-name=My_Job.v2"),
                                                   ("pbs", "#PBS -N My_Job.v2"), ("pbs-pals", "#PBS -N My_Job.v2"),
                                                   ("lsf", "#BSUB -J My_Job.v2")])
def test_a_batch_job_takes_its_systems_own_name(scheduler, directive):
    """`My_Job.v2` is a name Slurm, PBS and LSF all take (no DNS label): it names the job and
    its files."""
    outputs = render(JobSpec(scheduler, 2, IMAGE, ("train.py",), runtime="none", name="My_Job.v2"))
    assert directive in outputs[0].text.splitlines()
    assert outputs[0].name.startswith("My_Job.v2.")


@pytest.mark.parametrize("scheduler", ["kubeflow", "jobset", "volcano", "skypilot"])
def test_a_kubernetes_or_skypilot_job_keeps_the_dns_label(scheduler):
    with pytest.raises(InputError, match=r"^--name='My_Job'; expected a DNS label starting with a letter"):
        check(JobSpec(scheduler, 2, IMAGE, ("train.py",), name="My_Job"))


@pytest.mark.parametrize("scheduler", BATCH)
@pytest.mark.parametrize("name", ["job[1-10]", "job%2", "a b", "-x", ".hidden", "x/y", "x;id", "x\n#SBATCH -A y",
                                  "job$HOME", "a" * 201, "", "ünï"])
def test_a_name_outside_the_batch_systems_grammar_is_one_line(scheduler, name):
    """'[...]' would make an LSF job array and '%' its slot limit; a space, ';', '$' or a
    newline would change the directive line; '-' or '.' first would make an option or a
    hidden file of the job's files."""
    with pytest.raises(InputError) as err:
        check(JobSpec(scheduler, 2, IMAGE, ("train.py",), name=name, runtime="none"))
    assert str(err.value).startswith("--name=") and "\n" not in str(err.value)
    assert f"a {scheduler} job's name" in str(err.value)


def test_a_plus_is_slurms_and_pbss_but_not_lsfs():
    assert "#SBATCH --job-name=a+b" in script("slurm", name="a+b")
    assert "#PBS -N a+b" in script("pbs", name="a+b")
    with pytest.raises(InputError, match="^--name='a\\+b'"):
        check(JobSpec("lsf", 2, IMAGE, ("train.py",), name="a+b", runtime="none"))


@given(name=st.text(max_size=40))
def test_any_name_is_taken_only_in_its_grammar(name):
    for scheduler in BATCH:
        kind = jobs.kind(scheduler)
        try:
            check(JobSpec(scheduler, 2, IMAGE, ("train.py",), name=name, runtime="none"))
        except InputError as exc:
            assert not sitegrammar.job_name_ok(name, kind) and str(exc).startswith("--name=")
        else:
            assert sitegrammar.job_name_ok(name, kind) and name.isascii() and " " not in name


# --- queues ----------------------------------------------------------------------------------

def test_slurm_takes_several_partitions_and_lsf_several_queues_as_each_writes_them():
    """sbatch(1) --partition: "a comma separated list", the one offering earliest initiation
    used; bsub -q "q1 q2": the first queue listed that accepts the job (LSF 10.1)."""
    assert "#SBATCH --partition=gpu,gpu2" in script("slurm", queue="gpu,gpu2")
    assert '#BSUB -q "gpu gpu2"' in script("lsf", queue="gpu,gpu2")
    assert "#BSUB -q gpu" in script("lsf", queue="gpu")


@pytest.mark.parametrize("scheduler", ["pbs", "pbs-pals", "volcano"])
def test_a_queue_list_is_refused_where_a_job_goes_to_one_queue(scheduler):
    """qsub -q takes one destination, queue[@server] (OpenPBS qsub.1B); a Volcano job one queue."""
    with pytest.raises(InputError, match=r"^--queue='gpu,gpu2'; expected a queue or partition name"):
        check(JobSpec(scheduler, 2, IMAGE, ("train.py",), queue="gpu,gpu2"))


@pytest.mark.parametrize("queue", ["gpu,", ",gpu", "gpu,,b", "gpu, b", "gpu b", "gpu,gpu", "a;b", "q\n#x",
                                   ",".join(f"q{i}" for i in range(17)), "g" * 64])
@pytest.mark.parametrize("scheduler", ["slurm", "lsf"])
def test_a_bad_queue_list_is_one_line(scheduler, queue):
    with pytest.raises(InputError) as err:
        check(JobSpec(scheduler, 2, IMAGE, ("train.py",), queue=queue, runtime="none"))
    assert str(err.value).startswith("--queue=") and "\n" not in str(err.value)


# --- GPU models ------------------------------------------------------------------------------

def test_a_gpu_model_reaches_each_systems_gpu_request():
    assert "#SBATCH --gpus-per-node=h100:8" in script("slurm", gpus_per_node=8, gpu_model="h100")
    assert '#BSUB -gpu "num=8:gmodel=NVIDIAH100-80G:j_exclusive=yes"' in script(
        "lsf", gpus_per_node=8, gpu_model="NVIDIAH100-80G")
    sky = render(JobSpec("skypilot", 2, IMAGE, ("train.py",), gpus_per_node=8, gpu_model="A100-80GB"))[0].text
    assert "accelerators: A100-80GB:8" in sky
    assert "#SBATCH --gpus-per-node=8" in script("slurm", gpus_per_node=8)  # no model: any GPU


@pytest.mark.parametrize("scheduler", ["pbs", "kubeflow", "jobset"])
def test_a_kind_with_no_gpu_model_refuses_one(scheduler):
    """PBS has no built-in GPU-model resource (a site defines its own, OpenPBS
    master_resc_def_all.xml); a Kubernetes pod picks its GPUs by node label (--node-selector)."""
    with pytest.raises(InputError, match=r"^--gpu-model"):
        check(JobSpec(scheduler, 2, IMAGE, ("train.py",), gpu_model="h100"))


@pytest.mark.parametrize("model", ["h100:8", "a,b", "h 100", "-h100", "x" * 65, "h100\n", "$X"])
def test_a_gpu_model_outside_the_grammar_is_one_line(model):
    with pytest.raises(InputError, match=r"^--gpu-model=") as err:
        check(JobSpec("slurm", 2, IMAGE, ("train.py",), gpu_model=model))
    assert "\n" not in str(err.value)


def test_a_gpu_model_without_gpus_is_one_line():
    with pytest.raises(InputError, match=r"^--gpu-model=h100 with --gpus-per-node 0"):
        check(JobSpec("slurm", 2, IMAGE, ("train.py",), gpu_model="h100", gpus_per_node=0))


# --- switches ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1", "2@30", "1@00:30:00", "1@10:00", "1@2-12", "4@1-00:30", "1@1-00:00:30"])
def test_slurm_takes_the_most_switches_and_the_wait(value):
    assert f"#SBATCH --switches={value}" in script("slurm", switches=value)


@pytest.mark.parametrize("value", ["0", "-1", "1@", "@10", "1@10:60", "1@x", "1 @10", "1@10\n#SBATCH -A x", "1,2"])
def test_anything_else_as_switches_is_one_line(value):
    with pytest.raises(InputError, match=r"^--switches=") as err:
        check(JobSpec("slurm", 2, IMAGE, ("train.py",), switches=value))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("scheduler", ["pbs", "lsf", "jobset"])
def test_switches_are_slurms_alone(scheduler):
    with pytest.raises(InputError, match=r"--switches"):
        check(JobSpec(scheduler, 2, IMAGE, ("train.py",), switches="1"))
