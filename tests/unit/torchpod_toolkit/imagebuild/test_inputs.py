"""torchpod_toolkit.imagebuild.inputs: the labels a build's inputs give its image (the locks' and the
SBOM's digests, the oldest driver the locked CUDA runtime runs on)."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from torchpod_toolkit.imagebuild import locks
from torchpod_toolkit.imagebuild.definitions import load_definitions
from torchpod_toolkit.imagebuild.inputs import Inputs

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
X86 = DEFN.arch("x86_64")


def test_the_inputs_label_the_locks_the_sbom_and_the_driver_floor():
    wheels = locks.load(ROOT / "images", DEFN, X86, debian=False)
    debs = locks.load(ROOT / "images", DEFN, X86, debian=True)
    labels = Inputs(wheels, debs, '{"bomFormat": "CycloneDX"}').labels(DEFN)
    assert labels["lock.wheels"] == wheels.sha256 and labels["lock.debian"] == debs.sha256
    assert labels["sbom"] == hashlib.sha256(b'{"bomFormat": "CycloneDX"}').hexdigest()
    assert labels["cuda-driver-min"] == locks.driver_floor(wheels) != ""
    # a registry base has no Debian lock; a lock without a CUDA runtime wheel, no driver floor
    bare = Inputs(replace(wheels, entries=tuple(w for w in wheels.entries if not locks.CUDA_RUNTIME.fullmatch(w.name))),
                  None, "{}").labels(DEFN)
    assert set(bare) == {"lock.wheels", "sbom"}
