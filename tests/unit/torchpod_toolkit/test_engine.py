"""torchpod_toolkit.engine, checked without an engine: a foreign arch without emulation is one
clear line; the probe's result is remembered per lock, base and probe source."""

from __future__ import annotations

import pytest

from torchpod.arch import ARCHES
from torchpod.errors import InputError
from torchpod_toolkit import engine
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


def test_the_probe_is_remembered_per_lock_base_and_probe_source(tmp_path):
    from dataclasses import replace

    from torchpod_toolkit import locks

    defn = DEFN
    arch = defn.arch("x86_64")
    wheels = locks.load(ROOT / "images", defn, arch, debian=False)
    debs = locks.load(ROOT / "images", defn, arch, debian=True)
    inputs = engine.Inputs(wheels, debs, "{}")
    key = engine.probe_key(inputs, "sha256:base1")
    assert key == engine.probe_key(inputs, "sha256:base1")
    other_lock = replace(inputs, wheels=locks.load(ROOT / "images", defn, defn.arch("aarch64"), debian=False))
    assert len({key, engine.probe_key(inputs, "sha256:base2"), engine.probe_key(other_lock, "sha256:base1")}) == 3
    # a remembered result is returned without an engine (client None would fail if used)
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / f"{key}.json").write_text('{"torch": "2.13.0+cu130", "machine": "x86_64"}')
    assert engine.cached_probe(None, "ref", arch, tmp_path, key) == {"torch": "2.13.0+cu130", "machine": "x86_64"}
    # a damaged entry is not trusted: the probe runs (and here fails on the missing engine)
    (tmp_path / "probes" / f"{key}.json").write_text('{"torch": 2}')
    with pytest.raises(AttributeError):
        engine.cached_probe(None, "ref", arch, tmp_path, key)
