"""`invoke manifests` under hostile input: every generated job script is
executed, and every Kubernetes file parsed, to see what it really does with the user's text.

HPC: for every scheduler x runtime the script runs under bash in a temporary job directory
whose PATH holds only the stubs of manifest_stubs (srun, mpiexec, pbsdsh, blaunch, apptainer, enroot,
podman-hpc, docker, torchpod; the real sort, wc and env), each modelled on its real command
line. The script must hand exactly ``run [--rdzv-backend etcd-v2 --rdzv-endpoint E] -- ARGV``
to torchpod, through the intended fan-out and runtime, with the intended binds and image,
and run nothing else: no command bash cannot find, no marker file, no stray file. Or
``render`` refuses with one InputError line (render writes nothing; it returns text). A
SkyPilot task is YAML: it must parse to the object built, and its ``run`` runs under bash
with the same stubs.

Kubernetes: each YAML file parses to exactly the intended documents (count, kinds, the
objects kube.objects built) and the container's args carry ARGV exactly; the Run:ai ``.sh``
runs under sh and hands the Run:ai stub exactly the intended argv. Every comment line of
every file is printable ASCII, so no value can end a comment.

Text is drawn from all of Unicode (control characters, U+2028/2029/0085, lone surrogates)
mixed with shell and YAML metacharacters, for the argv and for the option values.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.manifests import hpc, jobs, kube, resources, runtimes
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import HPC, KUBE, RUNTIMES, JobSpec, check

import manifest_stubs as stubs

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
SLINGSHOT, EFA = "hpe-slingshot-gh200", "aws-p5"  # presets.json: a Slingshot and an EFA shape
FAN_OUT = {"slurm": "srun", "pbs": "pbsdsh", "pbs-pals": "mpiexec", "lsf": "blaunch"}
PROGRAM = {"apptainer": "apptainer", "enroot": "enroot", "podman": "podman-hpc", "docker": "docker", "none": None}
COMBOS = [(s, r) for s in HPC for r in jobs.kind(s).runtimes or RUNTIMES]
KINDS = {"volcano": "Job", "volcano-master": "Job", "kubeflow": "PyTorchJob", "kubeflow-elastic": "PyTorchJob",
         "trainer": "TrainJob", "runai": "PyTorchJob", "lws": "LeaderWorkerSet", "jobset": "JobSet"}
HANG_GUARD = 30  # seconds; a script that runs longer has hung (a stub waiting, a read from a FIFO)
NODES = 2  # run_job's job: two nodes (n0, n1), so every fan-out starts torchpod twice

# Pieces a hostile value is made of, next to arbitrary text: what ends a shell word, a
# comment or a YAML document, and expansions that would run code (each would create $MARK).
FRAGMENTS = [
    "\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0b", "\x0c", "\x1b[2J", "'", '"', "\\", "$", "$(", ")",
    "`", ";", "&", "|", ">", "<", "#", " ", "\t", "--", "-", ",", ":", ":ro", "=", "*", "?", "[a]", "{a,b}", "~",
    "!", "%", "%x", "$HOME", "$5", "${MARK}", '$(: >"$MARK")', '`: >"$MARK"`', '\n: >"$MARK"\n#',
    '\'$(: >"$MARK")\'', '"; : >"$MARK"; "', "\n---\napiVersion: v1\nkind: Pod\n", "\n#SBATCH --uid=0\n",
    "\u00e9", "\U0001f600", "\ufeff", "\u200b",
]
_BASE = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(FRAGMENTS)), max_size=5).map("".join)
# what no file or argv can carry (NUL; a lone surrogate, as sys.argv holds an undecodable
# byte): rare, so that most values get as far as the script
_RARE = st.sampled_from([""] * 12 + ["\x00", "\udc80", "\ud800"])
TEXT = st.tuples(_BASE, _RARE, _BASE).map("".join)
ARGV = st.tuples(TEXT.filter(bool), st.lists(TEXT, max_size=3)).map(lambda t: (t[0], *t[1]))
LOCALE = st.sampled_from(["C", "C.UTF-8"])  # bash's quoting and printf %q differ between them


def one_line(exc: InputError) -> None:
    message = str(exc)
    assert message and message.isprintable(), f"refusal is not one printable line: {message!r}"


def comments_are_ascii(text: str) -> None:
    """Every comment line is printable ASCII, so no value can end a comment early (a newline,
    CR, U+2028/2029 or U+0085: bash or a YAML parser would read on as code or data)."""
    for number, line in enumerate(text.split("\n"), 1):
        if line.startswith("#"):
            assert all(" " <= c <= "~" for c in line), f"line {number} is not printable ASCII: {line!r}"


def directives(text: str, prefix: str) -> list[list[str]]:
    """The scheduler directives (``#SBATCH``/``#PBS`` lines) the scheduler reads: sbatch(1) and
    qsub(1) read them until the first line that is neither blank nor a comment."""
    out = []
    for line in text.split("\n")[1:]:
        if line.strip() and not line.startswith("#"):
            break
        if line.startswith(prefix + " "):
            out.append(line[len(prefix) + 1:].split())
    return out


def check_lsf_directives(spec: JobSpec, text: str) -> None:
    """#BSUB lines (bsub reads them like a command line, quotes included): each option once,
    the job's values, and -W the wall time in [hour:]minute, rounded up to a minute."""
    words = directives(text, "#BSUB")
    found = {d[0]: " ".join(d[1:]) for d in words}
    assert len(found) == len(words) and set(found) <= {"-J", "-n", "-R", "-x", "-gpu", "-W", "-q", "-o", "-P"}, words
    assert found.get("-P", "") == spec.account  # the project the job is charged to
    node = spec.per_node  # the whole host (-x) unless CPUs were given: then bound cores and memory
    select = ["span[ptile=1]"] + ([] if node.whole_node else [f"affinity[core({node.cpus})]"])
    if node.memory_given or not node.whole_node:
        select.append(f"rusage[mem={resources.lsf_size(node.memory_mi)}]")
    assert (found["-J"], found["-n"], found["-R"]) == (spec.name, str(spec.nodes), f'"{" ".join(select)}"')
    assert ("-x" in found) == node.whole_node and found.get("-x", "") == ""
    assert found.get("-gpu") == (f'"num={spec.gpus_per_node}:j_exclusive=yes"' if spec.gpus_per_node else None)
    assert found.get("-q", "") == spec.queue and found["-o"] == f"{spec.name}-%J.out"
    hours, minutes, seconds = (int(x) for x in spec.walltime.split(":"))
    wall_h, wall_m = found["-W"].split(":")
    assert int(wall_h) * 60 + int(wall_m) == hours * 60 + minutes + (seconds > 0) and len(wall_m) == 2


# the site's options a #SBATCH line carries under the option's own name
SLURM_SITE = ("account", "qos", "constraint", "reservation")


def check_directives(spec: JobSpec, text: str) -> None:
    if spec.scheduler == "lsf":
        check_lsf_directives(spec, text)
    elif spec.scheduler == "slurm":
        words = directives(text, "#SBATCH")
        assert all(len(d) == 1 and d[0].startswith("--") and ("=" in d[0] or d[0] == "--exclusive")
                   for d in words), words
        found = dict((d[0][2:] + "=").split("=")[:2] for d in words)
        assert len(found) == len(words), f"a #SBATCH option given twice: {words}"
        assert set(found) <= {"job-name", "nodes", "ntasks-per-node", "exclusive", "cpus-per-task", "mem",
                              "gpus-per-node", "time", "partition", "output", *SLURM_SITE}
        assert all(found.get(name, "") == getattr(spec, name) for name in SLURM_SITE), found
        assert (found["job-name"], found["nodes"], found["time"]) == (spec.name, str(spec.nodes), spec.walltime)
        assert found.get("partition", "") == spec.queue
        node = spec.per_node  # the whole node unless CPUs were given
        assert ("exclusive" in found) == node.whole_node != ("cpus-per-task" in found)
        assert found.get("cpus-per-task", str(node.cpus)) == str(node.cpus)
        whole_memory = node.whole_node and not node.memory_given
        assert found["mem"] == ("0" if whole_memory else resources.slurm_size(node.memory_mi))
    else:
        found_pbs = directives(text, "#PBS")
        assert all(len(d) == 2 and d[0] in ("-N", "-l", "-q", "-j", "-A") for d in found_pbs), found_pbs
        assert [d[1] for d in found_pbs if d[0] == "-A"] == ([spec.account] if spec.account else [])
        asked = [d[1] for d in found_pbs if d[0] == "-l"]
        assert [d[1] for d in found_pbs if d[0] == "-N"] == [spec.name]
        assert f"walltime={spec.walltime}" in asked
        node = spec.per_node  # PBS sizes every chunk: its cgroups hook confines the job to what it asks
        chunk = [r for r in asked if r.startswith("select=")][0].split(":")
        assert chunk[0] == f"select={spec.nodes}" and chunk[1:4] == [
            f"ncpus={node.cpus}", f"mem={resources.pbs_size(node.memory_mi)}", "mpiprocs=1"]
        assert [d[1] for d in found_pbs if d[0] == "-q"] == ([spec.queue] if spec.queue else [])


def expected_args(spec: JobSpec) -> list[str]:
    etcd = ["--rdzv-backend", "etcd-v2", "--rdzv-endpoint", spec.etcd_endpoint] if spec.rdzv == "etcd" else []
    return ["run", *etcd, "--", *spec.command]


def run_job(text: str, tmp: Path, locale: str, work: str = "work",
            gpus: bool = True) -> tuple[subprocess.CompletedProcess, dict[str, Path]]:
    """Run a job script the way a batch node would: in the submit directory (``tmp/work``),
    with the scheduler's variables set and the stubs (only) on PATH; a job that asked for
    GPUs holds 4 of the node's 8 (manifest_stubs' model; test_hpc_runtimes checks which
    reach torchpod)."""
    where = {k: tmp / k for k in ("bin", "home", "job")}
    where["work"] = tmp / work
    for path in where.values():
        path.mkdir()
    where["log"], where["mark"] = tmp / "calls.log", tmp / "MARK"
    stubs.install(where["bin"], where["log"])
    nodefile = where["job"] / "nodefile"
    nodefile.write_text("n0\nn1\n")
    script = where["job"] / "job.sh"
    script.write_bytes(text.encode("utf-8"))
    work = stubs.realpath(where["work"])
    env = stubs.job_env(
        where["bin"], where["log"], HOME=str(where["home"]), LC_ALL=locale, MARK=str(where["mark"]),
        SLURM_JOB_ID="7", SLURM_JOB_NAME="train", SLURM_JOB_NODELIST="n[0-1]", SLURM_JOB_NUM_NODES="2",
        SLURM_SUBMIT_DIR=work, PBS_JOBID="7.pbs", PBS_O_WORKDIR=work, PBS_NODEFILE=str(nodefile),
        PBS_ENVIRONMENT="PBS_BATCH", LSB_JOBID="7", LSB_DJOB_HOSTFILE=str(nodefile), LSB_MCPU_HOSTS="n0 1 n1 1",
        STUB_NODE_GPUS=stubs.NODE_GPUS, **({"STUB_JOB_GPUS": stubs.JOB_GPUS} if gpus else {}))
    try:
        proc = subprocess.run(["/bin/bash", str(script)], cwd=work, env=env, capture_output=True,
                              timeout=HANG_GUARD)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the job script ran past {HANG_GUARD} s")
    return proc, where


def expected_mounts(spec: JobSpec, work: str, nodefile: str) -> set[tuple[str, str]]:
    out = {(work, "/workspace"), *spec.fabric_binds(), *((v.source, v.path) for v in spec.volumes)}
    if spec.scheduler != "slurm":  # the launcher reads PBS_NODEFILE / LSB_DJOB_HOSTFILE inside the container
        out.add((nodefile, nodefile))
    return out


def check_calls(spec: JobSpec, calls: list[stubs.Call], where: dict[str, Path]) -> None:
    names = [c.name for c in calls]
    assert stubs.NOT_FOUND not in names, f"the script ran a command nobody asked for: {calls}"
    assert stubs.ERROR not in names, f"a stub refused its command line: {calls}"
    runtime = PROGRAM[spec.runtime]
    allowed = {FAN_OUT[spec.scheduler], "torchpod", stubs.ENV_RECORD, stubs.ENVIRON_RECORD} | \
        ({runtime} if runtime else set())
    assert set(names) <= allowed, f"unexpected programs ran: {names}"
    assert FAN_OUT[spec.scheduler] in names and (runtime is None or runtime in names), names
    tp = [c for c in calls if c.name == "torchpod"]
    assert len(tp) == NODES, f"torchpod ran {len(tp)} times on {NODES} nodes: {calls}"  # once per node
    assert all(list(t.args) == expected_args(spec) for t in tp), tp
    # what the launcher reads must reach it inside the container (docker and podman-hpc start
    # with only the variables they are handed)
    preset, job_id, nodefile, hostfile = next(c for c in calls if c.name == stubs.ENV_RECORD).args
    # unset, or blank where the runtime hands an unset name over as NAME= (enroot's --env NAME),
    # which torchpod reads as unset (tests/unit/torchpod/test_contract.py)
    assert preset in ((spec.preset,) if spec.preset else ("<unset>", "")), f"torchpod saw TORCHPOD_PRESET={preset!r}"
    if spec.scheduler == "slurm":
        assert job_id == "7", f"torchpod saw SLURM_JOB_ID={job_id!r}"
    elif spec.scheduler == "lsf":
        assert hostfile == str(where["job"] / "nodefile"), f"torchpod saw LSB_DJOB_HOSTFILE={hostfile!r}"
    else:
        assert nodefile == str(where["job"] / "nodefile"), f"torchpod saw PBS_NODEFILE={nodefile!r}"
    images = image_words(spec, calls)
    assert all(i == spec.image for i in images), f"image words {images!r}, expected {spec.image!r}"
    for run in (c for c in calls if c.name == "docker" and c.args[:1] == ("run",)):  # as the submitting user
        assert run.args[run.args.index("--user") + 1] == f"{os.getuid()}:{os.getgid()}", run.args
    if runtime:
        assert images, f"no image reached {runtime}: {calls}"
        carriers = [c for c in calls if c.name == ("srun" if spec.runtime == "enroot" and spec.scheduler == "slurm"
                                                   else runtime) and stubs.mounts(c)]
        work, nodefile = stubs.realpath(where["work"]), str(where["job"] / "nodefile")
        assert carriers and all(set(stubs.mounts(c)) == expected_mounts(spec, work, nodefile) for c in carriers), \
            [stubs.mounts(c) for c in carriers]


def image_words(spec: JobSpec, calls: list[stubs.Call]) -> list[str]:
    """The image reference each runtime call names, read back to the form the user gave."""
    out = []
    for c in calls:
        if c.name == "apptainer" and c.args[0] == "pull":
            out.append(c.args[-1].removeprefix("docker://"))
        elif c.name == "enroot" and c.args[0] == "import":
            out.append(c.args[-1].removeprefix("docker://").replace("#", "/", 1))
        elif c.name in ("docker", "podman-hpc"):
            words = run_operands(c)
            out.append(words[0] if words else "")
    return out


def run_operands(call: stubs.Call) -> list[str]:
    valued = {"-e", "--env", "--network", "--ipc", "-v", "--volume", "-w", "--workdir", "--name", "--shm-size",
              "--ulimit", "--gpus", "--device", "--cap-add", "--user", "-u", "--label", "--entrypoint"}
    return stubs.operands(stubs.Call(call.name, call.args[1:]), valued)


def check_hpc(spec: JobSpec, locale: str) -> None:
    """The property, for one request: refused in one line, or run exactly as asked."""
    try:
        outputs = render(spec)
    except InputError as exc:
        one_line(exc)
        return
    assert not any("\x00" in a for a in spec.command), "an argument with NUL was accepted; no argv can carry it"
    assert len(outputs) == 1
    text = outputs[0].text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        pytest.fail(f"rendered a file that cannot be written as UTF-8 (refuse it in one line instead): {exc}")
    if outputs[0].name.endswith(".yaml"):  # a SkyPilot task: YAML whose `run` is bash
        check_skypilot(check(spec), text, locale)
        return
    assert text.split("\n", 1)[0] in ("#!/bin/bash", "#!/usr/bin/env bash")
    comments_are_ascii(text)
    spec = check(spec)
    check_directives(spec, text)
    with tempfile.TemporaryDirectory(prefix="torchpod-job-") as tmp:
        proc, where = run_job(text, Path(tmp), locale, gpus=spec.gpus_per_node > 0)
        calls = stubs.read_log(where["log"])
        assert proc.returncode == 0 and proc.stderr == b"", (proc.returncode, proc.stderr, calls)
        check_calls(spec, calls, where)
        assert not where["mark"].exists(), "the script ran code from a value (the marker file exists)"
        made = {p.name for p in where["work"].iterdir()}
        own = {runtimes.image_file(spec, "sif"), runtimes.image_file(spec, "sqsh"),
               runtimes.image_file(spec, "enroot-rc")}
        assert made <= own, f"stray files: {made}"  # no .part
        assert not any(where["home"].iterdir()), "files appeared in HOME"
        assert {p.name for p in Path(tmp).iterdir()} == {"bin", "work", "home", "job", "calls.log"}


def check_skypilot(spec: JobSpec, text: str, locale: str) -> None:
    """The task parses to exactly the object built, every comment is printable ASCII, and its
    ``run``, executed by bash as SkyPilot does on every node, hands torchpod exactly the argv."""
    comments_are_ascii(text)
    docs = list(yaml.safe_load_all(text))
    assert docs == [hpc.skypilot_task(spec)], docs
    task = docs[0]
    assert (task["name"], task["num_nodes"]) == (spec.name, spec.nodes)
    assert task["resources"]["image_id"] == "docker:" + spec.image
    assert task["resources"].get("accelerators") == (f"{hpc.SKYPILOT_GPU}:{spec.gpus_per_node}"
                                                     if spec.gpus_per_node else None)
    with tempfile.TemporaryDirectory(prefix="torchpod-sky-") as tmp:
        proc, where = run_job("#!/bin/bash\n" + task["run"] + "\n", Path(tmp), locale)
        calls = stubs.read_log(where["log"])
        assert proc.returncode == 0 and proc.stderr == b"", (proc.returncode, proc.stderr, calls)
        assert [c.name for c in calls] == ["torchpod", stubs.ENV_RECORD, stubs.ENVIRON_RECORD], calls
        assert list(calls[0].args) == expected_args(spec)
        assert calls[1].args[0] == (spec.preset or "<unset>")
        assert not where["mark"].exists(), "the task's run executed code from a value (the marker file exists)"
        assert not any(where["work"].iterdir()) and not any(where["home"].iterdir())


# ---- HPC: hostile argv, every scheduler x runtime -------------------------------------------------

FABRIC = st.sampled_from([("", ""), (EFA, ""), (SLINGSHOT, "/opt/site/aws-ofi-nccl/lib")])
ETCD = st.sampled_from(["", "etcd.example.com:2379", "10.0.0.5:2379"])


@st.composite
def hpc_request(draw, scheduler: str, runtime: str, hostile_field: str | None = None) -> JobSpec:
    preset, site_lib = draw(FABRIC)
    endpoint = draw(ETCD)
    fields = dict(scheduler=scheduler, runtime=runtime, nodes=draw(st.integers(1, 3)), image=IMAGE,
                  command=draw(ARGV), name=draw(st.sampled_from(["train", "ddp-2"])),
                  gpus_per_node=draw(st.sampled_from([0, 4])), preset=preset, site_lib=site_lib,
                  etcd_endpoint=endpoint, queue=draw(st.sampled_from(["", "gpu_q.1"])),
                  walltime=draw(st.sampled_from(["01:00:00", "12:30:00"])),
                  cpus_per_node=draw(st.sampled_from([0, 2, 96])),
                  memory_per_node=draw(st.sampled_from(["", "1536Mi", "64Gi", "2Ti"])))
    if runtime != "none":  # a host path bound into the container (a job without one refuses it)
        fields["volume"] = draw(st.sampled_from([(), ("hostpath:/scratch/ds:/data:ro",),
                                                 ("hostpath:/scratch/a@b:/a", "hostpath:/b+c:/b:ro")]))
    if hostile_field == "site_lib":
        fields.update(preset=SLINGSHOT, site_lib="/" + draw(TEXT))
    elif hostile_field == "etcd_endpoint":
        fields["etcd_endpoint"] = draw(st.one_of(TEXT.map(lambda t: t + ":2379"), TEXT.map(lambda t: "etcd:" + t)))
    elif hostile_field == "image":
        fields["image"] = draw(st.one_of(TEXT.map(lambda t: IMAGE + t), TEXT.map(lambda t: "registry.example.com/"
                                                                              "t/p:" + t), TEXT))
    elif hostile_field == "volume":
        fields["volume"] = (draw(st.one_of(TEXT.map(lambda t: "hostpath:/" + t + ":/data"),
                                           TEXT.map(lambda t: "hostpath:/d:/" + t), TEXT)),)
    elif hostile_field == "env":  # a hostile value under a good name, or a hostile pair
        fields["env"] = (draw(st.one_of(TEXT.map(lambda t: "NOTE=" + t), TEXT)),)
    elif hostile_field:
        fields[hostile_field] = draw(TEXT)
    fields["rdzv"] = "etcd" if fields["etcd_endpoint"] else "c10d"
    return JobSpec(**fields)


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
@settings(deadline=None, max_examples=20, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), locale=LOCALE)
def test_any_argv_reaches_torchpod_exactly(scheduler, runtime, data, locale):
    check_hpc(data.draw(hpc_request(scheduler, runtime)), locale)


