"""torchpod_toolkit.engine, checked without an engine: a foreign arch without emulation is one
clear line."""

from __future__ import annotations

import pytest

from torchpod.arch import ARCHES
from torchpod.errors import InputError
from torchpod_toolkit.definitions import load_definitions
from torchpod_toolkit.engine import check_emulation

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
ARM, X86 = ARCHES["aarch64"], ARCHES["x86_64"]


def test_emulation_missing_is_one_clear_line(tmp_path):
    check_emulation(X86, X86, tmp_path)  # native: nothing needed
    with pytest.raises(InputError, match="needs QEMU user emulation.*qemu-user-static"):
        check_emulation(ARM, X86, tmp_path)
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\n")
    check_emulation(ARM, X86, tmp_path)
