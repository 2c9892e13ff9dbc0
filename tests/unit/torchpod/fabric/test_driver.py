"""The node's driver against the bundled CUDA (fabric/driver.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.fabric.driver import cuda_of, judge, node_driver, parse

# /proc/driver/nvidia/version as real nodes print it: the open module (R580, a GB200 node)
# and the proprietary one (R535, an H100 node on the LTS branch).
OPEN_580 = ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.65.06  Release Build  "
            "(dvs-builder@U22-I3-AE18-23-3)  Sun Jul 27 06:54:38 UTC 2025\n"
            "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n")
PROP_535 = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
            "GCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n")


def proc(tmp_path: Path, text: str | bytes) -> Path:
    (tmp_path / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "driver" / "nvidia" / "version").write_bytes(text.encode() if isinstance(text, str) else text)
    return tmp_path


def test_both_module_kinds_parse():
    assert parse(OPEN_580) == (580, 65, 6) and parse(PROP_535) == (535, 104, 5)


@pytest.mark.parametrize("text, cuda, code, severity", [
    (OPEN_580, (13, 0), "driver.version.ok", "ok"),
    (PROP_535, (13, 0), "driver.version.too-old", "fail"),
    (PROP_535, (12, 8), "driver.version.minor-compat", "warn"),
    (OPEN_580, (12, 6), "driver.version.ok", "ok"),
    (PROP_535, (12, 2), "driver.version.ok", "ok"),  # no 12.2 row: judged by the 12.x floor
])
def test_the_driver_against_the_image(tmp_path, text, cuda, code, severity):
    version, why = node_driver(proc(tmp_path, text))
    finding = judge(version, why, cuda)
    assert (finding.code, finding.severity.value) == (code, severity)
    if severity == "fail":
        assert finding.message.startswith("this image needs driver >= 580 (CUDA 13.0), the node has 535.104.05")
        assert "580.65.06" in finding.fix


@pytest.mark.parametrize("make", [
    lambda p: p.write_bytes(b"\x00\xff garbage \x80"),
    lambda p: p.write_text("NVRM version: something else entirely\n"),
    lambda p: os.mkfifo(p),
    lambda p: p.symlink_to("/dev/zero"),
])
def test_a_garbage_version_file_is_one_warning(tmp_path, make):
    (tmp_path / "driver" / "nvidia").mkdir(parents=True)
    make(tmp_path / "driver" / "nvidia" / "version")
    version, why = node_driver(tmp_path)
    finding = judge(version, why, (12, 8))
    assert version is None and finding.code == "driver.version.unknown" and "\n" not in finding.message


def test_no_cuda_no_judgement():
    assert judge((535, 104, 5), "", None).code == "driver.cuda.unknown"


def test_torchs_version_module_gives_the_cuda():
    assert cuda_of("__version__ = '2.9.1+cu128'\ncuda: Optional[str] = '12.8'\n") == (12, 8)
    assert cuda_of("cuda: Optional[str] = None\n") is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_parses_or_is_none(text):
    version = parse(text)
    assert version is None or 100 <= version[0] <= 9999
