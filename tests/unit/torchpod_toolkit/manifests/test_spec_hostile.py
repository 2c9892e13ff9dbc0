"""torchpod_toolkit.manifests.spec against what --mnnvl (GB200 NVL72) cannot carry, and the
Trainer name budget: a scheduler, a size, GPUs or an image tag it cannot work with is one
line naming it before anything is rendered; any value given for the flag is a flag or one
line; any accepted --name makes names the API server takes."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.arch import ARCHES
from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs, names, placement, spec
from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests.admission import trainer_admitted
from torchpod_toolkit.manifests.spec import HPC, KUBE, MNNVL_KINDS, JobSpec

from manifest_cases import IMAGE

GB200 = dict(nodes=2, image=IMAGE, command=("train.py",), gpus_per_node=4, mnnvl=True)
# Kubernetes names (k8s.io/apimachinery pkg/util/validation): a DNS-1123 subdomain, a label.
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII)
LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", re.ASCII)


def _refused(**fields) -> str:
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec(**fields))
    message = str(err.value)
    assert message.isprintable(), repr(message)  # one line: repr escapes what would break it
    return message


@pytest.mark.parametrize("scheduler", HPC)
def test_an_hpc_job_refuses_mnnvl_naming_its_scheduler(scheduler):
    message = _refused(scheduler=scheduler, **GB200)
    assert message.startswith(f"--mnnvl with --scheduler {scheduler}: a ComputeDomain is a Kubernetes object")


@pytest.mark.parametrize("scheduler, needle", [
    ("trainer", "runtimePatches have no resourceClaims"),
    ("runai", "has no flag for a resource claim"),
])
def test_a_kubernetes_kind_whose_pods_cannot_claim_refuses_with_why(scheduler, needle):
    message = _refused(scheduler=scheduler, **GB200)
    assert message.startswith(f"--mnnvl with --scheduler {scheduler}: ") and needle in message


def test_every_kubernetes_kind_carries_mnnvl_or_says_why_not():
    assert set(MNNVL_KINDS) <= set(KUBE)
    assert set(KUBE) - set(MNNVL_KINDS) == set(placement.NO_CLAIM)
    assert set(spec.MNNVL_OPERATORS) == set(MNNVL_KINDS)


@pytest.mark.parametrize("change, needle", [
    (dict(gpus_per_node=0), "--mnnvl with --gpus-per-node 0"),
    (dict(image="registry.example.com/torchpod/pytorch:2.13.0-cuda13.0-x86_64"), "names the x86_64 build"),
    (dict(image="registry.example.com/torchpod/pytorch:2.13.0-cuda13.0-amd64"), "names the x86_64 build"),
    (dict(image="registry.example.com/torchpod/pytorch:2.13.0-cuda13.0-AMD64"), "names the x86_64 build"),
    (dict(image="registry.example.com/torchpod/pytorch:2.13.0-cuda13.0-x86_64@sha256:" + "0" * 64), "x86_64"),
    (dict(scheduler="kubeflow-elastic", nodes="2:3"), "--mnnvl with --nodes 2:3"),
    (dict(scheduler="volcano", nodes="2:3"), "expected --nodes N"),
    (dict(mnnvl="yes"), "--mnnvl='yes'; expected a flag"),
    (dict(mnnvl="false"), "--mnnvl='false'"),  # a truthy string must not turn it on
    (dict(mnnvl=1), "--mnnvl=1"),
])
def test_what_mnnvl_cannot_work_with_is_one_line(change, needle):
    fields = dict(scheduler="kubeflow", **GB200)
    fields.update(change)
    assert needle in _refused(**fields)


@pytest.mark.parametrize("image", [
    IMAGE,  # multi-arch: its arm64 build is what a GB200 node pulls
    "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0-aarch64",
    "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0-arm64",
    "registry.example.com/torchpod/pytorch@sha256:" + "0" * 64,
    "registry.example.com:5000/x86_64/pytorch:2.13.0",  # an arch in the path, not the tag
])
def test_an_image_that_may_carry_arm64_is_accepted(image):
    (out,) = render_mod.render(JobSpec("jobset", **{**GB200, "image": image}))
    assert "linux/arm64" in out.text.split("apiVersion", 1)[0]  # the header says what the image needs


@pytest.mark.parametrize("arch", sorted(ARCHES))
def test_a_per_arch_tag_is_accepted_only_for_aarch64(arch):
    image = f"registry.example.com/torchpod/pytorch:2.13.0-cuda13.0-{arch}"
    assert names.image_arch(image) == arch
    try:
        render_mod.render(JobSpec("lws", **{**GB200, "image": image}))
    except InputError as err:
        assert arch != placement.MNNVL_ARCH and str(err).startswith(f"--image={image!r} with --mnnvl")
    else:
        assert arch == placement.MNNVL_ARCH


@settings(deadline=None, max_examples=200)
@given(value=st.one_of(st.text(), st.integers(), st.none(), st.floats(allow_nan=True)))
def test_any_value_for_mnnvl_other_than_a_flag_is_one_line(value):
    message = _refused(scheduler="volcano", **{**GB200, "mnnvl": value})
    assert message.startswith("--mnnvl=")


@settings(deadline=None, max_examples=200)
@given(name=st.from_regex(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", fullmatch=True),
       scheduler=st.sampled_from(MNNVL_KINDS))
def test_any_accepted_name_makes_kubernetes_names_for_the_domain_and_its_claims(name, scheduler):
    docs = [d for o in render_mod.render(JobSpec(scheduler, **{**GB200, "name": name}))
            for d in yaml.safe_load_all(o.text) if d]
    domain = docs[0]
    for made in (domain["metadata"]["name"], domain["spec"]["channel"]["resourceClaimTemplate"]["name"]):
        assert SUBDOMAIN.fullmatch(made) and len(made) <= 253, made
    claims = re.findall(r"claims:\n\s*- name: (\S+)", render_mod.render(JobSpec(scheduler, **GB200))[0].text)
    assert claims and all(LABEL.fullmatch(c) and len(c) <= 63 for c in claims)


def test_every_name_trainer_accepts_fits_jobsets_pod_name_limit():
    # placement.NAME_MAX holds every kind's --name; Trainer's pods must stay within JobSet's webhook
    room = placement.pod_name_room(jobs.kind("trainer").last_pod, spec.MAX_NODES)
    assert room == 63 - len("-abcde") - len(f"-node-0-{spec.MAX_NODES - 1}") and placement.NAME_MAX <= room
    longest = JobSpec("trainer", spec.MAX_NODES, IMAGE, ("t.py",), name="t" * placement.NAME_MAX)
    job = next(d for d in yaml.safe_load_all(render_mod.render(longest)[0].text) if d)
    trainer_admitted(job["metadata"]["name"], job["spec"]["trainer"])  # the webhooks' rules, modelled
    checked = spec.check(longest)
    with pytest.raises(InputError, match=f"expected a --name of at most {room} characters"):
        placement.check_kind_limits(replace(checked, name="t" * (room + 1)))
    assert "trainer" in jobs.KUBE


def test_a_missing_image_is_required_not_empty():
    with pytest.raises(InputError) as err:
        spec.check(JobSpec("volcano", 2, "", ("train.py",)))
    assert str(err.value).startswith("--image is required; expected ") and "''" not in str(err.value)


def test_a_repeated_option_a_kind_cannot_carry_is_named_as_it_was_given():
    with pytest.raises(InputError) as err:
        spec.check(JobSpec("slurm", 2, IMAGE, ("train.py",),
                           toleration=("nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute")))
    message = str(err.value)
    assert message.startswith("--toleration=nvidia.com/gpu:NoSchedule --toleration=dedicated=ml:NoExecute: a slurm job")
    assert "(" not in message.split(":")[0] and "'" not in message, message


# sbatch(1) --constraint: AND, OR, matching OR in brackets, node counts, grouping
@pytest.mark.parametrize("value", ["h100&ib", "[ib1|ib2]", "(a&b)|c", "gpu*2", "[rack1*2&rack2*4]", "[a|b]&c",
                                   "((a|b)&c)", "intel.v2-x_1"])
def test_slurms_constraint_grammar_is_taken(value):
    assert spec.check(JobSpec("slurm", 2, IMAGE, ("train.py",), constraint=value)).constraint == value


@pytest.mark.parametrize("value", ["a&", "&a", "a||b", "[a|[b]]", "(a", "a)", "[a", "a b", "a;b", "a\nb", "a*0",
                                   "a*", "()", "[]", "a&(b|)", "x" * 257, "h100&ib$(id)"])
def test_anything_else_as_a_constraint_is_one_line(value):
    with pytest.raises(InputError) as err:
        spec.check(JobSpec("slurm", 2, IMAGE, ("train.py",), constraint=value))
    assert str(err.value).startswith("--constraint=") and "\n" not in str(err.value)


@given(st.text(alphabet="ab&|()[]*1 ", max_size=16))
def test_any_constraint_is_taken_whole_or_refused(value):
    try:
        checked = spec.check(JobSpec("slurm", 2, IMAGE, ("train.py",), constraint=value))
    except InputError as err:
        assert "\n" not in str(err)
    else:  # taken only when balanced
        assert checked.constraint.count("(") == checked.constraint.count(")")
        assert checked.constraint.count("[") == checked.constraint.count("]") <= 1 or "][" not in value


@pytest.mark.parametrize("value, hours", [("2-00:00:00", "48:00:00"), ("0-12:30:00", "12:30:00"),
                                          ("1-23:59:59", "47:59:59"), ("72:00:00", "72:00:00")])
def test_a_walltime_in_days_is_taken_as_hours(value, hours):
    assert spec.check(JobSpec("pbs", 2, IMAGE, ("train.py",), walltime=value)).walltime == hours


@pytest.mark.parametrize("value", ["2-24:00:00", "2-", "-01:00:00", "1-1:00", "0-00:00:00", "2d", "1-00:60:00"])
def test_a_walltime_in_no_form_is_one_line(value):
    with pytest.raises(InputError, match=r"^--walltime=.*expected HH:MM:SS or D-HH:MM:SS"):
        spec.check(JobSpec("slurm", 2, IMAGE, ("train.py",), walltime=value))


@pytest.mark.parametrize("value", ["node[01-04],gpu7", "gpu07", "a[1,3-5]"])
def test_slurm_excludes_a_host_list(value):
    (out,) = render_mod.render(JobSpec("slurm", 2, IMAGE, ("train.py",), exclude=value))
    assert f"#SBATCH --exclude={value}\n" in out.text


@pytest.mark.parametrize("value", ["node[01-", "a b", "a;b", "a\nb", "[1-2]", "a,,b"])
def test_a_bad_exclude_is_one_line(value):
    with pytest.raises(InputError, match=r"^--exclude=.*expected a Slurm host list"):
        spec.check(JobSpec("slurm", 2, IMAGE, ("train.py",), exclude=value))


@pytest.mark.parametrize("scheduler, directive, line", [
    ("slurm", "--mail-type=END", "#SBATCH --mail-type=END"),
    ("slurm", "--switches=1@00:10:00", "#SBATCH --switches=1@00:10:00"),
    ("pbs", "-l filesystems=home:eagle", "#PBS -l filesystems=home:eagle"),
    ("lsf", "-B", "#BSUB -B"),
])
def test_a_directive_torchpod_does_not_write_is_passed_through(scheduler, directive, line):
    (out,) = render_mod.render(JobSpec(scheduler, 2, IMAGE, ("train.py",), directive=(directive,)))
    lines = out.text.splitlines()
    assert line in lines and lines.index(line) < lines.index("set -euo pipefail")  # before the first command


@pytest.mark.parametrize("scheduler, directive", [
    ("slurm", "--time=5"), ("slurm", "-t60"), ("slurm", "-J other"), ("slurm", "--nodes=4"), ("slurm", "-N 4"),
    ("slurm", "--output=x.out"), ("pbs", "-l walltime=1:00:00"), ("pbs", "-l select=4:ngpus=8"), ("pbs", "-N other"),
    ("lsf", "-n 8"), ("lsf", "-W 10"),
])
def test_a_directive_the_script_already_sets_is_refused(scheduler, directive):
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec(scheduler, 2, IMAGE, ("train.py",), directive=(directive,)))
    assert str(err.value).startswith(f"--directive={directive!r} sets ") and "itself" in str(err.value)


@pytest.mark.parametrize("directive", ["", "mail", "--mail-type=END\n#SBATCH --nodes=99", "-x\x1b", "--a=\u00e9",
                                       "--" + "a" * 250, "; rm -rf /"])
def test_a_directive_that_is_not_one_option_on_one_line_is_refused(directive):
    with pytest.raises(InputError, match=r"^--directive=.*expected one option of the batch system's"):
        spec.check(JobSpec("slurm", 2, IMAGE, ("train.py",), directive=(directive,)))


def test_a_kubernetes_kind_takes_no_directive():
    with pytest.raises(InputError, match="a volcano job has no place for it"):
        spec.check(JobSpec("volcano", 2, IMAGE, ("train.py",), directive=("--mail-type=END",)))


def test_a_partition_directive_is_taken_where_the_script_names_none_and_refused_beside_queue():
    (out,) = render_mod.render(JobSpec("slurm", 2, IMAGE, ("train.py",), directive=("-p gpu,gpu2",)))
    assert "#SBATCH -p gpu,gpu2" in out.text.splitlines()  # several partitions: sbatch's own list
    with pytest.raises(InputError, match="sets --partition, which this script sets itself"):
        render_mod.render(JobSpec("slurm", 2, IMAGE, ("train.py",), queue="gpu", directive=("-p gpu2",)))
