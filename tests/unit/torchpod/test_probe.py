"""torchpod.probe reads versions from the files an image holds: torch's version.py, the first
line of torchvision's, and the one libnccl.so.2 under site-packages. Here on a stand-in
site-packages; the image tier (tests/image/test_image.py) runs the probe in built images."""

from __future__ import annotations

import os

import pytest

from torchpod.probe import libnccl, torch_version_file, torchvision_version_file


def test_torchs_version_file_gives_torch_and_cuda(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "version.py").write_text(
        "from typing import Optional\n__version__ = '2.13.0+cu128'\ncuda: Optional[str] = '12.8'\ngit_version = 'x'\n")
    assert torch_version_file(tmp_path) == {"torch": "2.13.0+cu128", "cuda": "12.8"}
    (tmp_path / "torch" / "version.py").write_text("__version__ = '2.13.0+cpu'\ncuda = None\n")
    assert torch_version_file(tmp_path) == {"torch": "2.13.0+cpu", "cuda": ""}  # a CPU build: no CUDA


def test_torchvisions_version_is_read_not_executed(tmp_path):
    assert torchvision_version_file(tmp_path) == ""  # not installed
    (tmp_path / "torchvision").mkdir()
    (tmp_path / "torchvision" / "version.py").write_text(
        "__version__ = '0.28.0+cu128'\ngit_version = 'x'\nfrom torchvision.extension import _check_cuda_version\n")
    assert torchvision_version_file(tmp_path) == "0.28.0+cu128"
    (tmp_path / "torchvision" / "version.py").write_text("version = '0.28.0'\n")
    assert torchvision_version_file(tmp_path) == ""


def test_libnccl_is_the_wheels_and_its_absence_is_said(tmp_path):
    with pytest.raises(SystemExit, match=f"probe: no libnccl.so.2 under {tmp_path}/nvidia"):
        libnccl(tmp_path)
    lib = tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"")
    (tmp_path / "nvidia" / "nccl" / "lib" / "libnccl.so").write_bytes(b"")  # the dev link is not the runtime's
    assert libnccl(tmp_path) == lib


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "is a FIFO (named pipe)"),
    (lambda p: os.symlink("/dev/zero", p), "is a character device"),
    (lambda p: p.write_bytes(b"__version__ = '\xff'\n"), "not UTF-8 text (first at byte 15)"),
    (lambda p: p.write_bytes(b"#" * ((64 << 10) + 1)), "over the 64 KiB cap"),
])
def test_a_version_file_that_is_no_small_text_file_ends_the_probe_in_one_line(tmp_path, make, says):
    for package, read in (("torch", torch_version_file), ("torchvision", torchvision_version_file)):
        (tmp_path / package).mkdir()
        make(tmp_path / package / "version.py")
        with pytest.raises(SystemExit) as info:
            read(tmp_path)
        assert str(info.value).startswith(f"probe: {tmp_path / package / 'version.py'} ") and says in str(info.value)
    with pytest.raises(SystemExit, match="torch/version.py cannot be read; expected torch's version file"):
        torch_version_file(tmp_path / "nowhere")
