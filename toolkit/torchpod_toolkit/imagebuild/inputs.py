"""What one build installs, all of it known before Docker runs: the locks, the wheelhouse's
files staged in the build context, and the SBOM generated from the locks and staged beside them.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from torchpod.contract import Arch

from ..timing import Clock
from . import host, locks, sbom, wheelhouse
from .definitions import ImageDef


@dataclass(frozen=True)
class Inputs:
    """What one build installs, all of it known before Docker runs: the locks, the SBOM."""

    wheels: locks.Lock
    debs: locks.Lock | None
    sbom: str

    def labels(self, defn: ImageDef) -> dict[str, str]:
        out = {"lock.wheels": self.wheels.sha256,
               "sbom": hashlib.sha256(self.sbom.encode()).hexdigest()}
        if self.debs is not None:
            out["lock.debian"] = self.debs.sha256
        floor = locks.driver_floor(self.wheels)
        if floor:
            out["cuda-driver-min"] = floor
        return out


def prepare(defn: ImageDef, arch: Arch, wheels: locks.Lock, debs: locks.Lock | None, *, root: Path, offline: bool,
            ca_bundle: Path | None, clock: Clock) -> Inputs:
    """Before Docker, from the locks read and checked against the definition (:func:`.locks.load`):
    the lock's lines, its source-only packages' wheels and the SBOM staged in the build context:
    what the payload key reads. The lock's wheels themselves are fetched and staged only when
    the payload image is built (:func:`wheels`): an image whose payload exists needs none."""
    with clock("wheels"):
        home = wheelhouse.root()
        fetched = wheelhouse.fill(defn, arch, wheels, home=home, ca_bundle=ca_bundle, offline=offline,
                                  sources_only=True)
        if fetched:
            print(f"==> wheelhouse {home}: {fetched} source-only packages fetched", flush=True)
        wheelhouse.stage(wheels, home=home, context=root, with_wheels=False)
    with clock("sbom"):
        text, _ = sbom.remembered(defn, arch, wheels, debs, host.user_cache() / "sboms")
        folder = root / sbom.STAGE
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / Path(sbom.PATH_IN_IMAGE).name).write_text(text)
    return Inputs(wheels, debs, text)


def wheels(defn: ImageDef, arch: Arch, lock: locks.Lock, *, root: Path, offline: bool, ca_bundle: Path | None,
           clock: Clock) -> None:
    """The wheelhouse filled for ``lock`` (hash-checked; nothing downloaded when it holds the
    files) and every locked file staged, for a payload build (phase wheels)."""
    with clock("wheels"):
        home = wheelhouse.root()
        fetched = wheelhouse.fill(defn, arch, lock, home=home, ca_bundle=ca_bundle, offline=offline)
        print(f"==> wheelhouse {home}: {len(lock.entries)} locked files, {fetched} fetched", flush=True)
        wheelhouse.stage(lock, home=home, context=root)