HOSTILE_FIELDS = ["image", "site_lib", "queue", "name", "etcd_endpoint", "walltime", "memory_per_node", "env",
                  "account", "volume", "qos", "constraint", "reservation"]


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
@settings(deadline=None, max_examples=10, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), locale=LOCALE, field=st.sampled_from(HOSTILE_FIELDS))
def test_any_option_value_is_refused_or_carried_exactly(scheduler, runtime, data, locale, field):
    check_hpc(data.draw(hpc_request(scheduler, runtime, field)), locale)


# One example per class of value that would run code or break a file if pasted into one.
ARGV_CASES = {
    "newline escapes the header": ("train.py", "x\ntouch P\n#"),
    "newline then a builtin": ("train.py", '\n: >"$MARK"\n#'),
    "pbsdsh: command substitution": ("train.py", '$(: >"$MARK")'),
    "pbsdsh: $HOME expanded": ("train.py", "$HOME"),
    "pbsdsh: $5 unbound": ("train.py", "$5"),
    "double quotes and backslashes": ("train.py", '"\\"; : >"$MARK"; "'),
    "single quote": ("train.py", "it's"),
    "CR, U+2028/2029, U+0085": ("train.py", "a\rb\u2028c\u2029d\x85e"),
    "backquotes": ("train.py", '`: >"$MARK"`'),
    "empty word and dashes": ("train.py", "", "--", "-x"),
}


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
@pytest.mark.parametrize("case", list(ARGV_CASES))
def test_hostile_argv_example(scheduler, runtime, case):
    check_hpc(JobSpec(scheduler=scheduler, runtime=runtime, nodes=2, image=IMAGE, command=ARGV_CASES[case]), "C")


