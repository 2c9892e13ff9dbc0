"""torchpod_toolkit.imagebuild.host, checked without an engine: a foreign arch without emulation is one
clear line; BuildKit's export time is read from its plain progress output."""

from __future__ import annotations

import os

import pytest

from torchpod.arch import ARCHES
from torchpod.errors import InputError
from torchpod_toolkit.imagebuild import host
from torchpod_toolkit.imagebuild.host import check_emulation

ARM, X86 = ARCHES["aarch64"], ARCHES["x86_64"]


def test_emulation_missing_is_one_clear_line(tmp_path):
    check_emulation(X86, X86, tmp_path)  # native: nothing needed
    with pytest.raises(InputError, match="needs QEMU user emulation.*qemu-user-static"):
        check_emulation(ARM, X86, tmp_path)
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n")
    check_emulation(ARM, X86, tmp_path)


@pytest.mark.parametrize("make, says", [
    (os.mkfifo, "qemu-aarch64 is a FIFO (named pipe); expected a regular file: a binfmt_misc registration"),
    (os.mkdir, "qemu-aarch64 is a directory"),
    (lambda p: open(p, "wb").write(b"enabled\xff\n"), "not UTF-8 text (first at byte 7)"),
    (lambda p: open(p, "wb").write(b"enabled\n" * 10000), "over the 64 KiB cap"),
])
def test_an_emulation_entry_that_is_no_small_text_file_is_one_line_never_a_wait(tmp_path, make, says):
    make(tmp_path / "qemu-aarch64")
    with pytest.raises(InputError) as info:
        check_emulation(ARM, X86, tmp_path)
    assert says in str(info.value) and "\n" not in str(info.value)


def test_buildkits_export_time_is_read_from_its_plain_progress_and_nothing_else_counts():
    log = [
        "#8 [payload 3/3] RUN --mount=type=bind,source=.cache/wheels/payload,target=/wheels set -euf\n",
        "#8 DONE 47.7s\n",
        "#14 exporting to image\n",
        "#14 sha256:e8c613e07b0b\n",
        "#14 exporting layers 21.7s done\n",
        "#14 DONE 21.7s\n",
        "#15 exporting to image\n",
        "#15 DONE 0.3s\n",
        "#16 [runtime 1/1] RUN echo '#14 DONE 99.0s'\n",
        "#16 DONE 0.2s\n",
    ]
    assert host.export_seconds(log) == pytest.approx(22.0)
    assert host.export_seconds([]) == 0.0
    assert host.export_seconds(["#3 DONE 5.0s\n", "exporting to image\n", "#x DONE 1s\n"]) == 0.0


