"""torchpod.arch: every spelling of the two architectures normalised in one function, and any
other name refused in one line that names the option it came from."""

from __future__ import annotations

import pytest

from torchpod.arch import ARCHES, normalise_arch
from torchpod.errors import InputError


@pytest.mark.parametrize("spelling, name", [("amd64", "x86_64"), ("X86_64", "x86_64"), ("arm64", "aarch64"),
                                            ("linux/arm64/v8", "aarch64"), (" aarch64 ", "aarch64")])
def test_arch_spellings_normalise(spelling, name):
    assert normalise_arch(spelling).name == name


@pytest.mark.parametrize("value", ["sparc", "", "arm", "linux/arm/v7", "x86", "aarch64\n--push", "\u0430md64"])
def test_an_unknown_arch_is_one_line_naming_the_option(value):
    with pytest.raises(InputError) as info:
        normalise_arch(value, what="--platform")
    message = str(info.value)
    assert message.startswith(f"--platform={value!r} is not a known architecture") and "\n" not in message
    assert "x86_64 (amd64) or aarch64 (arm64)" in message
    assert set(ARCHES) == {"x86_64", "aarch64"}  # the two the message offers