SITE_LIBS = ["/opt/ofi;touch P;#", '/opt/$(: >"$MARK")', "/srv/:rocm/lib", "/opt/a,b", "/opt/a:b", "/opt/x\nls",
             "/opt/a b"]


@pytest.mark.parametrize("scheduler,runtime", [c for c in COMBOS if c[1] != "none"])
@pytest.mark.parametrize("site_lib", SITE_LIBS)
def test_hostile_site_lib_example(scheduler, runtime, site_lib):
    check_hpc(JobSpec(scheduler=scheduler, runtime=runtime, nodes=2, image=IMAGE, gpus_per_node=4,
                      preset=SLINGSHOT, site_lib=site_lib, command=("train.py",)), "C")


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
@pytest.mark.parametrize("image", [IMAGE + "\ntouch P", "registry.example.com/t/p:1 --privileged",
                                   "registry.example.com/t/p:1;ls", "registry.example.com/t/p:$(ls)"])
def test_hostile_image_example(scheduler, runtime, image):
    check_hpc(JobSpec(scheduler=scheduler, runtime=runtime, nodes=2, image=image, command=("train.py",)), "C")


@pytest.mark.parametrize("scheduler,runtime", [c for c in COMBOS if c[1] != "none" and c[0] != "skypilot"])
@pytest.mark.parametrize("work", ["sub,mit", "sub:mit"])
def test_a_submit_directory_that_would_split_a_bind_stops_the_job_before_anything_runs(scheduler, runtime, work,
                                                                                          tmp_path):
    (out,) = render(JobSpec(scheduler=scheduler, runtime=runtime, nodes=2, image=IMAGE, command=("train.py",)))
    proc, where = run_job(out.text, tmp_path, "C.UTF-8", work=work)
    err = proc.stderr.decode().strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and "which split a container bind" in err[0], err
    assert stubs.read_log(where["log"]) == []  # no pull, no launch


