"""The payload install before and after a change to docker/payload/, side by side in one run,
and whether the two trees are the same files.

The payload scripts of commit ``--before`` (``git show``) and of this checkout each run in a
container of the default image's Debian base for this host's arch, on the default image's
staged lock (the wheelhouse fills it; nothing is downloaded when it holds the lock
already), as the payload build stage runs them, alternating which goes first. Each run's
time is the script's, from its start in the container to its end (pip, compileall and the
fixed file times; not the container's start). After each run the container lists every
file and directory under /opt with its mode, size, time and sha256: the listings of every
run must be equal.

    python bench/payload.py --before 69c780a~1 --repeats 2

(69c780a~1: one pip over the whole lock; this checkout: one pip per core over shards of it.)

Prints a table and writes bench/results/payload.json. Timing lives here, not in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))
sys.path.insert(0, str(ROOT / "toolkit"))

from torchpod_toolkit.imagebuild import base, definitions, host, locks, sources, wheelhouse  # noqa: E402

# Run in the container: the payload script timed, then every path of /opt with its metadata
# and, for a file, its sha256 (sorted, so the listing is the tree and not the order it was made in).
SCRIPT = r"""set -eu
start=$(date +%s.%N)
sh /srv/payload.sh /mnt >/dev/null
end=$(date +%s.%N)
echo "seconds $start $end"
cd /opt && find . -printf '%p %M %s %T@\n' | LC_ALL=C sort > /tmp/meta
find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum > /tmp/sums
echo "tree $(cat /tmp/meta /tmp/sums | sha256sum | cut -d' ' -f1) $(wc -l < /tmp/meta)"
"""


def scripts_at(rev: str, into: Path) -> Path:
    """docker/payload/ as commit ``rev`` has it, written under ``into``."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{rev}:docker/payload"],
                            capture_output=True, text=True)
    if listed.returncode != 0 or not listed.stdout.split():
        raise SystemExit(f"bench/payload.py: --before={rev!r} names no commit with docker/payload/; "
                         f"expected a revision of this repository ({listed.stderr.strip()[:200]})")
    folder = into / "payload"
    folder.mkdir()
    for name in listed.stdout.split():
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:docker/payload/{name}"], capture_output=True)
        (folder / name).write_bytes(shown.stdout)
    return folder


def one_run(client, image: str, staged: Path, python: str, scripts: Path) -> tuple[float, str, int]:
    """The script's seconds, the tree's digest and its path count, for one payload install."""
    out = client.containers.run(image, ["-c", SCRIPT], entrypoint=["sh"], remove=True, network_disabled=True,
                                environment={"PYTHON_VERSION": python, "PIP_TARGET": ""}, volumes={
                                    str(staged): {"bind": "/mnt", "mode": "ro"},
                                    str(scripts): {"bind": "/srv", "mode": "ro"}}).decode("utf-8", "replace")
    return parse_run(out)


def parse_run(out: str) -> tuple[float, str, int]:
    """SCRIPT's ``seconds START END`` and ``tree SHA256 COUNT`` lines, read from the
    container's output; output without them is one line quoting its end."""
    words = dict((line.split(" ", 1) + [""])[:2] for line in out.splitlines() if line)
    try:
        start, end = (float(x) for x in words["seconds"].split())
        digest, paths = words["tree"].split()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest) or end < start:
            raise ValueError(digest)
        return end - start, digest, int(paths)
    except (KeyError, ValueError):
        raise SystemExit(f"bench/payload.py: the payload container printed no 'seconds START END' and "
                         f"'tree SHA256 COUNT' lines; its output ended {out[-300:]!r}") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the commit whose docker/payload/ is timed beside this one's")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "payload.json"))
    args = parser.parse_args(argv)
    if not 1 <= args.repeats <= 10:
        raise SystemExit(f"bench/payload.py: --repeats={args.repeats}; expected 1 to 10")
    resolved = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "--verify",
                               f"{args.before}^{{commit}}"], capture_output=True, text=True).stdout.strip()
    if not resolved:
        raise SystemExit(f"bench/payload.py: --before={args.before!r} names no commit; expected a revision of this "
                         "repository, such as 69c780a~1")
    args.before = resolved
    defn = definitions.load_definitions(ROOT / "images")[definitions.DEFAULT_IMAGE]
    arch = host.host_arch()
    client, builder = host.docker_client(), host.find_builder()
    debs = locks.load(ROOT / "images", defn, arch, debian=True)
    image = base.ensure_base(client, builder, defn, arch, ROOT / ".cache", debs)
    lock = locks.load(ROOT / "images", defn, arch, debian=False)
    wheelhouse.fill(defn, arch, lock, home=wheelhouse.root(), ca_bundle=host.default_ca_bundle(), offline=False)
    staged = wheelhouse.stage(lock, home=wheelhouse.root(), context=ROOT)
    locked = sources.sha256_of(staged / wheelhouse.LOCKED)
    with tempfile.TemporaryDirectory(prefix="torchpod-bench-payload-") as tmp:
        ways = {"before": scripts_at(args.before, Path(tmp)), "after": ROOT / "docker" / "payload"}
        times: dict[str, list[float]] = {name: [] for name in ways}
        trees: set[tuple[str, int]] = set()
        for rep in range(args.repeats):
            for name in (list(ways) if rep % 2 == 0 else list(ways)[::-1]):
                seconds, digest, paths = one_run(client, image, staged, defn.python, ways[name])
                times[name].append(seconds)
                trees.add((digest, paths))
                print(f"  {name:7} {seconds:6.1f} s  tree {digest[:12]} ({paths} paths)", flush=True)
    before, after = (statistics.median(times[name]) for name in ways)
    same = len(trees) == 1
    print(f"\npayload install, median of {args.repeats}: {args.before} {before:.1f} s, this checkout {after:.1f} s "
          f"({os.cpu_count()} cores), ratio {after / before:.2f}; the same tree every run: {same}")
    Path(args.out).write_text(json.dumps({
        "benchmark": "payload install: docker/payload/ of --before / of this checkout, side by side",
        "before": args.before, "image": defn.name, "arch": arch.name, "cores": os.cpu_count(),
        "lock_sha256": locked, "repeats": args.repeats, "seconds": times,
        "median_s": {"before": before, "after": after}, "ratio_after_over_before": after / before,
        "same_tree": same, "paths": sorted(trees)[0][1],
    }, indent=2) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
