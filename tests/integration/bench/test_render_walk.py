"""bench/render_walk.py for real: two kinds rendered under its profiler in a worktree of this
very commit and in the checkout. The same code walks the same way, so both sides agree call
for call; the walk starts in tasks.py and reaches the job-writing room; an unknown --before
is one line."""

from __future__ import annotations

import json
import subprocess
import sys

from paths import ROOT

SCRIPT = ROOT / "bench" / "render_walk.py"


def test_the_same_tree_walks_the_same_way_on_both_sides(tmp_path):
    out = tmp_path / "walk.json"
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--", "tasks.py", "toolkit",
                            "entrypoints"], capture_output=True, text=True).stdout
    done = subprocess.run([sys.executable, str(SCRIPT), "--before", head, "--kinds", "jobset,slurm", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert list(report["kinds"]) == ["jobset", "slurm"]
    for kind, sides in report["kinds"].items():
        assert sides["before"]["room_walk"][:2] == ["tasks.py", "manifests/"], (kind, sides)
        assert sides["before"]["module_visits"] > 20, (kind, sides)  # the render itself, not just the task
        if not dirty:  # the worktree is HEAD: the checkout walks the same way unless it was edited
            assert sides["before"] == sides["after"], (kind, sides)
    assert "| jobset |" in done.stdout and "| median |" in done.stdout
    listed = subprocess.run(["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True).stdout
    assert "torchpod-bench-walk-" not in listed  # the worktree is removed afterwards


def test_a_before_that_names_no_commit_is_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--before", "no-such-rev", "--kinds", "slurm",
                           "--out", str(tmp_path / "walk.json")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("bench/render_walk.py: --before='no-such-rev' names no commit")
    assert not (tmp_path / "walk.json").exists()
