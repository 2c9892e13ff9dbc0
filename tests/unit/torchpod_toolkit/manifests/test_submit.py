"""torchpod_toolkit.manifests.submit: `invoke manifests --submit` runs each kind's own
submitter on the written file (its standard-input form where it has one), reads the job's id
from what the submitter prints, and says how to watch it; a submitter that fails, prints no
id or is missing ends the run in one line with its status."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from torchpod.errors import RuntimeFailure
from torchpod_toolkit.manifests import jobs, submit
from torchpod_toolkit.manifests.spec import JobSpec, check

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"

# What each submitter prints when it queued a job: sbatch(1) ("Submitted batch job 45001";
# SchedMD's man page, Slurm 22.05), qsub(1B) (the job identifier, "123.server"; OpenPBS
# reference guide), bsub ("Job <1234> is submitted to queue <normal>."; IBM LSF 10.1 bsub).
PRINTED = {"slurm": ("Submitted batch job 45001\n", "45001", "squeue -j 45001"),
           "pbs": ("1234.pbs-server01\n", "1234.pbs-server01", "qstat 1234.pbs-server01"),
           "pbs-pals": ("88.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov\n",
                        "88.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov",
                        "qstat 88.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"),
           "lsf": ("Job <1234> is submitted to queue <normal>.\n", "1234", "bjobs 1234")}


def _spec(scheduler: str) -> JobSpec:
    where = {"namespace": "ml"} if jobs.kind(scheduler).kube else {}
    return check(JobSpec(scheduler, 2, IMAGE, ("train.py",), name="train", **where))


@pytest.mark.parametrize("scheduler", jobs.NAMES)
def test_every_kind_says_how_it_is_submitted_and_watched(scheduler, tmp_path):
    kind, spec = jobs.kind(scheduler), _spec(scheduler)
    how = submit.submission(kind, spec, tmp_path / f"train.{scheduler}.{kind.suffix}")
    if kind.piped:  # its stdin form: the file itself never named, so it cannot be the wrong one
        assert how.argv == kind.piped.split() and how.stdin == tmp_path / f"train.{scheduler}.{kind.suffix}"
    else:
        assert how.argv == ["sky", "launch", "--yes", "--cluster", "train", f"train.{scheduler}.{kind.suffix}"]
        assert how.stdin is None
    assert kind.watch and "{" not in submit.watch_line(kind, spec, "7")
    if kind.kube:
        assert submit.job_id(kind, spec, "whatever kubectl printed") == "ml/train"
        assert submit.watch_line(kind, spec, "ml/train").startswith("kubectl -n ml get ")
    elif scheduler in PRINTED:
        printed, ident, watch = PRINTED[scheduler]
        assert submit.job_id(kind, spec, printed) == ident
        assert submit.watch_line(kind, spec, ident) == watch
        assert submit.job_id(kind, spec, "sbatch: error: Batch job submission failed\n") is None


def _tool(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    tool = folder / name
    tool.write_text("#!/bin/sh\n" + body)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)


def test_submit_hands_the_file_to_sbatch_and_says_the_id_and_the_watch(tmp_path, capsys):
    job = tmp_path / "job"
    job.mkdir()
    path = job / "train.slurm.sbatch"
    path.write_text("#!/bin/bash\n#SBATCH --nodes=2\necho hi\n")
    _tool(tmp_path / "bin", "sbatch", f'pwd > {tmp_path}/cwd; cat > {tmp_path}/got; echo "Submitted batch job 42"\n')
    assert submit.submit(_spec("slurm"), path, {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}) == 0
    out = capsys.readouterr().out
    assert "submitted: 42\nwatch: squeue -j 42\n" in out
    assert (tmp_path / "got").read_text() == path.read_text()  # the file, on its stdin
    assert (tmp_path / "cwd").read_text().strip() == str(job)  # run in the submit directory


@pytest.mark.parametrize("body, code, says", [
    ("echo 'sbatch: error: invalid partition specified: gpu' >&2; exit 1\n", 1, "sbatch exited 1"),
    ("echo 'queued'\n", 1, "sbatch printed no job id"),
])
def test_a_submitter_that_fails_or_names_no_job_ends_with_its_status(body, code, says, tmp_path, capsys):
    path = tmp_path / "train.slurm.sbatch"
    path.write_text("#!/bin/bash\n")
    _tool(tmp_path / "bin", "sbatch", "cat >/dev/null; " + body)
    assert submit.submit(_spec("slurm"), path, {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}) == code
    out, err = capsys.readouterr()
    assert says in err and "submitted:" not in out


def test_a_missing_submitter_is_one_line_naming_it_and_the_file(tmp_path):
    path = tmp_path / "train.pbs.sh"
    path.write_text("#!/bin/bash\n")
    with pytest.raises(RuntimeFailure) as err:
        submit.submit(_spec("pbs"), path, {"PATH": str(tmp_path / "nothing-here")})
    message = str(err.value)
    assert "\n" not in message and message.startswith("--submit: qsub is not on PATH") and str(path) in message
