"""torchpod_toolkit.manifests.outfiles: a job's files are written all or none, a file already
there with other content (edited by hand) is kept and named unless forced, and anything not
a regular file in the way (a directory, a FIFO, a link, a huge file) is refused in one line
without being read whole; nothing is left behind, not even a stray directory."""

from __future__ import annotations

import os

import pytest

from torchpod.errors import InputError, RuntimeFailure, TorchpodError
from torchpod_toolkit.manifests import outfiles
from torchpod_toolkit.manifests.outfiles import Output


def _outputs(files: int = 1) -> list[Output]:
    """A job's files as render makes them: a script, and a manifest beside it for two."""
    outs = [Output("train.slurm.sbatch", "#!/bin/bash\n# a job script\ntorchpod run -- train.py\n"),
            Output("train.runai.yaml", "# a manifest\napiVersion: kubeflow.org/v1\nkind: PyTorchJob\n")]
    return outs[:files]


def test_write_puts_every_file_in_place_and_leaves_no_temporary(tmp_path):
    outs = _outputs(2)
    written = outfiles.write(tmp_path / "out", outs)
    assert [(p.name, changed) for p, changed in written] == [(o.name, True) for o in outs]
    assert sorted(os.listdir(tmp_path / "out")) == sorted(o.name for o in outs)


def test_identical_content_is_left_alone(tmp_path):
    outs = _outputs()
    outfiles.write(tmp_path, outs)
    before = os.stat(tmp_path / outs[0].name).st_mtime_ns
    assert [changed for _, changed in outfiles.write(tmp_path, outs)] == [False]
    assert os.stat(tmp_path / outs[0].name).st_mtime_ns == before


def test_a_hand_edited_file_is_kept_and_named_unless_forced(tmp_path):
    outs = _outputs(2)
    outfiles.write(tmp_path, outs)
    edited = tmp_path / outs[1].name
    edited.write_text("# my edits\n")
    (tmp_path / outs[0].name).unlink()
    with pytest.raises(InputError) as err:
        outfiles.write(tmp_path, outs)
    assert f"kept {edited}" in str(err.value) and "--force" in str(err.value)
    assert edited.read_text() == "# my edits\n"
    assert not (tmp_path / outs[0].name).exists()  # both or none
    outfiles.write(tmp_path, outs, force=True)
    assert edited.read_text() == outs[1].text


@pytest.mark.parametrize("make, kind", [("dir", "a directory"), ("fifo", "a FIFO (named pipe)"),
                                        ("symlink", "a symbolic link")])
def test_something_not_a_regular_file_in_the_way_is_refused_and_nothing_written(tmp_path, make, kind):
    outs = _outputs(2)
    target = tmp_path / outs[1].name
    {"dir": target.mkdir, "fifo": lambda: os.mkfifo(target),
     "symlink": lambda: target.symlink_to(tmp_path / "elsewhere")}[make]()
    with pytest.raises(InputError) as err:
        outfiles.write(tmp_path, outs, force=True)
    assert str(err.value).startswith(f"{target} is {kind}; expected a regular file") and "\n" not in str(err.value)
    assert not (tmp_path / outs[0].name).exists()


def test_a_binary_file_in_the_way_is_compared_as_bytes_and_kept(tmp_path):
    outs = _outputs()
    target = tmp_path / outs[0].name
    target.write_bytes(b"\xff\xfe" + outs[0].text.encode())  # not UTF-8: compared as bytes, kept all the same
    with pytest.raises(InputError, match="kept .* it exists with other content"):
        outfiles.write(tmp_path, outs)
    assert [changed for _, changed in outfiles.write(tmp_path, outs, force=True)] == [True]
    assert target.read_text() == outs[0].text


def test_out_at_a_file_or_under_one_is_one_line(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is an existing file; expected a directory"):
        outfiles.write(tmp_path / "f", _outputs())
    with pytest.raises(InputError, match="which is not a directory"):
        outfiles.write(tmp_path / "f" / "sub", _outputs())


def test_out_where_nothing_can_be_written_is_one_line():
    with pytest.raises(TorchpodError) as err:
        outfiles.write("/proc/torchpod-manifests", _outputs())
    assert "/proc" in str(err.value) and "\n" not in str(err.value)


def test_a_failed_rename_takes_back_the_files_already_moved(tmp_path, monkeypatch):
    outs = _outputs(2)
    calls = []
    real = os.replace

    def flaky(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(RuntimeFailure, match="No space left on device; nothing was written"):
        outfiles.write(tmp_path, outs)
    assert os.listdir(tmp_path) == []


def test_dot_dot_in_out_leaves_no_stray_directories(tmp_path):
    outfiles.write(tmp_path / "x" / "a" / ".." / "b" / ".." / ".." / "c", _outputs())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_out_with_a_name_too_long_for_the_filesystem_is_one_line(tmp_path):
    with pytest.raises(InputError, match="a component of 300 bytes"):
        outfiles.write(tmp_path / ("d" * 300), _outputs())
    assert os.listdir(tmp_path) == []


def test_a_huge_file_in_the_way_is_kept_without_being_read_whole(tmp_path, monkeypatch):
    outs = _outputs()
    big = tmp_path / outs[0].name
    with open(big, "wb") as fh:  # sparse: 1 GiB that costs no disk
        fh.truncate(1 << 30)
    reads = []
    real_read = os.read

    def counting_read(fd, n):
        reads.append(n)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", counting_read)
    with pytest.raises(InputError, match="kept"):
        outfiles.write(tmp_path, outs)
    assert reads and all(0 <= n <= len(outs[0].text.encode()) + 1 for n in reads), reads
