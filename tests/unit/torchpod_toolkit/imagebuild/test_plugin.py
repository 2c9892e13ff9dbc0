"""torchpod_toolkit.imagebuild.plugin, on bytes that are not a plugin: refused before any field is read.
(A real plugin, built with the host's compiler: tests/integration/torchpod_toolkit/imagebuild/test_plugin.py.)"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod_toolkit.imagebuild import plugin


@pytest.mark.parametrize("data", [b"", b"#!/bin/sh\n" * 8, b"MZ\x90\x00" * 16,
                                  b"\x7fELF\x01\x01\x01" + b"\x00" * 57,  # 32-bit
                                  b"\x7fELF\x02\x02\x01" + b"\x00" * 57,  # big-endian
                                  b"\x7fELF"])  # cut off after the magic
def test_bytes_that_are_not_a_64_bit_little_endian_elf_are_refused(data):
    with pytest.raises(ValueError, match="not a 64-bit little-endian ELF file"):
        plugin.read(data)


@pytest.mark.parametrize("data", [b"\x7fELF\x02\x01", b"\x7fELF\x02\x01\x01" + b"\x00" * 20,
                                  b"\x7fELF\x02\x01\x01" + b"\x00" * 25 + b"\xff" * 40])  # offsets past the end
def test_a_cut_off_or_malformed_elf_is_a_value_error_not_a_crash(data):
    with pytest.raises(ValueError, match="cut-off or malformed ELF"):
        plugin.read(data)


def test_the_label_says_what_is_unknown():
    assert plugin.PluginFile("x86_64", (), None, None, None).label == "? (? ?)"
    assert plugin.PluginFile("aarch64", (9,), "Libfabric", "aws-ofi-nccl", "1.14.0").label == \
        "Libfabric (aws-ofi-nccl 1.14.0)"


@given(st.binary(max_size=512))
def test_any_bytes_after_an_elf_header_read_as_a_plugin_or_one_value_error(tail):
    try:
        plugin.read(b"\x7fELF\x02\x01" + tail)
    except ValueError:
        pass
