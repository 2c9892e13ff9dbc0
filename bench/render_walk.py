"""How a job's render walks the code: the rooms it passes through and how often it comes back
to one it had left, in this tree and at an earlier commit, side by side in one run.

    python bench/render_walk.py [--before f5126ff] [--kinds jobset,slurm,...]

A room is what CONTRIBUTING.md calls one: a folder of the toolkit (``imagebuild/``,
``manifests/``, ``cluster/``, ``kube/``), the toolkit's shared ground (the modules at its
top), the launcher (``entrypoints/torchpod/``) and ``tasks.py``. For each kind and each
tree, ``invoke manifests --scheduler KIND`` runs in a fresh Python with that tree's
packages first on its path, under a profiler (``sys.setprofile``) that notes every Python
call and return while the task's body runs, in a second render in the same process:
invoke's parsing of the flags is left out, and the first render has imported every module
and declared every kind, work done once whatever is rendered. The walk follows the code
that runs: into a function on a call, back to its caller on a return, so a function that
only calls others is visited again each time one returns to it, however the Python at hand
lays out comprehensions' frames. The walk is the sequence of rooms of the code that ran, a
run in one room folded into one visit; a return is a visit to a room the walk had already
been in and left. The same is counted for modules. The earlier tree is ``git archive``'s
copy of ``--before`` (by default f5126ff, the tree whose ``manifests/spec.py`` was one
module of 853 lines and whose build modules lay at the toolkit's top) in a temporary
folder: the repository itself is left as it was.

Writes bench/results/render_walk.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "entrypoints"))

from torchpod import readers  # noqa: E402  (standard library only)

BEFORE = "f5126ff"
KINDS = ("volcano", "volcano-master", "kubeflow", "kubeflow-elastic", "trainer", "runai", "lws", "jobset",
         "slurm", "pbs", "pbs-pals", "lsf", "skypilot")
IMAGE = "registry.example.com/torchpod/pytorch:2.13.0"
WALK_CAP = 64 << 20  # one render's folded walk: a few thousand module paths

# Run in the tree's own Python: the render under a profiler, the walk written as JSON.
TRACER = r"""
import json, sys, threading
tree, out, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
walk, body = [], []
task = tree + "/tasks.py"

def at(name):
    if name.startswith(tree + "/") and (not walk or walk[-1] != name):
        walk.append(name)

def profile(frame, event, arg):
    code = frame.f_code
    if code.co_filename == task and code.co_name == "manifests":  # the task's body: the walk's span
        if event == "call" and not body:
            body.append(frame)
        elif event == "return" and body and body[0] is frame:
            body.clear()
            return
    if not body:
        return
    if event == "call" and code.co_name != "<module>":
        at(code.co_filename)  # the code that runs now
    elif event == "return" and frame.f_back is not None:
        at(frame.f_back.f_code.co_filename)  # the caller's code runs on

from invoke.main import program
import torchpod, torchpod_toolkit
for package in (torchpod, torchpod_toolkit):
    assert package.__file__.startswith(tree + "/"), f"{package.__name__} from {package.__file__}, not {tree}"
warm = list(argv)
warm[warm.index("--out") + 1] += "-warm"
program.run(["invoke", "--search-root", tree, *warm], exit=False)  # every module imported, every kind declared
sys.setprofile(profile)
threading.setprofile(profile)
try:
    program.run(["invoke", "--search-root", tree, *argv], exit=False)
finally:
    sys.setprofile(None)
    with open(out, "w") as f:
        json.dump([name[len(tree) + 1:] for name in walk], f)