@pytest.mark.parametrize("scheduler,runtime", COMBOS)
def test_nul_in_an_argument_is_refused(scheduler, runtime):
    with pytest.raises(InputError) as exc:
        render(JobSpec(scheduler=scheduler, runtime=runtime, nodes=2, image=IMAGE, command=("train.py", "a\x00b")))
    one_line(exc.value)


# ---- Kubernetes: any argv and option values --------------------------------------------------------


@st.composite
def kube_request(draw) -> JobSpec:
    scheduler = draw(st.sampled_from(KUBE))
    fields = dict(scheduler=scheduler, nodes=draw(st.integers(2, 3)), image=IMAGE, command=draw(ARGV),
                  gpus_per_node=draw(st.sampled_from([0, 8])), queue=draw(st.sampled_from(["", "q1"])),
                  cpus_per_node=draw(st.sampled_from([0, 3, 128])),
                  memory_per_node=draw(st.sampled_from(["", "96Gi", "1Ti"])))
    rdzv = draw(st.sampled_from(["c10d", "etcd-endpoint", "etcd-server"]))
    if rdzv == "etcd-endpoint":
        fields.update(rdzv="etcd", etcd_endpoint="etcd.example.com:2379")
    elif rdzv == "etcd-server":
        fields.update(rdzv="etcd", etcd_server=True)
    hostile = draw(st.sampled_from([None] * 6 + ["image", "name", "namespace", "project", "queue", "etcd_endpoint",
                                    "rdma_resource", "preset", "memory_per_node", "env", "service_account",
                                    "image_pull_secret", "volume", "node_selector", "toleration", "workdir",
                                    "priority_class"]))
    if hostile == "image":
        fields["image"] = draw(st.one_of(TEXT.map(lambda t: IMAGE + t), TEXT))
    elif hostile == "etcd_endpoint":
        fields.update(rdzv="etcd", etcd_server=False, etcd_endpoint=draw(TEXT.map(lambda t: t + ":2379")))
    elif hostile == "rdma_resource":
        fields.update(rdma="device-plugin", rdma_resource=draw(TEXT.map(lambda t: "rdma/" + t)))
    elif hostile == "env":
        fields["env"] = (draw(st.one_of(TEXT.map(lambda t: "NOTE=" + t), TEXT)),)
    elif hostile in ("volume", "node_selector", "toleration"):
        fields[hostile] = (draw(st.one_of(TEXT, TEXT.map(lambda t: "pvc:" + t + ":/data"),
                                          TEXT.map(lambda t: "k=" + t), TEXT.map(lambda t: t + ":NoSchedule"))),)
    elif hostile == "workdir":
        fields["workdir"] = draw(st.one_of(TEXT, TEXT.map(lambda t: "/" + t)))
    elif hostile:
        fields[hostile] = draw(TEXT)
    return JobSpec(**fields)


