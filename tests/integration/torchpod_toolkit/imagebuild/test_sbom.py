"""torchpod_toolkit.imagebuild.sbom: the SBOM of each CI image, from its committed locks through
cyclonedx-py and cyclonedx-python-lib, is valid CycloneDX 1.6, lists exactly the locks, and
is the same bytes every time (the two-builds test compares the images' copies)."""

from __future__ import annotations

import functools
import json

import pytest

from torchpod_toolkit.imagebuild import locks, sbom
from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

DEFS = load_definitions(ROOT / "images")
CASES = [(DEFS["pytorch"], DEFS["pytorch"].arch("aarch64")), (DEFS["pytorch-efa"], DEFS["pytorch-efa"].arch("x86_64"))]


@pytest.mark.parametrize("defn, arch", CASES, ids=[f"{d.name}-{a.name}" for d, a in CASES])
def test_the_sbom_lists_exactly_the_locks_and_is_reproducible(defn, arch):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    wheels = locks.load(ROOT / "images", defn, arch, debian=False)
    debs = locks.load(ROOT / "images", defn, arch, debian=True)
    text = sbom.generate(defn, arch, wheels, debs)
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    found = sbom.components(text)
    assert found["pypi"] == {w.name: w.version for w in wheels.entries}
    assert found["deb"] == {d.name: d.version for d in debs.entries}
    data = json.loads(text)
    assert "timestamp" not in data["metadata"]
    hashes = {c["name"]: c["externalReferences"][0]["hashes"][0]["content"] for c in data["components"]
              if c.get("purl", "").startswith("pkg:pypi/")}
    assert hashes == {w.name: w.sha256 for w in wheels.entries}
    assert sbom.generate(defn, arch, wheels, debs) == text  # byte for byte
    props = {p["name"]: p["value"] for p in data["metadata"]["properties"]}
    assert props["torchpod:lock.wheels"] == wheels.sha256 and props["torchpod:lock.debian"] == debs.sha256


def test_a_broken_lock_path_is_one_line_naming_the_generator(tmp_path):
    from torchpod.errors import RuntimeFailure

    defn = DEFS["pytorch"]
    arch = defn.arch("x86_64")
    wheels = locks.load(ROOT / "images", defn, arch, debian=False)
    missing = locks.Lock(tmp_path / "gone.txt", wheels.image, wheels.arch, wheels.inputs, wheels.entries)
    with pytest.raises(RuntimeFailure, match=r"cyclonedx-py requirements .*gone.txt failed"):
        sbom.generate(defn, arch, missing, None)


def _locks(defn, arch):
    return locks.load(ROOT / "images", defn, arch, debian=False), locks.load(ROOT / "images", defn, arch, debian=True)


def test_a_remembered_sbom_is_the_generated_one_and_is_made_once(tmp_path):
    defn, arch = CASES[0]
    wheels, debs = _locks(defn, arch)
    text, cached = sbom.remembered(defn, arch, wheels, debs, tmp_path)
    assert not cached and text == sbom.generate(defn, arch, wheels, debs)
    again, cached = sbom.remembered(defn, arch, wheels, debs, tmp_path)
    assert cached and again == text
    assert [p.name for p in tmp_path.iterdir()] == [f"{sbom.key(defn, arch, wheels, debs)}.cdx.json"]


def test_every_input_of_the_sbom_changes_its_key(monkeypatch, tmp_path):
    from dataclasses import replace

    defn, arch = CASES[0]
    wheels, debs = _locks(defn, arch)
    edited = tmp_path / "edited.txt"
    edited.write_text(wheels.text.replace("\n", "\n# an edit\n", 1))
    keys = {sbom.key(defn, arch, wheels, debs), sbom.key(defn, arch, wheels, None),
            sbom.key(defn, arch, replace(wheels, path=edited), debs),
            sbom.key(defn, defn.arch("x86_64"), wheels, debs), sbom.key(DEFS["pytorch-efa"], arch, wheels, debs)}
    real = sbom.metadata.version
    monkeypatch.setattr(sbom.metadata, "version", lambda name: real(name) + ".post1")
    keys.add(sbom.key(defn, arch, wheels, debs))
    assert len(keys) == 6


GENERATE = sbom.generate  # the real one, before a test stands in for it


@functools.lru_cache(maxsize=None)
def _generated(name: str, arch: str) -> str:
    defn = DEFS[name]
    return GENERATE(defn, defn.arch(arch), *_locks(defn, defn.arch(arch)))


@pytest.fixture
def counted(monkeypatch):
    """sbom.generate replaced by its real output, generated once per image and arch for the
    module (5 s each), counting the calls: what is under test here is what is taken from
    the cache and what is made again."""
    calls = []

    def generate(defn, arch, wheels, debs):
        calls.append(wheels.sha256)
        return _generated(defn.name, arch.name) if wheels.sha256 == _locks(defn, arch)[0].sha256 else \
            _generated("pytorch", "aarch64")

    monkeypatch.setattr(sbom, "generate", generate)
    return calls


@pytest.mark.parametrize("stored", ["", "{", "null", '{"metadata": {"properties": [1]}}', "\udcff", "dir"],
                         ids=["empty", "truncated", "null", "odd-properties", "not-utf8", "a-directory"])
def test_a_stored_sbom_that_does_not_name_its_locks_is_made_again(tmp_path, stored, counted):
    defn, arch = CASES[1]
    wheels, debs = _locks(defn, arch)
    path = tmp_path / f"{sbom.key(defn, arch, wheels, debs)}.cdx.json"
    if stored == "dir":
        path.mkdir()
    else:
        path.write_bytes(stored.encode(errors="surrogateescape"))
    expected = _generated(defn.name, arch.name)
    if stored == "dir":  # never read, never replaced: generated for this build alone, no stray file left
        assert sbom.remembered(defn, arch, wheels, debs, tmp_path) == (expected, False)
        assert path.is_dir() and [p.name for p in tmp_path.iterdir()] == [path.name] and len(counted) == 1
        return
    text, cached = sbom.remembered(defn, arch, wheels, debs, tmp_path)
    assert not cached and text == expected and len(counted) == 1
    assert path.read_text() == text  # replaced whole
    assert sbom.remembered(defn, arch, wheels, debs, tmp_path) == (expected, True) and len(counted) == 1


def test_a_stored_sbom_of_other_locks_is_never_taken(tmp_path, counted):
    defn, arch = CASES[1]
    wheels, debs = _locks(defn, arch)
    path = tmp_path / f"{sbom.key(defn, arch, wheels, debs)}.cdx.json"
    path.write_text(_generated("pytorch", "aarch64"))  # a file under this key naming another image's locks
    text, cached = sbom.remembered(defn, arch, wheels, debs, tmp_path)
    props = {p["name"]: p["value"] for p in json.loads(text)["metadata"]["properties"]}
    assert not cached and props["torchpod:lock.wheels"] == wheels.sha256 and len(counted) == 1
