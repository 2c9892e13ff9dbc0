"""The image's SBOM, ``/usr/share/torchpod/sbom.cdx.json`` (CycloneDX 1.6 JSON), from its locks.

The Python part is CycloneDX's own generator, ``cyclonedx-py requirements`` (PyPI
``cyclonedx-bom``), run on the wheel lock, which is exactly what the payload stage
installs: each component keeps its locked sha256. The Debian packages of the Debian lock
are added through the same project's library (``cyclonedx-python-lib``: model, purl
``pkg:deb/debian/NAME@VERSION?arch=ARCH``, serializer, and its strict JSON-schema
validator), never written as JSON by hand. Output is reproducible (``--output-reproducible``:
no timestamp; the serial number is derived from the locks' digests), so two builds from
the same locks carry byte-identical SBOMs; the tests check it lists exactly what
``pip list`` and ``dpkg-query`` report inside the image.

Generating and validating one takes about 5 s, on every build. Being a function of its
inputs, it is remembered (:func:`remembered`) under a key of everything its bytes follow
from: both locks' texts, the definition's names, the arch, the CycloneDX version, the two
CycloneDX packages' versions and this module's own source.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from importlib import metadata
from pathlib import Path

from torchpod import readers
from torchpod.contract import Arch
from torchpod.errors import RuntimeFailure, TorchpodError

from .definitions import ImageDef
from .locks import Lock

PATH_IN_IMAGE = "/usr/share/torchpod/sbom.cdx.json"
STAGE = Path(".cache") / "sbom"  # in the build context; docker/Dockerfile copies it in
SPEC = "1.6"


def _generator() -> list[str]:
    found = shutil.which("cyclonedx-py")
    return [found] if found else [sys.executable, "-m", "cyclonedx_py"]


def generate(defn: ImageDef, arch: Arch, wheels: Lock, debs: Lock | None) -> str:
    """The SBOM text for one image and arch (validated against the CycloneDX schema)."""
    from cyclonedx.model import Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from packageurl import PackageURL

    proc = subprocess.run([*_generator(), "requirements", "--output-reproducible", "--of", "JSON", "--sv", SPEC,
                           "--mc-type", "application", "-o", "-", str(wheels.path)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        said = (proc.stderr.strip().splitlines() or ["no error text"])[-1][:300]
        raise RuntimeFailure(f"cyclonedx-py requirements {wheels.path} failed (exit {proc.returncode}): {said}; "
                             "install the toolkit's extra (pip install -e '.[toolkit]')")
    bom = Bom.from_json(json.loads(proc.stdout))  # type: ignore[attr-defined]  # added by py-serializable
    for deb in (debs.entries if debs else ()):
        bom.components.add(Component(
            type=ComponentType.LIBRARY, name=deb.name, version=deb.version, bom_ref=f"deb:{deb.name}",
            purl=PackageURL("deb", "debian", deb.name, deb.version,
                            qualifiers={"arch": arch.debian, "distro": f"debian-{defn.base.debian}"}),
            properties=[Property(name="torchpod:layer", value=deb.layer)]))
    image = Component(type=ComponentType.CONTAINER, name=defn.repository,
                      version=defn.ref(arch).rsplit(":", 1)[-1], bom_ref="image")
    bom.metadata.component = image
    bom.register_dependency(image, list(bom.components))  # the image holds every component
    bom.metadata.timestamp = None  # reproducible: no time in the file
    bom.metadata.properties.add(Property(name="torchpod:lock.wheels", value=wheels.sha256))
    if debs is not None:
        bom.metadata.properties.add(Property(name="torchpod:lock.debian", value=debs.sha256))
    key = f"{defn.name}/{arch.name}/{wheels.sha256}/{debs.sha256 if debs else ''}"
    bom.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, f"https://torchpod/sbom/{key}")
    text = JsonV1Dot6(bom).output_as_string(indent=2) + "\n"
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if error is not None:
        raise RuntimeFailure(f"the SBOM for {defn.name} {arch.name} is not valid CycloneDX {SPEC}: {str(error)[:300]}")
    return text


# what the CycloneDX packages install as: their versions are part of the key
GENERATOR_PACKAGES = ("cyclonedx-bom", "cyclonedx-python-lib")
MAX_SBOM_BYTES = 16 << 20


def key(defn: ImageDef, arch: Arch, wheels: Lock, debs: Lock | None) -> str:
    """The digest of everything :func:`generate`'s output follows from."""
    source = readers.read_bytes(__file__, what=__file__, expected="torchpod's own source", cap=readers.DATA_CAP)
    parts = [SPEC, hashlib.sha256(source).hexdigest(),
             *(f"{name}=={metadata.version(name)}" for name in GENERATOR_PACKAGES),
             defn.name, defn.repository, defn.ref(arch), str(defn.base.debian), arch.name, arch.debian,
             wheels.text, debs.text if debs is not None else ""]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def remembered(defn: ImageDef, arch: Arch, wheels: Lock, debs: Lock | None, cache: Path) -> tuple[str, bool]:
    """The SBOM and whether it came from ``cache`` (one file per :func:`key`): generated and
    stored (atomically) when absent. A stored file is taken only when it names both locks'
    digests, as :func:`generate` writes them; anything else there is generated again, and a
    cache that cannot take the file (a directory in its place, a full disk) costs only the
    saving."""
    path = cache / f"{key(defn, arch, wheels, debs)}.cdx.json"
    if path.is_file():
        try:
            text = readers.read_text(path, what=str(path), expected="a CycloneDX SBOM", cap=MAX_SBOM_BYTES)
            props = {p.get("name"): p.get("value") for p in json.loads(text)["metadata"]["properties"]}
        except (TorchpodError, ValueError, KeyError, TypeError, AttributeError):
            props = {}
        if props.get("torchpod:lock.wheels") == wheels.sha256 and (
                debs is None or props.get("torchpod:lock.debian") == debs.sha256):
            return text, True
    text = generate(defn, arch, wheels, debs)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:  # storing is a saving, never a failure of the build
        cache.mkdir(parents=True, exist_ok=True)
        partial.write_text(text)
        os.replace(partial, path)
    except OSError:
        partial.unlink(missing_ok=True)
    return text, False


def components(text: str) -> dict[str, dict[str, str]]:
    """{'pypi'|'deb': {name: version}} of an SBOM (for the tests and the doctor)."""
    out: dict[str, dict[str, str]] = {"pypi": {}, "deb": {}}
    for component in json.loads(text).get("components", []):
        purl = str(component.get("purl", ""))
        kind = purl[4:].split("/", 1)[0] if purl.startswith("pkg:") else ""
        if kind in out:
            out[kind][component["name"]] = component["version"]
    return out