def containers(doc: dict) -> list[dict]:
    """Every training container in a job document (a TrainJob's trainer stands for its one)."""
    spec = doc["spec"]
    if doc["kind"] == "TrainJob":
        return [{"command": spec["trainer"]["command"], "args": spec["trainer"]["args"],
                 "resources": spec["trainer"]["resourcesPerNode"]}]
    if doc["kind"] == "Job":
        return [t["template"]["spec"]["containers"][0] for t in spec["tasks"]]
    if doc["kind"] == "LeaderWorkerSet":
        return [spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]]
    if doc["kind"] == "JobSet":
        return [r["template"]["spec"]["template"]["spec"]["containers"][0] for r in spec["replicatedJobs"]]
    return [r["template"]["spec"]["containers"][0] for r in spec["pytorchReplicaSpecs"].values()]


def container_args(doc: dict) -> list[list[str]]:
    """The args of every training container in a job document."""
    return [c["args"] for c in containers(doc)]


def check_pod_resources(spec: JobSpec, doc: dict) -> None:
    """Every training container requests and is limited to the node's CPUs and memory (never
    BestEffort), requests equal to limits (Guaranteed)."""
    node = spec.per_node
    for c in containers(doc):
        asked = c["resources"]
        assert asked["requests"] == asked["limits"], asked
        assert (asked["requests"]["cpu"], asked["requests"]["memory"]) == (
            str(node.cpus), resources.kube_quantity(node.memory_mi)), asked


