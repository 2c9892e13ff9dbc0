"""torchpod_toolkit.manifests.spec: a bad request is one line naming the flag, the value and
the form expected, before anything is rendered; `--nodes MIN:MAX` only for the elastic kinds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests import regenerate as regenerate_mod
from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests import spec as spec_mod
from torchpod_toolkit.manifests.spec import NODE_RANGE_KINDS, JobSpec, check

from manifest_cases import IMAGE

BAD = [
    (dict(nodes=0), "--nodes=0"),
    (dict(nodes=-2), "--nodes=-2"),
    (dict(scheduler="cobalt"), "--scheduler='cobalt' is unknown"),
    (dict(image="registry.example.com/torchpod/pytorch"), "has no tag"),
    (dict(image="registry.example.com:5000/torchpod/pytorch"), "has no tag"),
    (dict(image="torchpod/pytorch:latest"), "'latest'"),
    (dict(preset="oci-bm-gpu-a10"), "--preset='oci-bm-gpu-a10' is unknown"),
    (dict(preset="oci-bm-gpu-h100.8", gpus_per_node=16), "shape with 8 GPUs"),
    (dict(rdzv="etcd"), "--rdzv etcd needs an etcd endpoint"),
    (dict(rdzv="etcd", etcd_endpoint="etcd.infra"), "has no port"),
    (dict(etcd_image="mirror.example/etcd@sha256:" + "a" * 64), "--etcd-image="),
    (dict(rdzv="etcd", etcd_server=True, etcd_image="mirror.example/etcd"), "has no tag"),
    (dict(rdzv="etcd", etcd_server=True, etcd_image="mirror.example/etcd:latest"), "'latest'"),
    (dict(rdzv="etcd", etcd_server=True, etcd_image="mirror.example/etcd:v3\n"), "--etcd-image="),
    (dict(rdma="device-plugin"), "--rdma device-plugin needs --rdma-resource"),
    (dict(rdma="sriov"), "--rdma='sriov' is unknown"),
    (dict(scheduler="slurm", runtime="singularity"), "--runtime='singularity' is unknown"),
    (dict(scheduler="slurm", rdma="hostnetwork"), "is for Kubernetes pods"),
    (dict(runtime="apptainer"), "is for HPC job scripts"),
    (dict(scheduler="trainer", rdma="hostnetwork"), "cannot set hostNetwork"),
    (dict(scheduler="volcano-master", nodes=1), "expected 2 or more"),
    (dict(name="Train_1"), "--name='Train_1'"),
    (dict(command=()), "no training script"),
    (dict(scheduler="pbs-pals", preset="hpe-slingshot-gh200", gpus_per_node=4), "needs --site-lib HOSTDIR"),
    (dict(scheduler="slurm", preset="aws-p5", site_lib="/opt/x"), "--site-lib is for Slingshot presets"),
    (dict(scheduler="slurm", preset="hpe-slingshot-gh200", gpus_per_node=4, site_lib="lib"), "absolute host path"),
    (dict(preset="hpe-slingshot-gh200", gpus_per_node=4), "a Slingshot HPC shape"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_line_naming_the_flag(change, message):
    fields = dict(scheduler="volcano", nodes=2, image=IMAGE, command=("train.py",))
    fields.update(change)
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec(**fields))
    assert message in str(err.value) and "\n" not in str(err.value)


# --requeue-lead: Slurm only, sbatch's sig_time range, and short enough for the wall time
REQUEUE_BAD = [
    (dict(scheduler="pbs", requeue_lead="300"), "--requeue-lead=300 is for --scheduler slurm"),
    (dict(scheduler="kubeflow", requeue_lead=300), "a kubeflow job cannot carry it"),
    (dict(requeue_lead="1e3"), "--requeue-lead='1e3'; expected a whole number from 0 to 65535"),
    (dict(requeue_lead="65536"), "--requeue-lead='65536'; expected a whole number from 0 to 65535"),
    (dict(requeue_lead="-5"), "--requeue-lead='-5'"),
    (dict(requeue_lead="\u0663\u0660"), "ASCII digits only"),  # Arabic-Indic digits: int() would take them
    (dict(requeue_lead="300\n#SBATCH --uid=0"), "--requeue-lead="),
    (dict(requeue_lead=True), "--requeue-lead=True"),
    (dict(requeue_lead="3541"), "--walltime=01:00:00 (3600 s): Slurm may signal up to 60 s before the lead"),
    (dict(requeue_lead="3541"), "expected a lead below 3540 s, or a longer --walltime"),
    (dict(requeue_lead="5", walltime="00:01:00"), "expected a --walltime longer than 65 s"),
]


@pytest.mark.parametrize("change, message", REQUEUE_BAD, ids=[m for _, m in REQUEUE_BAD])
def test_bad_requeue_lead_is_one_line_naming_the_flag(change, message):
    fields = dict(scheduler="slurm", nodes=2, image=IMAGE, command=("train.py",), runtime="none")
    fields.update(change)
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec(**fields))
    assert message in str(err.value) and str(err.value).isprintable(), str(err.value)


@settings(deadline=None, max_examples=300)
@given(value=st.one_of(st.text(), st.integers(-10, 70_000), st.text("0123456789", min_size=1, max_size=6)))
def test_any_requeue_lead_is_refused_in_one_line_or_becomes_the_signal_directive(value):
    spec = JobSpec("slurm", 2, IMAGE, ("train.py",), runtime="none", walltime="24:00:00", requeue_lead=value)
    try:
        (out,) = render_mod.render(spec)
    except InputError as err:
        assert str(err).startswith("--requeue-lead=") and str(err).isprintable(), str(err)
        return
    lead = int(value)
    assert 0 <= lead <= 65535 and (isinstance(value, int) or value.isascii() and value.isdigit())
    signal = [ln for ln in out.text.splitlines() if ln.startswith("#SBATCH --signal")]
    assert signal == ([f"#SBATCH --signal=B:USR1@{lead}"] if lead else []), out.text


def test_requeue_lead_survives_the_regenerate_line():
    spec = JobSpec("slurm", 2, IMAGE, ("train.py",), runtime="none", walltime="02:00:00", requeue_lead="0300")
    (out,) = render_mod.render(spec)
    regenerate = regenerate_mod.regenerate_line(out.text)
    assert "--requeue-lead 300 " in regenerate
    assert render_mod.render(regenerate_mod.parse_invoke_line(regenerate))[0].text == out.text
    (plain,) = render_mod.render(JobSpec("slurm", 2, IMAGE, ("train.py",), runtime="none"))
    assert "--requeue-lead" not in plain.text  # off by default, and not named


# --- --nodes MIN:MAX: elastic jobs -----------------------------------------------------
FIXED_KINDS = [k for k in jobs.NAMES if k not in NODE_RANGE_KINDS]


def _elastic(kind: str, nodes, **extra) -> JobSpec:
    return check(JobSpec(kind, nodes, IMAGE, ("train.py",), **extra))


@pytest.mark.parametrize("kind", NODE_RANGE_KINDS)
def test_an_elastic_kind_takes_min_and_max_and_keeps_nodes_the_pod_count(kind):
    spec = _elastic(kind, "2:3")
    assert (spec.nodes, spec.min_nodes, spec.nnodes) == (3, 2, "2:3")
    assert _elastic(kind, 3, min_nodes=2) == spec  # the field, as the harness passes it
    assert _elastic(kind, "1:100000").nnodes == "1:100000"


@pytest.mark.parametrize("kind", NODE_RANGE_KINDS)
def test_min_equal_to_max_is_a_fixed_size(kind):
    assert _elastic(kind, "3:3") == _elastic(kind, "3") == _elastic(kind, 3, min_nodes=3)
    assert _elastic(kind, "3:3").min_nodes is None and _elastic(kind, "3:3").nnodes == "3"


@pytest.mark.parametrize("kind", FIXED_KINDS)
def test_every_other_kind_refuses_a_range_naming_itself(kind):
    with pytest.raises(InputError) as err:
        _elastic(kind, "2:3", gpus_per_node=0)
    message = str(err.value)
    assert message.startswith(f"--nodes=2:3 with --scheduler {kind}: a {kind} job has a fixed size;"), message
    assert "kubeflow-elastic or volcano" in message and "\n" not in message


HOSTILE_RANGES = ["0:2", "3:2", "2:", ":3", ":", "1:2:3", "\u00b2:3", "2:\u0663", "2:3 ", " 2:3", "2:3\n",
                  "2 :3", "+2:3", "-1:3", "2:3.0", "2:1e3", "1:100001", "100001:100002", "0", "0:0",
                  "9" * 19, "1:" + "9" * 5000, "2\x00:3", "2\uff1a3", "2;3", "2-3", "2..3", ""]


@pytest.mark.parametrize("text", HOSTILE_RANGES, ids=ascii)
@pytest.mark.parametrize("kind", NODE_RANGE_KINDS)
def test_a_bad_range_is_one_line_naming_nodes_the_value_and_the_form(kind, text):
    with pytest.raises(InputError) as err:
        _elastic(kind, text)
    message = str(err.value)
    assert message.startswith("--nodes=") and "\n" not in message and len(message) < 300, message
    assert "or MIN:MAX with 1 <= MIN <= MAX <= 100000" in message, message
    assert repr(text)[:20] in message


@pytest.mark.parametrize("min_nodes", [0, 4, -1, True, "2", 2.0])
def test_a_bad_min_nodes_field_is_one_line(min_nodes):
    with pytest.raises(InputError, match=r"^--nodes=.*; expected MIN:MAX with 1 <= MIN <= MAX"):
        _elastic("volcano", 3, min_nodes=min_nodes)


def test_a_range_and_a_different_min_nodes_field_are_refused():
    with pytest.raises(InputError, match=r"^--nodes='2:3' with min_nodes=1: two minimums; expected one$"):
        _elastic("volcano", "2:3", min_nodes=1)
    assert _elastic("volcano", "2:3", min_nodes=2).nnodes == "2:3"


@settings(deadline=None, max_examples=300)
@given(text=st.text(max_size=12) | st.from_regex(r"[0-9]{1,7}:[0-9]{1,7}", fullmatch=True))
def test_any_text_is_a_range_with_the_right_bounds_or_one_line(text):
    try:
        spec = _elastic("kubeflow-elastic", text)
    except InputError as err:
        assert str(err).startswith("--nodes=") and "\n" not in str(err)
        return
    low, _, high = text.partition(":")
    assert text.isascii() and spec.nodes == int(high or low) and 1 <= int(low) <= spec.nodes <= 100_000
    assert spec.min_nodes == (int(low) if int(low) < spec.nodes else None)


@pytest.mark.parametrize("kind", NODE_RANGE_KINDS)
def test_the_regenerate_line_carries_the_range_and_reads_back(kind):
    spec = _elastic(kind, "2:5")
    (yaml_out,) = render_mod.render(spec)
    line = regenerate_mod.regenerate_line(yaml_out.text)
    assert " --nodes 2:5 " in line and yaml_out.text.startswith(f"# torchpod {kind} job 'train': 2:5 nodes")
    assert check(regenerate_mod.parse_invoke_line(line)) == spec


# --- --workload preflight: torchpod.preflight alone, for every kind ---------------------------
def _launch_words(text: str) -> list[str]:
    """The words of `torchpod run ... -- ...` on a rendered script's line, or a pod's args."""
    import shlex

    for line in reversed(text.splitlines()):
        if "torchpod run" in line or " run --" in line:
            words = shlex.split(line)
            return words[words.index("run"):]
    raise AssertionError("no torchpod run line")


@pytest.mark.parametrize("kind", jobs.NAMES)
def test_the_preflight_workload_runs_the_module_with_its_options_on_every_kind(kind):
    spec = check(JobSpec(kind, 2, IMAGE, ("--floor-gbps", "100"), workload="preflight"))
    assert spec.launch() == (("--module",), ("torchpod.preflight", "--floor-gbps", "100"))
    text = "\n".join(f.text for f in render_mod.render(spec))
    assert "torchpod.preflight" in text and "train.py" not in text
    line = regenerate_mod.invoke_line(spec)
    assert "--workload preflight" in line and check(regenerate_mod.parse_invoke_line(line)) == spec


def test_the_preflight_workload_needs_no_options_and_train_needs_a_script():
    spec = check(JobSpec("slurm", 2, IMAGE, (), workload="preflight"))
    (out,) = render_mod.render(spec)
    words = _launch_words(out.text)
    assert words[-4:] == ["run", "--module", "--", "torchpod.preflight"], words
    assert check(regenerate_mod.parse_invoke_line(regenerate_mod.invoke_line(spec))) == spec
    with pytest.raises(InputError, match="no training script given"):
        check(JobSpec("slurm", 2, IMAGE, ()))


@pytest.mark.parametrize("workload", ["Preflight", "bench", "", "preflight\n", "train;id"])
def test_an_unknown_workload_is_one_line_naming_the_flag(workload):
    with pytest.raises(InputError, match=r"^--workload=.* is unknown; expected one of train, preflight$"):
        check(JobSpec("volcano", 2, IMAGE, ("t.py",), workload=workload))


@pytest.mark.parametrize("words, needle", [(("--floor-gbps", "x"), "--floor-gbps: 'x' is not a bandwidth"),
                                           (("train.py",), "unrecognized arguments: train.py"),
                                           (("--iters", "\u0663"), "is not a whole number")])
def test_preflight_options_are_checked_as_its_workers_will_read_them(words, needle):
    with pytest.raises(InputError, match=r"^--workload preflight, the options after `--`: torchpod preflight: ") as err:
        check(JobSpec("volcano", 2, IMAGE, words, workload="preflight"))
    assert needle in str(err.value)


# --- every option x every kind: taken, or refused in one line ------------------------------
# A value other than the default for each option, with what it needs beside it.
_GIVEN = {
    "gpus_per_node": dict(gpus_per_node=4), "name": dict(name="other"), "namespace": dict(namespace="ml"),
    "rdma": dict(rdma="hostnetwork"), "rdma_resource": dict(rdma="device-plugin", rdma_resource="rdma/hca"),
    "privileged": dict(privileged=True), "preset": dict(preset="aws-p5"),
    "rdzv": dict(rdzv="etcd", etcd_endpoint="etcd.example.com:2379"),
    "etcd_endpoint": dict(rdzv="etcd", etcd_endpoint="etcd.example.com:2379"),
    "etcd_server": dict(rdzv="etcd", etcd_server=True), "runtime": dict(runtime="docker"),
    "etcd_image": dict(rdzv="etcd", etcd_server=True, etcd_image="mirror.example/etcd@sha256:" + "c" * 64),
    "queue": dict(queue="gpu"), "walltime": dict(walltime="02:00:00"),
    "gpu_model": dict(gpu_model="h100", gpus_per_node=8),
    "requeue_lead": dict(requeue_lead=300, walltime="02:00:00"), "project": dict(project="team-b"),
    "site_lib": dict(preset="hpe-slingshot-gh200", gpus_per_node=4, site_lib="/opt/site/lib"),
    "mnnvl": dict(mnnvl=True, gpus_per_node=4),
    # a level the pods must meet: its effect is the refusal of a job above it
    "pod_security": dict(pod_security="restricted", rdma="hostnetwork"),
    "run_as_user": dict(run_as_user=2000), "run_as_group": dict(run_as_group=2000), "fs_group": dict(fs_group=2000),
    "workload": dict(workload="preflight", command=()), "cpus_per_node": dict(cpus_per_node=12),
    "memory_per_node": dict(memory_per_node="96Gi"), "account": dict(account="proj-1"), "qos": dict(qos="high"),
    "constraint": dict(constraint="h100&ib"), "reservation": dict(reservation="maint"),
    "exclude": dict(exclude="node[01-04]"), "switches": dict(switches="1@00:30:00"),
    "directive": dict(directive=("--mail-type=END",)),
    "service_account": dict(service_account="trainer"), "priority_class": dict(priority_class="high"),
    "image_pull_secret": dict(image_pull_secret="regcred"), "env": dict(env=("NCCL_DEBUG=INFO", "A=x,y z")),
    "volume": dict(volume=("hostpath:/scratch/ds:/data:ro",)), "workdir": dict(workdir="/workspace/project"),
    "node_selector": dict(node_selector=("nvidia.com/gpu.product=H100",)),
    "toleration": dict(toleration=("nvidia.com/gpu:NoSchedule",)),
}
_ALWAYS_GIVEN = {"scheduler", "nodes", "image"}  # positional: every job names them


def test_every_option_has_a_value_in_the_walk():
    assert set(_GIVEN) | _ALWAYS_GIVEN == {name for name, _ in spec_mod.options()}


def _files(spec: JobSpec) -> dict[str, str]:
    """The rendered files without their Regenerate line (which names every option given)."""
    return {o.name: "\n".join(line for line in o.text.split("\n") if not line.startswith("# Regenerate:"))
            for o in render_mod.render(spec)}


@pytest.mark.parametrize("kind", jobs.NAMES)
@pytest.mark.parametrize("option", sorted(_GIVEN))
def test_every_option_either_changes_the_job_or_is_refused_in_one_line(option, kind):
    """Never dropped: a kind that takes the option renders something else with it (or cannot
    render without it), and records it in the Regenerate line; any other refuses it."""
    fields = {**dict(scheduler=kind, nodes=2, image=IMAGE, command=("train.py",)), **_GIVEN[option]}
    try:
        spec = check(JobSpec(**fields))
        given = _files(JobSpec(**fields))
    except InputError as exc:
        assert str(exc).isprintable() and "\n" not in str(exc), exc
        return
    without = {**fields, option: spec_mod.default(option)}
    try:
        plain = _files(JobSpec(**without))
    except InputError:
        plain = None  # the job needs the option: it took effect
    assert plain != given, f"{spec_mod.flag(option)} changed nothing in a {kind} job"
    assert f" {spec_mod.flag(option)}" in regenerate_mod.invoke_line(spec).split(" -- ")[0]


@pytest.mark.parametrize("kind, fields, refusal", [
    ("kubeflow", dict(queue="gpu"), "--queue=gpu: a kubeflow job has no place for it"),
    ("skypilot", dict(walltime="02:00:00"), "--walltime=02:00:00: a skypilot job has no place for it"),
    ("slurm", dict(namespace="ml"), "--namespace=ml: a slurm job has no place for it"),
    ("slurm", dict(project="team-b"), "--project=team-b: a slurm job"),
    ("pbs", dict(privileged=True), "--privileged: a pbs job has no place for it"),
    ("lsf", dict(pod_security="baseline"), "--pod-security=baseline: a lsf job"),
    ("slurm", dict(runtime="none", preset="hpe-slingshot-gh200", gpus_per_node=4, site_lib="/opt/site/lib"),
     "--site-lib=/opt/site/lib with --runtime none: it is bound into a container"),
])
def test_an_option_the_kind_cannot_express_is_refused_naming_the_kinds_that_take_it(kind, fields, refusal):
    with pytest.raises(InputError) as exc:
        check(JobSpec(kind, 2, IMAGE, ("train.py",), **fields))
    assert str(exc.value).startswith(refusal)
    option = next(iter(fields))
    takers = dict(spec_mod.options())[option].kinds if option != "runtime" else None
    assert takers is None or all(k in str(exc.value) for k in takers)


@pytest.mark.parametrize("kind, field, value", [
    ("slurm", "account", "proj;rm -rf"), ("slurm", "qos", "high\n#SBATCH --x"), ("slurm", "constraint", "h100&&ib"),
    ("slurm", "constraint", "a" * 257), ("slurm", "reservation", "-maint"), ("pbs", "account", "\x1b[31m"),
    ("volcano", "service_account", "Trainer"), ("volcano", "priority_class", "high prio"),
    ("kubeflow", "image_pull_secret", "x" * 254), ("slurm", "env", ("A=1", "A=2")), ("slurm", "env", ("1A=x",)),
    ("slurm", "env", ("SLURM_NODEID=3",)), ("slurm", "env", ("PET_NNODES=4",)), ("slurm", "env", ("A=x\x00y",)),
])
def test_a_site_value_outside_its_grammar_is_one_line_naming_the_option(kind, field, value):
    with pytest.raises(InputError) as exc:
        check(JobSpec(kind, 2, IMAGE, ("train.py",), **{field: value}))
    message = str(exc.value)
    assert message.startswith(spec_mod.flag(field)) and "\n" not in message and message.isprintable(), message


def test_the_etcd_pod_runs_the_image_named_and_a_tag_is_a_warning_a_digest_is_not():
    """--etcd-image reaches the etcd Pod as given; while it is a tag (the default's case)
    the header warns, and the warning is one of the notices a pipe's reader sees."""
    digest = "mirror.example/etcd@sha256:" + "b" * 64
    for image, warned in ((spec_mod.ETCD_IMAGE, True), (digest, False)):
        outputs = render_mod.render(JobSpec("volcano", 2, IMAGE, ("/opt/x.py",), rdzv="etcd", etcd_server=True,
                                            etcd_image=image))
        text = outputs[0].text
        assert f"image: {image}" in text, text
        assert any("etcd Pod's image" in n for n in render_mod.notices(outputs)) is warned
        assert (f"--etcd-image {image}" in regenerate_mod.regenerate_line(text)) is not warned  # a default is left out
