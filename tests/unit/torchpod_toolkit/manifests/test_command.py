"""torchpod_toolkit.manifests.command: what `invoke manifests` does with its options, called
as the task calls it. Printed without --out (the job on stdout, its notes on stderr),
written with it (an edited file kept unless --force), --submit refused without a folder,
every check before a file is written; --refresh renders every example again and refuses one
it cannot read, naming it, before anything is written."""

from __future__ import annotations

import io
import os

import pytest
import yaml

from torchpod.errors import InputError
from torchpod_toolkit.manifests import command
from torchpod_toolkit.manifests.options import cli_options

IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
TASK_ONLY = {"out": "", "force": False, "submit": False, "refresh": False}  # the task's own flags


def _opts(**given):
    """The options as invoke hands them to the task: a repeatable one with none given is []."""
    return {**{name: [] if value is None else value for name, value, _ in cli_options()}, **TASK_ONLY,
            "scheduler": "jobset", "image": IMAGE, **given}


def _run(opts, argv=("train.py", "--epochs", "3")):
    out, err = io.StringIO(), io.StringIO()
    code = command.run(opts, list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_without_out_the_job_is_printed_and_its_notes_go_to_stderr():
    code, out, err = _run(_opts(nodes="3"))
    assert code == 0
    (job,) = [d for d in yaml.safe_load_all(out) if d and d.get("kind") == "JobSet"]
    assert job["spec"]["replicatedJobs"][0]["template"]["spec"]["completions"] == 3
    assert "--epochs" in out and err.startswith("torchpod: ")


def test_with_out_the_files_are_written_and_an_edited_one_kept_unless_forced(tmp_path):
    code, out, _ = _run(_opts(out=str(tmp_path)))
    job = tmp_path / "train.jobset.yaml"
    assert code == 0 and out.splitlines()[0] == f"wrote {job}"
    job.write_text(job.read_text() + "# edited\n")
    with pytest.raises(InputError, match="edited"):
        _run(_opts(out=str(tmp_path), nodes="4"))
    assert job.read_text().endswith("# edited\n")
    code, out, _ = _run(_opts(out=str(tmp_path), nodes="4", force=True))
    assert code == 0 and "# edited" not in job.read_text()


def test_submit_without_a_folder_is_refused_before_anything_is_rendered(monkeypatch):
    monkeypatch.setattr(command.render_mod, "render", lambda *a, **k: pytest.fail("rendered"))
    with pytest.raises(InputError, match="^--submit submits the file it writes; expected --out DIR too"):
        _run(_opts(submit=True))


@pytest.mark.parametrize("given, says", [({"nodes": "0"}, "--nodes"), ({"image": "Not An Image"}, "--image")])
def test_bad_options_are_one_error_and_nothing_is_written(tmp_path, given, says):
    out_dir = tmp_path / "out"
    with pytest.raises(InputError, match=says.replace("-", r"\-")):
        _run(_opts(out=str(out_dir), **given))
    assert not out_dir.exists()


def test_the_output_goes_where_the_standard_streams_are_at_the_call(capsys):
    code = command.run(_opts(), ["train.py"])
    captured = capsys.readouterr()
    assert code == 0 and "kind: JobSet" in captured.out and captured.err.startswith("torchpod: ")


def _example(folder, opts):
    out, err = io.StringIO(), io.StringIO()
    command.run({**opts, "out": str(folder)}, ["train.py"], out=out, err=err)


def test_refresh_renders_every_example_again_from_its_own_line(tmp_path):
    examples = tmp_path / "manifests"
    _example(examples / "slurm", _opts(scheduler="slurm"))
    _example(examples / "jobset", _opts(nodes="3"))
    (examples / "README.md").write_text("not a job\n")
    job = examples / "jobset" / "train.jobset.yaml"
    fresh = job.read_text()
    job.write_text(fresh.replace("completions: 3", "completions: 9"))  # stale beside its own line
    out = io.StringIO()
    command.refresh(examples, out=out)
    assert job.read_text() == fresh
    assert "wrote manifests/jobset/train.jobset.yaml" in out.getvalue().splitlines()
    assert "unchanged manifests/slurm/train.slurm.sbatch" in out.getvalue().splitlines()


@pytest.mark.parametrize("content, says", [
    (b"\xff\xfe not text", "not UTF-8 text"),
    (b"kind: JobSet\n", "Regenerate"),
])
def test_refresh_refuses_an_example_it_cannot_read_naming_it_before_writing_any(tmp_path, content, says):
    examples = tmp_path / "manifests"
    _example(examples / "jobset", _opts(nodes="3"))
    job = examples / "jobset" / "train.jobset.yaml"
    stale = job.read_text().replace("completions: 3", "completions: 9")
    job.write_text(stale)
    (examples / "zz").mkdir()
    (examples / "zz" / "bad.yaml").write_bytes(content)
    with pytest.raises(InputError, match=r"^manifests/zz/bad\.yaml[: ].*" + says) as refused:
        command.refresh(examples, out=io.StringIO())
    assert str(refused.value).count("bad.yaml") == 1  # named once
    assert job.read_text() == stale  # nothing written


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "a FIFO"),
    (lambda path: path.symlink_to("/dev/zero"), "a character device"),
])
def test_refresh_refuses_an_entry_that_is_not_a_regular_file_without_opening_it(tmp_path, make, says):
    """A FIFO among the examples is named in one line, never opened for reading (where it
    would wait for a writer for ever), and never skipped in silence; nothing is written."""
    examples = tmp_path / "manifests"
    _example(examples / "jobset", _opts(nodes="3"))
    job = examples / "jobset" / "train.jobset.yaml"
    stale = job.read_text().replace("completions: 3", "completions: 9")
    job.write_text(stale)
    (examples / "zz").mkdir()
    make(examples / "zz" / "odd.yaml")
    with pytest.raises(InputError, match=r"^manifests/zz/odd\.yaml[: ].*" + says) as refused:
        command.refresh(examples, out=io.StringIO())
    assert "\n" not in str(refused.value)
    assert job.read_text() == stale
