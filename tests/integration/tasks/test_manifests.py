"""`invoke manifests` for real: it writes the files render() makes, keeps the user's
quoting after `--`, writes nothing on bad input, and every HPC script is valid bash."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.render import render
from torchpod_toolkit.manifests.spec import HPC, RUNTIMES, JobSpec

from paths import ROOT
from tasks_cli import invoke

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"


def test_invoke_manifests_writes_what_render_makes(tmp_path):
    out = tmp_path / "out"
    proc = invoke("manifests", "--scheduler", "kubeflow", "--nodes", "3", "--image", IMAGE, "--out", str(out),
                  "--", "train.py", "--note", "two words")
    assert proc.returncode == 0, proc.stderr
    want = render(JobSpec("kubeflow", 3, IMAGE, ("train.py", "--note", "two words")))
    assert sorted(p.name for p in out.iterdir()) == sorted(o.name for o in want)
    for o in want:
        assert (out / o.name).read_text() == o.text
    assert "- two words" in (out / "train.kubeflow.yaml").read_text()  # one argument, as quoted


@pytest.mark.parametrize("args, needle", [
    (["--scheduler", "volcano", "--nodes", "0"], "--nodes='0'"),
    (["--scheduler", "volcano", "--nodes", "2", "--image", "torchpod/pytorch"], "has no tag"),
    (["--scheduler", "kubeflow", "--nodes", "2", "--image", IMAGE, "--rdzv", "etcd"], "--rdzv etcd needs"),
    (["--scheduler", "trainer", "--nodes", "2", "--image", IMAGE, "--rdma", "device-plugin"], "--rdma-resource"),
])
def test_bad_input_writes_nothing(args, needle, tmp_path):
    out = tmp_path / "out"
    proc = invoke("manifests", *args, "--out", str(out), "--", "train.py")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stderr
    assert not out.exists()


# every runtime each batch kind takes (a kind that runs the image itself, SkyPilot, takes none)
@pytest.mark.parametrize(("scheduler", "runtime"), [
    (s, r) for s in HPC for r in RUNTIMES if not jobs.BY_NAME[s].runtimes or r in jobs.BY_NAME[s].runtimes])
def test_hpc_script_is_valid_bash(scheduler, runtime, tmp_path):
    (o,) = render(JobSpec(scheduler, 2, IMAGE, ("train.py", "--name", "it's"), runtime=runtime,
                          preset="hpe-slingshot-gh200", gpus_per_node=4,
                          site_lib="/home/user/aws-ofi-nccl/lib" if runtime != "none" else ""))
    path = tmp_path / o.name
    path.write_text(o.text)
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + o.text


@pytest.mark.parametrize("nodes", ["abc", "2.5", "1e11"])
def test_a_count_that_is_not_a_whole_number_is_one_line(nodes, tmp_path):
    proc = invoke("manifests", "--scheduler", "slurm", "--nodes", nodes, "--image", IMAGE, "--out",
                  str(tmp_path / "out"), "--", "train.py")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and f"--nodes={nodes!r}" in lines[0], proc.stderr
    assert not (tmp_path / "out").exists()


def test_out_at_an_existing_file_is_one_line(tmp_path):
    target = tmp_path / "f"
    target.write_text("mine\n")
    proc = invoke("manifests", "--scheduler", "slurm", "--nodes", "2", "--image", IMAGE, "--out", str(target),
                  "--", "train.py")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "is an existing file" in lines[0], proc.stderr
    assert target.read_text() == "mine\n"


def test_a_hand_edited_script_is_kept_unless_forced_and_no_stray_directory_is_made(tmp_path):
    args = ("manifests", "--scheduler", "slurm", "--nodes", "2", "--image", IMAGE,
            "--out", str(tmp_path / "x" / "a" / ".." / ".." / "jobs"))
    assert invoke(*args, "--", "train.py").returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs"]
    script = tmp_path / "jobs" / "train.slurm.sbatch"
    script.write_text(script.read_text() + "# my edit\n")
    proc = invoke(*args, "--", "train.py")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and f"kept {script}" in lines[0], proc.stderr
    assert script.read_text().endswith("# my edit\n")
    proc = invoke(*args, "--force", "--", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert script.read_text() == render(JobSpec("slurm", 2, IMAGE, ("train.py",)))[0].text


def test_a_script_argument_with_a_newline_reaches_no_comment(tmp_path):
    proc = invoke("manifests", "--scheduler", "slurm", "--nodes", "2", "--image", IMAGE, "--out", str(tmp_path),
                  "--", "train.py", "x\ntouch P\n#")
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "train.slurm.sbatch").read_text()
    assert "\ntouch P\n" not in text and "$'x\\ntouch P\\n#'" in text


@pytest.mark.parametrize("scheduler", jobs.NAMES)
def test_without_out_a_job_prints_what_its_consumer_reads_from_a_pipe(scheduler, tmp_path):
    """A Kubernetes kind prints one YAML stream whose documents are the job's objects (what
    `kubectl apply -f -` reads: comments and all); an HPC kind its script alone, valid bash."""
    proc = invoke("manifests", "--scheduler", scheduler, "--nodes", "2", "--image", IMAGE, "--", "train.py")
    assert proc.returncode == 0, proc.stderr
    outputs = render(JobSpec(scheduler, 2, IMAGE, ("train.py",)), piped=True)
    kube = jobs.BY_NAME[scheduler].kube
    (main,) = [o for o in outputs if o.name.endswith(".yaml")] if kube else outputs[:1]
    assert proc.stdout == main.text and "###" not in proc.stdout
    if kube:
        docs = list(yaml.safe_load_all(proc.stdout))
        assert docs and all(isinstance(d, dict) and d["apiVersion"] and d["kind"] for d in docs), docs
    elif scheduler != "skypilot":
        path = tmp_path / "job.sh"
        path.write_text(proc.stdout)
        assert subprocess.run(["bash", "-n", str(path)]).returncode == 0
    others = [o.name for o in outputs if o is not main]  # Run:ai's CLI line: named on stderr, written with --out
    assert all(f"also {name}: written with --out DIR" in proc.stderr for name in others)
    # what a user must see reaches stderr too: the script nothing mounts, on a Kubernetes kind
    assert ("torchpod: Script: train.py is read from" in proc.stderr) is kube, proc.stderr
    # and the same when the files go into --out DIR: never only a comment in a file
    written = invoke("manifests", "--scheduler", scheduler, "--nodes", "2", "--image", IMAGE, "--out",
                     str(tmp_path / "out"), "--", "train.py")
    assert written.returncode == 0, written.stderr
    assert ("torchpod: Script: train.py is read from" in written.stderr) is kube, written.stderr


@pytest.mark.parametrize("task", ["manifests", "jobs.manifests"])
def test_a_repeated_flag_keeps_every_value_under_either_task_name(task):
    proc = invoke(task, "--scheduler", "slurm", "--nodes", "2", "--image", IMAGE, "--runtime", "none",
                  "--env", "NCCL_DEBUG=INFO", "--env", "NCCL_IB_HCA=mlx5_0,mlx5_1", "--", "train.py")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == render(JobSpec("slurm", 2, IMAGE, ("train.py",), runtime="none",
                                         env=("NCCL_DEBUG=INFO", "NCCL_IB_HCA=mlx5_0,mlx5_1")), piped=True)[0].text


def _first_job_commands() -> list[tuple[str, list[str]]]:
    """(page, argv) of the `invoke manifests` command each first-job page tells a user to run."""
    import shlex

    out = []
    for page in sorted((ROOT / "docs" / "first-job").glob("*.md")):
        text = page.read_text(encoding="utf-8").replace("\\\n", " ")
        (line,) = [ln for ln in text.splitlines() if ln.startswith("invoke manifests ")]
        out.append((page.name, shlex.split(line)[1:]))
    return out


@pytest.mark.parametrize("page, argv", _first_job_commands(), ids=[p for p, _ in _first_job_commands()])
def test_each_first_job_page_renders_the_files_it_names(page, argv, tmp_path):
    """The command runs as written (with -o pointing here) and writes the file the page submits."""
    at = argv.index("-o")
    argv[at + 1] = str(tmp_path / "job")
    proc = invoke(*argv)
    assert proc.returncode == 0, proc.stderr
    text = (ROOT / "docs" / "first-job" / page).read_text(encoding="utf-8")
    written = sorted(p.name for p in (tmp_path / "job").iterdir())
    assert written and all(name in text for name in written if not name.endswith(".runai.sh")), (written, page)


def test_submit_writes_the_job_then_runs_its_submitter_and_exits_with_its_status(tmp_path):
    import os

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f"#!/bin/sh\ncat > {tmp_path}/got\necho 'Submitted batch job 77'\nexit ${{STUB_EXIT:-0}}\n")
    sbatch.chmod(0o755)
    args = ("manifests", "-s", "slurm", "-n", "2", "-i", IMAGE, "-o", str(tmp_path / "job"), "--submit", "--",
            "train.py")
    path = f"{bin_dir}:{os.environ['PATH']}"
    done = invoke(*args, PATH=path)
    assert done.returncode == 0, done.stderr
    assert "submitted: 77\nwatch: squeue -j 77\n" in done.stdout
    assert (tmp_path / "got").read_text() == (tmp_path / "job" / "train.slurm.sbatch").read_text()
    failed = invoke(*args, PATH=path, STUB_EXIT="3")
    assert failed.returncode == 3 and "sbatch exited 3: the job was not submitted" in failed.stderr


def test_submit_without_out_is_one_line():
    done = invoke("manifests", "-s", "slurm", "-n", "2", "-i", IMAGE, "--submit", "--", "train.py")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "expected --out DIR too" in done.stderr


@pytest.mark.parametrize("args, says", [
    (("-s", "kubeflow", "--walltime", "01:00:00"), "--walltime=01:00:00: a kubeflow job has no place for it"),
    (("-s", "slurm", "--namespace", "default"), "--namespace=default: a slurm job has no place for it"),
    (("-s", "volcano", "--project", "team-a"), "--project=team-a: a volcano job has no place for it"),
])
def test_an_option_given_with_its_defaults_value_is_refused_where_the_kind_has_no_place_for_it(args, says):
    done = invoke("manifests", *args, "-n", "2", "-i", IMAGE, "--", "train.py")
    assert done.returncode == 2 and says in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_an_option_left_out_keeps_its_default():
    done = invoke("manifests", "-s", "slurm", "-n", "2", "-i", IMAGE, "--", "train.py")
    assert done.returncode == 0 and "#SBATCH --time=01:00:00\n" in done.stdout


@pytest.mark.parametrize("task, args, word", [
    ("manifests", ["-s", "volcano", "-i", IMAGE, "train.py", "--steps", "2"], "train.py"),
    ("jobs.manifests", ["--scheduler", "slurm", "--force", "--image", IMAGE, "--env=A=1", "train.py"], "train.py"),
    ("bench.rendezvous", ["-n", "2", "extra"], "extra"),
])
def test_a_command_typed_without_dashes_is_one_line_naming_the_word_and_the_fix(task, args, word, tmp_path):
    """invoke alone would say "No idea what 'train.py' is!": the line names the word, the task
    and where the word goes; options and their values (joined with = or not) are skipped."""
    proc = invoke(task, *args, "--out", str(tmp_path / "out"))
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"'{word}' is not an option of invoke {task}" in lines[0] and "goes after `--`" in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_a_line_with_dashes_or_a_second_task_is_not_refused_as_a_stray_word():
    """The check stops at `--`, and a word that names a task is invoke's own (two tasks on one line)."""
    assert "is not an option" not in invoke("manifests", "-s", "volcano", "-i", IMAGE, "--", "x.py").stderr
    assert "is not an option" not in invoke("manifests", "--help", "measurements", "--help").stderr