def check_kube(spec: JobSpec) -> None:
    try:
        outputs = render(spec)
    except InputError as exc:
        one_line(exc)
        return
    assert not any("\x00" in a for a in spec.command), "an argument with NUL was accepted"
    spec = check(spec)
    files = {o.name: o.text for o in outputs}
    yaml_name = f"{spec.name}.{spec.scheduler}.yaml"
    assert set(files) == {yaml_name} | ({f"{spec.name}.runai.sh"} if spec.scheduler == "runai" else set())
    for text in files.values():
        text.encode("utf-8")
        comments_are_ascii(text)
    docs = list(yaml.safe_load_all(files[yaml_name]))
    kinds = (["Service", "Pod"] if spec.etcd_server else []) + [KINDS[spec.scheduler]]
    assert [d["kind"] for d in docs] == kinds
    assert docs == kube.objects(spec), "the YAML does not parse back to the objects that were built"
    job = docs[-1]
    assert (job["metadata"]["name"], job["metadata"]["namespace"]) == (spec.name, spec.namespace)
    etcd_by_operator = spec.scheduler == "kubeflow-elastic"  # elasticPolicy carries the etcd endpoint
    want = ["run", "--", *spec.command] if etcd_by_operator else expected_args(spec)
    if spec.scheduler == "jobset":  # no JobSet pod can tell its Job's parallelism: the launcher is told
        want = ["run", "--nnodes", str(spec.nodes), *want[1:]]
    assert all(args == want for args in container_args(job)), container_args(job)
    # the command is named: torchpod runs whatever the image's ENTRYPOINT (an NGC image's banner script)
    assert all(c["command"] == ["torchpod"] for c in containers(job)), [c.get("command") for c in containers(job)]
    check_pod_resources(spec, job)
    if spec.scheduler == "runai":
        check_runai_script(spec, files[f"{spec.name}.runai.sh"], want)


