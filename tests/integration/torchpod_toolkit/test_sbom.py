"""torchpod_toolkit.sbom: the SBOM of each CI image, from its committed locks through
cyclonedx-py and cyclonedx-python-lib, is valid CycloneDX 1.6, lists exactly the locks, and
is the same bytes every time (the two-builds test compares the images' copies)."""

from __future__ import annotations

import json

import pytest

from torchpod_toolkit import locks, sbom
from torchpod_toolkit.definitions import load_definitions

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
