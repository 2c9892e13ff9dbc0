"""`invoke manifests` against hostile input: every value is held to its grammar
before anything is built, the header's Regenerate line carries any argv as escaped
printable ASCII and reads back exactly, scripts quote by construction, YAML gains no
document or key from an argument, and files are written all or none, never over work.

Each finding of the issue's "Unintended code runs" and "`invoke manifests`" lists has an
example here next to the happy path; tests/unit/test_manifests_exec.py executes every
script with stub commands."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.manifests import kube, outfiles, regenerate, shellwords
from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests.spec import HPC, KUBE, JobSpec, check

from paths import ROOT

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
DIGEST = "sha256:" + "0123456789abcdef" * 4
SLINGSHOT = dict(preset="hpe-slingshot-gh200", gpus_per_node=4)
HANG_GUARD = 30  # seconds: a bash run that takes longer has hung
# Text that ends a comment line in bash or YAML, or a YAML document, or runs code in a shell.
BREAKERS = ["\n", "\r", "\u2028", "\u2029", "\x85", "\n---\nkind: Pod\n", "'$(touch P)'", "$HOME", "$5",
            '"; touch P; "', "`touch P`", "\\", "'", '"']
ANY_TEXT = st.text(st.characters(exclude_characters="\0", exclude_categories=("Cs",)), max_size=24)


def _spec(**change) -> JobSpec:
    fields = dict(scheduler="volcano", nodes=2, image=IMAGE, command=("train.py",))
    fields.update(change)
    return JobSpec(**fields)


def _refused(spec: JobSpec) -> str:
    with pytest.raises(InputError) as err:
        render_mod.render(spec)
    message = str(err.value)
    assert "\n" not in message and "\r" not in message and message.isprintable(), repr(message)
    return message


# --- grammar: each value checked before anything is built ----------------------------------

REFUSED = [
    (dict(nodes="abc"), "--nodes='abc'"),
    (dict(nodes="2.5"), "--nodes='2.5'"),
    (dict(nodes="1e11"), "--nodes='1e11'"),
    (dict(nodes="\u00b2"), "ASCII digits only"),
    (dict(nodes="\u0663"), "ASCII digits only"),  # an Arabic-Indic 3, which int() would take
    (dict(nodes="100001"), "from 1 to 100000"),
    (dict(nodes=True), "--nodes=True"),
    (dict(gpus_per_node="65"), "from 0 to 64"),
    (dict(gpus_per_node="-1"), "--gpus-per-node='-1'"),
    (dict(namespace="n" * 64), "at most 63"),
    (dict(namespace="default\n"), "--namespace='default\\n'"),
    (dict(name="train\n"), "--name='train\\n'"),
    (dict(name="t" * 41), "at most 40"),
    (dict(scheduler="runai", project="Team A!"), "--project='Team A!'"),
    (dict(scheduler="runai", project="team-a\ntouch P"), "Run:ai project name"),
    (dict(image=IMAGE + " --privileged"), "has tag"),
    (dict(image="registry.example.com/t p/pytorch:1"), "is not an image reference"),
    (dict(image=IMAGE + "\nkind: Pod"), "has tag"),
    (dict(image="registry.example.com/Torchpod/pytorch:1"), "lower-case path"),
    (dict(image="registry.example.com/t/p@sha256:abc"), "64 lower-case hex digits"),
    (dict(image="registry.example.com/t/p@sha256:" + "A" * 64), "64 lower-case hex digits"),
    (dict(image="registry.example.com/t/p@md5:" + "a" * 32), "has digest 'md5:"),
    (dict(image="registry.example.com/t/p:.hidden"), "has tag '.hidden'"),
    (dict(image="registry.example.com/t/p:" + "a" * 129), "at most 128"),
    (dict(rdzv="etcd", etcd_endpoint="e:0"), "has port '0'"),
    (dict(rdzv="etcd", etcd_endpoint="e:65536"), "has port '65536'"),
    (dict(rdzv="etcd", etcd_endpoint="e:2379\n"), "has port '2379\\n'"),
    (dict(rdzv="etcd", etcd_endpoint="e$(id):2379"), "host: letters"),
    (dict(rdzv="etcd", etcd_endpoint="etcd"), "has no port"),
    (dict(rdzv="etcd", etcd_server=True, etcd_endpoint="e:2379"), "--etcd-server with --etcd-endpoint"),
    (dict(rdma="device-plugin", rdma_resource="nvidia.com/gpu"), "is the GPU resource"),
    (dict(rdma="device-plugin", rdma_resource="rdma/x\n"), "--rdma-resource"),
    (dict(scheduler="slurm", walltime="0:99:99"), "--walltime='0:99:99'"),
    (dict(scheduler="slurm", walltime="1:60:00"), "below 60"),
    (dict(scheduler="slurm", walltime="00:00:00"), "more than zero"),
    (dict(scheduler="slurm", walltime="01:00:00\n"), "--walltime="),
    (dict(scheduler="slurm", walltime="\u0661:00:00"), "--walltime="),
    (dict(scheduler="slurm", queue="--"), "--queue='--'"),
    (dict(scheduler="slurm", queue="gpu\n#SBATCH --uid=0"), "--queue="),
    (dict(scheduler="slurm", runtime="enroot", site_lib="/opt/ofi;touch P;#", **SLINGSHOT), "--site-lib="),
    (dict(scheduler="slurm", runtime="enroot", site_lib="/srv/$(touch P)/lib", **SLINGSHOT), "'$'"),
    (dict(scheduler="slurm", runtime="enroot", site_lib="/srv/:rocm/lib", **SLINGSHOT), "no ',' or ':'"),
    (dict(scheduler="slurm", runtime="apptainer", site_lib="/srv/a,b", **SLINGSHOT), "no ',' or ':'"),
    (dict(scheduler="slurm", runtime="apptainer", site_lib="/srv/a b", **SLINGSHOT), "no spaces"),
    (dict(scheduler="slurm", runtime="apptainer", site_lib="/srv/x\n#", **SLINGSHOT), "control"),
    (dict(command=("train.py", "a\0b")), "NUL"),
    (dict(command=("", "x")), "the training script is ''"),
    (dict(command=("train.py", "\udcff")), "lone surrogate"),
]


@pytest.mark.parametrize("change, needle", REFUSED, ids=[n for _, n in REFUSED])
def test_a_value_outside_its_grammar_is_one_line_naming_it(change, needle):
    assert needle in _refused(_spec(**change))


ACCEPTED = [
    dict(nodes="100000"),
    dict(nodes=3, gpus_per_node="0"),
    dict(gpus_per_node="64"),
    dict(namespace="n" * 63),
    dict(namespace="0team"),
    dict(scheduler="runai", project="team-b"),
    dict(image="registry.example.com:5000/torchpod/pytorch:2.13.0"),
    dict(image="registry.example.com/torchpod/pytorch@" + DIGEST),
    dict(image="registry.example.com/torchpod/pytorch:2.13.0@" + DIGEST),
    dict(image="[fd00::1]:5000/torchpod/pytorch:2.13.0"),
    dict(image="torchpod/py__torch:v1_x"),
    dict(image="registry.example.com/t/p@sha512:" + "ab" * 64),
    dict(rdzv="etcd", etcd_endpoint="etcd.infra:2379"),
    dict(rdzv="etcd", etcd_endpoint="[fd00::1]:2379"),
    dict(rdzv="etcd", etcd_endpoint="10.0.0.1:65535"),
    dict(rdma="device-plugin", rdma_resource="rdma/rdma_shared_device_a"),
    dict(scheduler="slurm", walltime="100:00:00", queue="gpu.long_1"),
    dict(scheduler="slurm", runtime="enroot", site_lib="/home/u/aws-ofi-nccl+1.14@x/lib", **SLINGSHOT),
]


@pytest.mark.parametrize("change", ACCEPTED, ids=[repr(c) for c in ACCEPTED])
def test_a_value_within_its_grammar_is_accepted(change):
    spec = check(_spec(**change))
    assert isinstance(spec.nodes, int) and isinstance(spec.gpus_per_node, int)
    assert render_mod.render(spec)


# --- the header: checked values, and a Regenerate line of escaped words ---------------------

def _comment_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("#")]


@pytest.mark.parametrize("scheduler", KUBE + HPC)
@pytest.mark.parametrize("breaker", BREAKERS, ids=repr)
def test_no_argument_reaches_a_comment_raw_and_the_regenerate_line_reads_back(scheduler, breaker):
    spec = check(_spec(scheduler=scheduler, command=("train.py", f"x{breaker}y", breaker)))
    for out in render_mod.render(spec):
        for line in _comment_lines(out.text):
            assert all(" " <= ch <= "~" for ch in line), (out.name, line)
        again = regenerate.parse_invoke_line(regenerate.regenerate_line(out.text))
        assert check(again) == spec


def test_the_header_names_the_etcd_the_job_uses():
    (out,) = render_mod.render(_spec(scheduler="kubeflow", rdzv="etcd", etcd_server=True))
    assert "etcd-v2 at train-etcd:2379 (the etcd Pod and Service in this file" in out.text


@settings(deadline=None, max_examples=300)
@given(word=ANY_TEXT)
def test_any_word_quoted_for_a_comment_is_printable_ascii_and_reads_back(word):
    quoted = shellwords.quote(word, ascii_only=True)
    assert all(" " <= ch <= "~" for ch in quoted)
    assert regenerate.split_words(quoted) == [word]


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.lists(ANY_TEXT, max_size=4), scheduler=st.sampled_from(KUBE + HPC))
def test_any_argv_round_trips_through_the_regenerate_line(argv, scheduler):
    spec = check(_spec(scheduler=scheduler, command=("train.py", *argv)))
    line = regenerate.invoke_line(spec)
    assert check(regenerate.parse_invoke_line(line)) == spec


# --- scripts: quoted by construction ------------------------------------------------------

def _bash_words(words: list[str]) -> list[str]:
    script = "printf '%s\\0' " + shellwords.line(words) + "\n"
    proc = subprocess.run(["bash", "-c", script], capture_output=True, timeout=HANG_GUARD,
                          env={"PATH": os.environ["PATH"], "LC_ALL": "C"})
    assert proc.returncode == 0, proc.stderr
    return [w.decode("utf-8", "surrogateescape") for w in proc.stdout.split(b"\0")[:-1]]


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(words=st.lists(ANY_TEXT, min_size=1, max_size=6))
def test_bash_reads_any_quoted_word_back_exactly(words):
    assert _bash_words(words) == words


def test_a_value_never_starts_a_new_line_of_a_script():
    (out,) = render_mod.render(_spec(scheduler="slurm", command=("train.py", "a\n#SBATCH --uid=0\nb", "c\rd")))
    assert "#SBATCH --uid=0" not in out.text.split("\n")
    assert "$'a\\n#SBATCH --uid=0\\nb' $'c\\rd'" in out.text


@pytest.mark.parametrize("arg", ["'$(touch P)'", "$HOME", "$5", '"; touch P; "', "\\\"'\\"])
def test_pbsdsh_hands_the_argument_over_unexpanded(arg, tmp_path):
    """pbsdsh runs its arguments as a program (openpbs src/tools/pbsdsh.c); the stand-in
    does the same on this host."""
    (out,) = render_mod.render(_spec(scheduler="pbs", runtime="none", command=("train.py", arg)))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "pbsdsh").write_text('#!/bin/bash\n[ "$1" = -- ] && shift\nexec "$@"\n')
    (bindir / "torchpod").write_text('#!/bin/bash\nprintf "%s\\0" "$@" > "$TP_ARGS"\n')
    for stub in bindir.iterdir():
        stub.chmod(0o755)
    script = tmp_path / "job.sh"
    script.write_text(out.text)
    (tmp_path / "nodefile").write_text("n0\n")
    env = {"PATH": f"{bindir}:/usr/bin:/bin", "PBS_O_WORKDIR": str(tmp_path),
           "PBS_NODEFILE": str(tmp_path / "nodefile"), "PBS_JOBID": "7.pbs", "PBS_NODENUM": "0",
           "TP_ARGS": str(tmp_path / "args"), "HOME": "/home/nobody"}
    proc = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "args").read_bytes().split(b"\0")[:-1] == [b"run", b"--", b"train.py", arg.encode()]
    assert not (tmp_path / "P").exists()


@pytest.mark.parametrize("runtime, form", [
    ("apptainer", "--bind /srv/ofi+1/lib:/opt/torchpod/site/lib:ro"),
    ("enroot", "--mount /srv/ofi+1/lib:/opt/torchpod/site/lib "),
    ("docker", "-v /srv/ofi+1/lib:/opt/torchpod/site/lib:ro"),
])
def test_a_site_path_is_bound_as_one_word_with_its_read_only_flag(runtime, form):
    (out,) = render_mod.render(_spec(scheduler="pbs", runtime=runtime, site_lib="/srv/ofi+1/lib", **SLINGSHOT))
    assert form in out.text


def test_pyxis_mounts_are_one_word_and_keep_ro():
    (out,) = render_mod.render(_spec(scheduler="slurm", runtime="enroot", site_lib="/srv/ofi/lib", **SLINGSHOT))
    assert ('--container-mounts="$PWD:/workspace",/srv/ofi/lib:/opt/torchpod/site/lib:ro,'
            "/opt/cray/libfabric:/opt/cray/libfabric:ro,") in out.text


# --- YAML: only the library writes it --------------------------------------------------

@settings(deadline=None, max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(argv=st.lists(st.one_of(ANY_TEXT, st.sampled_from(BREAKERS)), max_size=4),
       scheduler=st.sampled_from(KUBE))
def test_no_argv_adds_a_yaml_document_or_key(argv, scheduler):
    spec = check(_spec(scheduler=scheduler, command=("train.py", *argv)))
    (out,) = [o for o in render_mod.render(spec) if o.name.endswith(".yaml")]
    assert list(yaml.safe_load_all(out.text)) == kube.objects(spec)


def test_an_argument_that_is_a_yaml_document_stays_an_argument():
    evil = "x\n---\napiVersion: v1\nkind: Pod\nspec: {containers: [{securityContext: {privileged: true}}]}\n"
    spec = check(_spec(scheduler="kubeflow", command=("train.py", evil)))
    (out,) = render_mod.render(spec)
    docs = list(yaml.safe_load_all(out.text))
    assert [d["kind"] for d in docs] == ["PyTorchJob"]
    for replica in docs[0]["spec"]["pytorchReplicaSpecs"].values():
        assert replica["template"]["spec"]["containers"][0]["args"] == ["run", "--", "train.py", evil]


# --- writing: nothing when render refuses (outfiles.write itself: test_outfiles.py) ---------

def test_nothing_is_written_when_render_refuses(tmp_path):
    with pytest.raises(InputError):
        outfiles.write(tmp_path / "out", render_mod.render(_spec(nodes="abc")))
    assert not (tmp_path / "out").exists()


def test_the_worked_examples_parse_with_the_strict_reader():
    root = ROOT / "manifests"
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "README.md"):
        spec = regenerate.parse_invoke_line(regenerate.regenerate_line(path.read_text()))
        assert check(spec)
