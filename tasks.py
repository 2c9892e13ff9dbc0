"""Invoke tasks: build, push and test torchpod images. Tasks only orchestrate.

Everything they build or run comes from images/*.yaml through torchpod.build; a
deliberate abort is ``Exit("what failed; how to fix")``. Command line beats code default.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from invoke import Exit, task

from torchpod.errors import TorchpodError

ROOT = Path(__file__).resolve().parent
DEFAULT_IMAGE = "pytorch"


def _defs():
    from torchpod.build.definitions import load_definitions

    return load_definitions(ROOT / "images")


def _abort(exc: TorchpodError) -> Exit:
    return Exit(f"torchpod: {exc}", code=exc.exit_code)


def _arches(defn, arch: str):
    if not arch:
        return list(defn.arches)
    return [defn.arch(a) for a in arch.split(",") if a.strip()]


@task(help={
    "arch": "x86_64 or aarch64 (amd64/arm64 accepted; comma-separated for several); default: every arch of the image",
    "image": "image definition (a file stem in images/)",
    "offline": "install wheels only from .cache/wheels/<image>-<arch> (see `invoke wheels`)",
    "ca_bundle": "CA bundle passed to pip as a BuildKit secret (default: the host's, if any)",
})
def build(c, arch="", image=DEFAULT_IMAGE, offline=False, ca_bundle=""):
    """Build, verify and label images for one or more architectures."""
    from torchpod.build import definitions, engine

    try:
        defn = definitions.select(_defs(), image)
        arches = _arches(defn, arch)
        bundle = Path(ca_bundle) if ca_bundle else engine.default_ca_bundle()
        if bundle is not None and not bundle.is_file():
            raise TorchpodError(f"--ca-bundle={ca_bundle!r} is not a readable file; give a PEM bundle path")
        results = [engine.build(defn, a, root=ROOT, offline=offline, ca_bundle=bundle) for a in arches]
    except TorchpodError as exc:
        raise _abort(exc) from None
    print("\n" + engine.summary_table(results))


@task(help={
    "registry": "HOST:PORT of the registry (plain HTTP is used for loopback hosts or with --insecure)",
    "image": "image definition (a file stem in images/)",
    "insecure": "talk plain HTTP to a non-loopback registry",
})
def push(c, registry, image=DEFAULT_IMAGE, insecure=False):
    """Push every declared arch as <tag>-<arch>, then the merged multi-arch manifest list."""
    from torchpod.build import definitions, registry as reg

    try:
        defn = definitions.select(_defs(), image)
        result = reg.push(defn, registry, insecure=insecure)
    except TorchpodError as exc:
        raise _abort(exc) from None
    for arch, ref, digest in result.images:
        print(f"{arch:8} {ref}@{digest}")
    print(f"manifest list {result.manifest_ref}@{result.manifest_digest}")


@task(help={
    "image": "image definition (a file stem in images/)",
    "arch": "x86_64 or aarch64; default: every arch of the image",
})
def wheels(c, image=DEFAULT_IMAGE, arch=""):
    """Download an image's wheels into .cache/wheels/<image>-<arch> for offline builds."""
    from torchpod.build import commands, definitions, engine

    try:
        defn = definitions.select(_defs(), image)
        for a in _arches(defn, arch):
            dest = ROOT / ".cache" / "wheels" / f"{defn.name}-{a.name}"
            engine.run(commands.download_command(defn, a, dest, sys.executable, engine.default_ca_bundle()),
                       env={"PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""},
                       what=f"pip download for {a.name}")
    except TorchpodError as exc:
        raise _abort(exc) from None


@task(help={
    "tier": "unit, image, cluster or all",
    "build_images": "build the CI images first, incrementally (default true; --no-build-images skips)",
    "pytest_args": "extra arguments for pytest",
})
def test(c, tier="all", build_images=True, pytest_args=""):
    """Run the test suite: unit, then inside the built images, then containers as nodes."""
    tiers = {"unit": ["tests/unit"], "image": ["tests/image"], "cluster": ["tests/cluster"],
             "all": ["tests/unit", "tests/image", "tests/cluster"]}
    if tier not in tiers:
        raise Exit(f"torchpod: --tier={tier!r}; expected one of {', '.join(tiers)}", code=2)
    if build_images and tier != "unit":
        # Always (re)build: BuildKit's cache makes an unchanged tree a matter of seconds,
        # and the images under test then always match the tree, never a stale build.
        for defn in (d for d in _defs().values() if d.ci):
            build(c, image=defn.name)
    paths = [p for p in tiers[tier] if (ROOT / p).exists()]
    c.run(f"{sys.executable} -m pytest {' '.join(paths)} {pytest_args}", pty=False)
