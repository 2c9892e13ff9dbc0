"""torchpod_toolkit.imagebuild.probe, checked without an engine: the probe's result is remembered per
lock, base and probe source."""

from __future__ import annotations

import os

import pytest

from torchpod_toolkit.imagebuild import probe
from torchpod_toolkit.imagebuild.definitions import load_definitions
from torchpod_toolkit.imagebuild.inputs import Inputs

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]


def test_the_probe_is_remembered_per_lock_base_and_probe_source(tmp_path):
    from dataclasses import replace

    from torchpod_toolkit.imagebuild import locks

    defn = DEFN
    arch = defn.arch("x86_64")
    wheels = locks.load(ROOT / "images", defn, arch, debian=False)
    debs = locks.load(ROOT / "images", defn, arch, debian=True)
    inputs = Inputs(wheels, debs, "{}")
    key = probe.probe_key(inputs, "sha256:base1", arch)
    assert key == probe.probe_key(inputs, "sha256:base1", arch)
    arm = defn.arch("aarch64")
    other_lock = replace(inputs, wheels=locks.load(ROOT / "images", defn, arm, debian=False))
    assert len({key, probe.probe_key(inputs, "sha256:base2", arch), probe.probe_key(other_lock, "sha256:base1", arch),
                probe.probe_key(inputs, "sha256:base1", arm)}) == 4
    # a remembered result is returned without an engine (client None would fail if used)
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / f"{key}.json").write_text('{"torch": "2.13.0+cu130", "machine": "x86_64"}')
    assert probe.cached_probe(None, "ref", arch, tmp_path, key) == {"torch": "2.13.0+cu130", "machine": "x86_64"}
    # a damaged entry is not trusted: the probe runs (and here fails on the missing engine)
    (tmp_path / "probes" / f"{key}.json").write_text('{"torch": 2}')
    with pytest.raises(AttributeError):
        probe.cached_probe(None, "ref", arch, tmp_path, key)
    for hostile in (lambda p: os.mkfifo(p), lambda p: p.write_bytes(b'{"torch": "\xff"}')):
        (tmp_path / "probes" / f"{key}.json").unlink()
        hostile(tmp_path / "probes" / f"{key}.json")  # a FIFO is not waited on, bad bytes not trusted
        with pytest.raises(AttributeError):
            probe.cached_probe(None, "ref", arch, tmp_path, key)


def test_a_changed_wheel_base_package_or_apt_layer_package_changes_the_probes_key():
    from dataclasses import replace

    from torchpod_toolkit.imagebuild import locks

    defs = load_definitions(ROOT / "images")
    arch = defs["pytorch"].arch("x86_64")

    def inputs(name):
        defn = defs[name]
        return Inputs(locks.load(ROOT / "images", defn, arch, debian=False),
                             locks.load(ROOT / "images", defn, arch, debian=True), "{}")

    plain, efa = inputs("pytorch"), inputs("pytorch-efa")
    # a variant's libfabric (its apt layer) is read by the probe: its result is its own
    assert probe.probe_key(efa, "sha256:b", arch) != probe.probe_key(plain, "sha256:b", arch)
    first = plain.wheels.entries[0]
    bumped = replace(plain, wheels=replace(plain.wheels, entries=(replace(first, sha256="0" * 64),
                                                                  *plain.wheels.entries[1:])))
    assert probe.probe_key(bumped, "sha256:b", arch) != probe.probe_key(plain, "sha256:b", arch)
    base = [d for d in plain.debs.entries if d.layer == "base"][0]
    moved = replace(plain, debs=replace(plain.debs, entries=tuple(replace(d, version=d.version + "+1") if d is base
                                                                  else d for d in plain.debs.entries)))
    assert probe.probe_key(moved, "sha256:b", arch) != probe.probe_key(plain, "sha256:b", arch)
    # the lock file's header (its image name, its path) is no input: the same lines, the same key
    renamed = replace(plain, wheels=replace(plain.wheels, image="other", path=ROOT / "elsewhere.txt"))
    assert probe.probe_key(renamed, "sha256:b", arch) == probe.probe_key(plain, "sha256:b", arch)