def check_runai_script(spec: JobSpec, text: str, want: list[str]) -> None:
    shell = {"#!/bin/sh": "/bin/sh", "#!/bin/bash": "/bin/bash", "#!/usr/bin/env bash": "/bin/bash"}
    first = text.split("\n", 1)[0]
    assert first in shell, f"unexpected interpreter line {first!r}"
    with tempfile.TemporaryDirectory(prefix="torchpod-runai-") as tmp:
        bindir, log, mark = Path(tmp, "bin"), Path(tmp, "calls.log"), Path(tmp, "MARK")
        stubs.install(bindir, log)
        script = Path(tmp, "submit.sh")
        script.write_bytes(text.encode("utf-8"))
        try:
            proc = subprocess.run([shell[first], str(script)], cwd=tmp, capture_output=True, timeout=HANG_GUARD,
                                  env={"PATH": str(bindir), "HOME": tmp, "MARK": str(mark), "LC_ALL": "C"})
        except subprocess.TimeoutExpired:
            pytest.fail(f"the Run:ai script ran past {HANG_GUARD} s")
        calls = stubs.read_log(log)
        assert proc.returncode == 0 and proc.stderr == b"", (proc.returncode, proc.stderr, calls)
        assert [c.name for c in calls] == ["runai"], calls
        args = list(calls[0].args)
        assert args[:4] == ["training", "pytorch", "submit", spec.name]
        flags = dict(zip(args[4:args.index("--"):2], args[5:args.index("--"):2]))
        assert (flags["-p"], flags["-i"]) == (spec.project, spec.image)
        node, memory = spec.per_node, resources.kube_quantity(spec.per_node.memory_mi)
        assert [flags[f"--cpu-{what}-{how}"] for what in ("core", "memory") for how in ("request", "limit")] == [
            str(node.cpus), str(node.cpus), memory, memory]
        assert args[args.index("--") - 1] == "--command"  # torchpod replaces the image's ENTRYPOINT
        assert args[args.index("--") + 1:] == ["torchpod", *want]
        assert not mark.exists()


