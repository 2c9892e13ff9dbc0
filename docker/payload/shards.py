"""Split the staged lock into shards that pip installs side by side, and merge their trees.

    python3 shards.py split LOCKED WHEELS COUNT OUT   -> OUT/0.txt ... (one per non-empty shard), each
                                                     path printed on a line of its own
    python3 shards.py merge SITE SHARD...            -> every SHARD's tree moved into SITE

Run by payload.sh, inside the build (the base's python3, standard library only, and the
launcher's reader from reader/: torchpod_toolkit.imagebuild.payloadreader writes that copy). pip installs
one wheel after another, unpacking each on one core; the payload's wheels are a few large
ones (torch, cuBLAS, cuDNN, NCCL), so one pip process per core, each over a shard of about
equal bytes, fills /opt in about the time of the largest shard.

split: COUNT is the cores at hand (at most :data:`MAX_SHARDS` are used). Each line of LOCKED
(written by torchpod_toolkit.wheelhouse.stage: ``name==version --hash=sha256:...  # file``)
goes to the shard with the fewest bytes so far, largest wheel first (ties to the lower
shard), so the same lock and COUNT always give the same shards.

merge: moves each shard's files into SITE (a whole directory is renamed when SITE has no such
directory; shards share namespace directories such as ``nvidia/``). A file two shards both
write must have the same bytes in each: pip installing them in one process would keep
whichever came last, silently, so this refuses instead, naming the file. ``bin/`` (console
scripts, which payload.sh removes) is dropped from every shard first. The merged tree holds
the same files as one pip process's would: every file time is reset afterwards, so the
order of the moves leaves no trace.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import sys
from pathlib import Path
from typing import NoReturn

from reader.errors import InputError
from reader.readers import read_text

# torch's wheel alone is about a fifth of the lock's bytes: past four shards, the shard that
# holds it finishes no sooner, and each further pip is memory spent for nothing
MAX_SHARDS = 4
# A lock is a line per wheel, a few KiB: a staged lock past this is no lock (read no further)
LOCK_CAP = 1 << 20


def fail(message: str) -> NoReturn:
    print(f"payload: {message}", file=sys.stderr)
    sys.exit(1)


def read_lock(locked: Path) -> str:
    """The staged lock's text, read by the launcher's bounded reader (reader/, a copy of
    torchpod.readers): a regular file (a FIFO would block the build) of UTF-8 within
    LOCK_CAP, or one line saying which of these it is not."""
    try:
        return read_text(locked, what=f"{locked}", cap=LOCK_CAP,
                         expected="the staged lock (torchpod_toolkit.wheelhouse.stage writes it), a line per wheel")
    except InputError as error:
        fail(str(error))


def split(locked: Path, wheels: Path, count: int, out: Path) -> None:
    sized = []
    for number, line in enumerate(read_lock(locked).splitlines(), 1):
        if not line.strip():
            continue
        _, sep, name = line.partition("  # ")
        path = wheels / name.strip()
        if not sep or "/" in name or not path.is_file():
            fail(f"{locked} line {number} names no staged wheel ({line[:120]!r}); expected "
                 "'name==version --hash=sha256:...  # file' with the file beside it")
        sized.append((path.stat().st_size, number, line))
    shards: list[list[tuple[int, str]]] = [[] for _ in range(max(1, min(count, MAX_SHARDS)))]
    load = [0] * len(shards)
    for size, number, line in sorted(sized, key=lambda s: (-s[0], s[1])):
        k = load.index(min(load))
        shards[k].append((number, line))
        load[k] += size
    out.mkdir(parents=True)
    for k, lines in enumerate(s for s in shards if s):
        (out / f"{k}.txt").write_text("".join(line + "\n" for _, line in sorted(lines)))
        print(out / f"{k}.txt")


def merge_into(site: Path, shard: Path) -> None:
    for entry in sorted(os.scandir(shard), key=lambda e: e.name):
        source, dest = Path(entry.path), site / entry.name
        if not dest.exists() and not dest.is_symlink():
            os.rename(source, dest)
        elif entry.is_dir(follow_symlinks=False) and dest.is_dir() and not dest.is_symlink():
            merge_into(dest, source)
        elif (entry.is_file(follow_symlinks=False) and dest.is_file() and not dest.is_symlink()
              and filecmp.cmp(source, dest, shallow=False)):
            source.unlink()
        else:
            fail(f"two wheels of the lock write {dest} with different contents; expected each file "
                 "from one wheel (or the same bytes from each)")


def merge(site: Path, shards: list[Path]) -> None:
    for shard in shards:
        shutil.rmtree(shard / "bin", ignore_errors=True)
        merge_into(site, shard)
        shutil.rmtree(shard)


def main(argv: list[str]) -> None:
    if len(argv) == 5 and argv[0] == "split" and argv[3].isdigit():
        split(Path(argv[1]), Path(argv[2]), int(argv[3]), Path(argv[4]))
    elif len(argv) >= 2 and argv[0] == "merge":
        merge(Path(argv[1]), [Path(a) for a in argv[2:]])
    else:
        fail(f"shards.py {' '.join(argv)[:200]!r}; expected 'split LOCKED WHEELS COUNT OUT' or 'merge SITE SHARD...'")


if __name__ == "__main__":
    main(sys.argv[1:])
