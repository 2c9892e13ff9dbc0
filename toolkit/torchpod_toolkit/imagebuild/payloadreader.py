"""The launcher's bounded reader, carried into the payload's build context.

docker/payload/shards.py runs inside the image build on the base's python3 alone: neither
torchpod nor the toolkit is installed there. It reads the staged lock through the same
reader as every other file torchpod reads (``torchpod.readers``), from a copy under
``docker/payload/reader/``: the reader and the two modules it imports, byte for byte, and an
``__init__.py`` saying where they come from. ``tests/unit/torchpod_toolkit/imagebuild/
test_payloadreader.py`` holds the copy equal to the launcher's modules;

    python3 -m torchpod_toolkit.imagebuild.payloadreader

writes it anew after an edit of them. The copy is one of the payload's inputs
(:func:`torchpod_toolkit.imagebuild.payload.payload_scripts` hashes every file of
docker/payload), so an edit of the reader builds the payload image again.
"""

from __future__ import annotations

import sys
from pathlib import Path

from torchpod import readers

# the reader and what it imports (readers.py: ``from .errors import ...``, ``from .words import ...``)
SOURCES = ("readers.py", "errors.py", "words.py")
LAUNCHER = Path("entrypoints") / "torchpod"
COPY = Path("docker") / "payload" / "reader"
INIT = (b'"""A copy of the launcher\'s bounded reader (entrypoints/torchpod/readers.py and what it\n'
        b"imports), for docker/payload/shards.py, which runs in the image build without torchpod.\n"
        b"Written by `python3 -m torchpod_toolkit.imagebuild.payloadreader`; do not edit here.\n"
        b'"""\n')


def expected(root: Path) -> dict[str, bytes]:
    """Each file the copy must hold, by name, with its bytes."""
    files = {"__init__.py": INIT}
    for name in SOURCES:
        files[name] = readers.read_bytes(root / LAUNCHER / name, what=f"{LAUNCHER / name}",
                                         expected="a module of the launcher", cap=readers.DATA_CAP)
    return files


def differences(root: Path) -> list[str]:
    """The copy's files that are missing, differ from the launcher's or should not be there."""
    want = expected(root)
    folder = root / COPY
    have = {p.name for p in folder.iterdir() if p.is_file()} if folder.is_dir() else set()
    out = sorted(name for name in have - set(want) if name.endswith(".py"))
    for name, data in want.items():
        path = folder / name
        if not path.is_file() or readers.read_bytes(path, what=str(COPY / name), expected="a copied module",
                                                    cap=readers.DATA_CAP) != data:
            out.append(name)
    return sorted(out)


def write(root: Path) -> list[str]:
    """Write the copy's stale files; the names written."""
    stale = differences(root)
    want = expected(root)
    (root / COPY).mkdir(parents=True, exist_ok=True)
    for name in stale:
        path = root / COPY / name
        if name in want:
            path.write_bytes(want[name])
        else:
            path.unlink()
    return stale


def main() -> int:
    root = Path(__file__).resolve().parents[3]  # the checkout
    written = write(root)
    print(f"{COPY}: " + (", ".join(written) + " written" if written else "already equal to the launcher's"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