@settings(deadline=None, max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(spec=kube_request())
def test_any_kubernetes_request_parses_to_the_intended_documents(spec):
    check_kube(spec)


YAML_CASES = {
    "extra privileged Pod": ("train.py", "x\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
                             "  containers: [{name: c, image: i, securityContext: {privileged: true}}]\n"),
    "CR ends the comment": ("train.py", "x\rkind: Pod"),
    "U+2028 ends the comment": ("train.py", "x\u2028kind: Pod"),
    "U+2029 ends the comment": ("train.py", "x\u2029kind: Pod"),
    "U+0085 ends the comment": ("train.py", "x\x85kind: Pod"),
}


@pytest.mark.parametrize("scheduler", KUBE)
@pytest.mark.parametrize("case", list(YAML_CASES))
def test_hostile_yaml_example(scheduler, case):
    check_kube(JobSpec(scheduler=scheduler, nodes=2, image=IMAGE, command=YAML_CASES[case]))


@pytest.mark.parametrize("field,value", [("project", "team-a\ntouch P"), ("project", "Team A!"),
                                         ("image", IMAGE + "\nkind: Pod"), ("namespace", "n" * 64)])
def test_hostile_runai_option_example(field, value):
    fields = dict(scheduler="runai", nodes=2, image=IMAGE, command=("train.py",))
    check_kube(JobSpec(**{**fields, field: value}))
