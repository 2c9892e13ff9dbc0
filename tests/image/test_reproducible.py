"""Reproducible images: the SBOM in each image lists exactly what pip and dpkg report there, the
labels carry the locks' digests and the CUDA driver floor, and a second build of one
definition with no cache installs the same packages and carries the same SBOM.

The two builds' layer digests are compared too (and written to
.cache/reproducible/<image>-<arch>.json): every layer must match, because every file time
the Dockerfile writes is fixed (docs/images.md, "Reproducibility"). The image IDs differ:
the image config holds the build's time (Docker 20.10's BuildKit ignores SOURCE_DATE_EPOCH).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid

import pytest

from torchpod.contract import label
from torchpod_toolkit.imagebuild import locks, sbom

from paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.image]


def _installed(b) -> dict[str, dict[str, str]]:
    pip = json.loads(b.run("python -m pip list --format json --disable-pip-version-check"))
    dpkg = b.run("dpkg-query -W -f '${Package}=${Version}\\n'").splitlines()
    return {"pypi": {locks.canonical(p["name"]): p["version"] for p in pip},
            "deb": dict(line.split("=", 1) for line in dpkg if line)}


def _check(b) -> None:
    text = b.run(f"cat {sbom.PATH_IN_IMAGE}")
    wheels = locks.load(ROOT / "images", b.defn, b.arch, debian=False)
    debs = locks.load(ROOT / "images", b.defn, b.arch, debian=True)
    assert sbom.components(text) == _installed(b)
    # the SBOM is the one the committed locks generate, byte for byte (testinfra strips the
    # output's last newline: the label is the file's digest)
    generated = sbom.generate(b.defn, b.arch, wheels, debs)
    assert text == generated.rstrip("\n")
    assert b.labels[label("sbom")] == hashlib.sha256(generated.encode()).hexdigest()
    assert b.labels[label("lock.wheels")] == wheels.sha256 and b.labels[label("lock.debian")] == debs.sha256
    assert b.labels[label("cuda-driver-min")] == locks.driver_floor(wheels) != ""


def test_the_sbom_lists_exactly_what_pip_and_dpkg_report(built):
    _check(built)


def test_a_variants_sbom_lists_its_apt_layer_too(variant):
    _check(variant)
    apt = {d.name for d in locks.load(ROOT / "images", variant.defn, variant.arch, debian=True).entries
           if d.layer == "apt"}
    assert {"libfabric1", "libfabric-bin"} <= apt


def test_two_builds_with_no_cache_agree(docker_client):
    from torchpod_toolkit.imagebuild import host, pipeline
    from torchpod_toolkit.imagebuild.definitions import load_definitions

    defn = load_definitions(ROOT / "images")["pytorch"]
    arch = host.host_arch()
    first = docker_client.images.get(defn.ref(arch))
    tag = f"torchpod-rebuild/{defn.name}:{arch.name}-{uuid.uuid4().hex[:8]}"
    pipeline.build(defn, arch, root=ROOT, tag=tag, no_cache=True, quiet=True)
    try:
        second = docker_client.images.get(tag)

        def listing(ref: str) -> tuple[str, str, str]:
            script = ("python -m pip list --format freeze --disable-pip-version-check; echo ==; "
                      "dpkg-query -W -f '${Package}=${Version}\\n'; echo ==; cat " + sbom.PATH_IN_IMAGE)
            out = docker_client.containers.run(ref, ["-c", script], entrypoint=["sh"], remove=True,
                                               network_disabled=True).decode()
            pip, dpkg, text = out.split("==\n", 2)
            return pip, dpkg, text

        assert listing(defn.ref(arch)) == listing(tag)
        for key in ("sbom", "lock.wheels", "lock.debian", "cuda-driver-min", "torch", "nccl", "cuda"):
            assert first.labels[label(key)] == second.labels[label(key)], key
        layers = (first.attrs["RootFS"]["Layers"], second.attrs["RootFS"]["Layers"])
        record = {"image": defn.name, "arch": arch.name, "layers": len(layers[0]),
                  "layers_equal": [a == b for a, b in zip(*layers)], "image_ids_equal": first.id == second.id}
        folder = ROOT / ".cache" / "reproducible"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{defn.name}-{arch.name}.json").write_text(json.dumps(record, indent=2) + "\n")
        print(f"two builds of {defn.name} {arch.name}: {sum(record['layers_equal'])} of {record['layers']} "
              "layer digests equal")
        # every layer: the base (bootstrapped once, reused), the payload (fixed times, hash-based
        # .pyc), and each RUN that copies from the build context (fixed times)
        assert all(record["layers_equal"]) and len(layers[0]) == len(layers[1]), record
    finally:
        docker_client.images.remove(tag, force=True)
        if os.environ.get("TORCHPOD_PRUNE_BUILD_CACHE") == "1":  # CI: this rebuild's cache (~13 GB) is not kept
            subprocess.run([host.find_builder().docker, "builder", "prune", "-af"], capture_output=True)


def test_a_debian_version_gone_from_the_mirror_fails_the_bootstrap_in_one_line(docker_client, tmp_path):
    from dataclasses import replace

    from torchpod.errors import RuntimeFailure
    from torchpod_toolkit.imagebuild import base, commands, host
    from torchpod_toolkit.imagebuild.definitions import load_definitions

    defn = load_definitions(ROOT / "images")["pytorch"]
    arch = host.host_arch()
    debs = locks.load(ROOT / "images", defn, arch, debian=True)
    gone = replace(debs, entries=tuple(replace(d, version="0.0-torchpod-gone") if d.name == "python3" else d
                                       for d in debs.entries))
    pins = {d.name: d.version for d in gone.entries if d.layer == "base"}
    tag = commands.base_tag(defn, arch, pins)
    with pytest.raises(RuntimeFailure) as info:
        base.ensure_base(docker_client, host.find_builder(), defn, arch, tmp_path, gone)
    message = str(info.value)
    assert "a locked version is gone from the mirror" in message and str(debs.path) in message
    assert "python3=0.0-torchpod-gone is not on the mirror" in message  # the entry, from apt's own words
    assert "invoke lock --image pytorch" in message and "snapshot.debian.org" in message and "\n" not in message
    assert not host.image_exists(docker_client, tag)  # nothing tagged