"""


def room(path: str) -> str:
    """The room of a module, by its path in the tree (see the docstring)."""
    parts = Path(path).parts
    if parts[:2] == ("entrypoints", "torchpod"):
        return "launcher"
    if parts[:2] == ("toolkit", "torchpod_toolkit"):
        return f"{parts[2]}/" if len(parts) > 3 else "ground"
    return path


def visits(steps: list[str]) -> list[str]:
    """``steps`` with each run of one value folded into one visit."""
    return [s for i, s in enumerate(steps) if i == 0 or steps[i - 1] != s]


def returns(steps: list[str]) -> int:
    """Visits to a place the walk had been in and left."""
    seen: set[str] = set()
    count = 0
    for place in visits(steps):
        count += place in seen
        seen.add(place)
    return count


def summary(walk: list[str]) -> dict:
    rooms = [room(p) for p in walk]
    return {"module_visits": len(visits(walk)), "modules": len(set(walk)), "module_returns": returns(walk),
            "room_visits": len(visits(rooms)), "rooms": sorted(set(rooms)), "room_returns": returns(rooms),
            "room_walk": visits(rooms)}


def render_walk(tree: Path, kind: str, scratch: Path) -> list[str]:
    """The folded module walk of one render of ``kind`` in ``tree``, into a folder of its own
    (a folder that holds a job already takes another path: its files kept and named)."""
    scratch = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=scratch))
    out, jobs = scratch / "walk.json", scratch / "out"
    argv = ["manifests", "--scheduler", kind, "--nodes", "2", "--image", IMAGE, "--out", str(jobs), "--", "train.py"]
    done = subprocess.run([sys.executable, "-c", TRACER, str(tree), str(out), *argv], cwd=scratch, text=True,
                          capture_output=True, env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1",
                                                    "PYTHONPATH": f"{tree / 'entrypoints'}:{tree / 'toolkit'}"})
    if done.returncode != 0 or not any(jobs.iterdir() if jobs.is_dir() else ()):
        raise SystemExit(f"bench/render_walk.py: the render of {kind} in {tree} failed:\n"
                         f"{done.stdout[-1500:]}{done.stderr[-1500:]}")
    return json.loads(readers.read_text(out, what=str(out), expected="the tracer's walk", cap=WALK_CAP))


def commit_of(rev: str) -> str:
    """The commit ``rev`` names, or one line and exit 1 (an option-like word is no revision)."""
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", "--end-of-options",
                            f"{rev}^{{commit}}"], capture_output=True, text=True)
    if rev.startswith("-") or found.returncode != 0:
        raise SystemExit(f"bench/render_walk.py: --before={rev!r} names no commit; expected a revision of this "
                         f"repository, such as {BEFORE}")
    return found.stdout.strip()


def tree_at(commit: str, into: Path) -> Path:
    """The files of ``commit`` under ``into`` (``git archive``, then tar)."""
    path, archive = into / "before", into / "before.tar"
    path.mkdir()
    for argv in (["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(archive), commit],
                 ["tar", "-x", "-f", str(archive), "-C", str(path)]):
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"bench/render_walk.py: {argv[0]} failed: {done.stderr.strip()[:300]}")
    return path


def out_file(text: str) -> Path:
    """``--out``: a file in a folder that exists (checked before any render)."""
    path = Path(text)
    if not text or not path.parent.is_dir() or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: expected a file in a folder that exists")
    return path


def kinds(text: str) -> list[str]:
    words = text.split(",")
    if not all(w in KINDS for w in words) or len(set(words)) != len(words):
        raise argparse.ArgumentTypeError(f"{text!r}: expected kinds among {', '.join(KINDS)}, separated by "
                                         "commas, each once")
    return words


def table(result: dict) -> str:
    rows = ["| kind | room returns, before / after | rooms visited | module returns, before / after |",
            "|---|---|---|---|"]
    for kind, trees in result["kinds"].items():
        b, a = trees["before"], trees["after"]
        rows.append(f"| {kind} | {b['room_returns']} / {a['room_returns']} | {b['room_visits']} / "
                    f"{a['room_visits']} | {b['module_returns']} / {a['module_returns']} |")
    m = result["median"]
    rows.append(f"| median | {m['before']['room_returns']} / {m['after']['room_returns']} | "
                f"{m['before']['room_visits']} / {m['after']['room_visits']} | "
                f"{m['before']['module_returns']} / {m['after']['module_returns']} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE, help="the earlier commit (default: %(default)s)")
    parser.add_argument("--kinds", type=kinds, default=",".join(KINDS))
    parser.add_argument("--out", type=out_file, default=str(ROOT / "bench" / "results" / "render_walk.json"))
    args = parser.parse_args(argv)
    commit_of(args.before)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="torchpod-bench-walk-") as tmp:
        before = tree_at(commit_of(args.before), Path(tmp))
        found = {kind: {name: summary(render_walk(tree, kind, Path(tmp)))
                        for name, tree in (("before", before), ("after", ROOT))} for kind in args.kinds}
    median = {name: {key: statistics.median(found[k][name][key] for k in found)
                     for key in ("room_returns", "room_visits", "module_returns")} for name in ("before", "after")}
    result = {"bench": "render_walk", "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "host": platform.node(), "python": platform.python_version(), "commit": commit,
              "before": args.before, "kinds": found, "median": median}
    scratch = args.out.with_name(f".{args.out.name}.tmp")
    scratch.write_text(json.dumps(result, indent=1) + "\n")
    os.replace(scratch, args.out)  # the whole result or the file as it was
    print(table(result))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
