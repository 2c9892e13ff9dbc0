"""torchpod.probe reads versions from the files an image holds: torch's version.py, the first
line of torchvision's, and the one libnccl.so.2 under site-packages. Here on a stand-in
site-packages; the image tier (tests/image/test_image.py) runs the probe in built images."""

from __future__ import annotations

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
