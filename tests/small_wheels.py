"""Small wheels made in a test: a name, a version and a tag, enough for pip to select,
resolve, download and hash (no code inside)."""

from __future__ import annotations

import zipfile
from pathlib import Path


def make_wheel(folder: Path, name: str, version: str, tag: str) -> None:
    dist = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{name}-{version}-{tag}.whl", "w") as whl:
        whl.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        whl.writestr(f"{dist}/WHEEL",
                     f"Wheel-Version: 1.0\nGenerator: torchpod-test\nRoot-Is-Purelib: false\nTag: {tag}\n")
        whl.writestr(f"{dist}/RECORD", "")
