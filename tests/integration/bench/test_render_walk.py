"""bench/render_walk.py for real: two kinds rendered under its profiler in an archive of this
very commit and in the checkout. The same code walks the same way, so both sides agree call
for call; the walk starts in tasks.py, reaches the job-writing room and ends back in the
task; the repository is left as it was; a --before that names no commit, or an --out in no
folder, is one line before anything is rendered."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from paths import ROOT

SCRIPT = ROOT / "bench" / "render_walk.py"


def _git(*args) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()


def test_the_same_tree_walks_the_same_way_on_both_sides(tmp_path):
    out, worktrees = tmp_path / "walk.json", _git("worktree", "list")
    edited = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD"]).returncode != 0
    done = subprocess.run([sys.executable, str(SCRIPT), "--before", "HEAD", "--kinds", "jobset,slurm",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert list(report["kinds"]) == ["jobset", "slurm"] and report["commit"] == _git("rev-parse", "--short", "HEAD")
    for kind, sides in report["kinds"].items():
        walk = sides["before"]["room_walk"]
        assert walk[:2] == ["tasks.py", "manifests/"] and walk[-1] == "tasks.py", (kind, sides)
        assert sides["before"]["module_visits"] > 20, (kind, sides)  # the render itself, not just the task
        if not edited:  # the archive is HEAD: the checkout walks the same way unless it was edited since
            assert sides["before"] == sides["after"], (kind, sides)
    assert "| jobset |" in done.stdout and "| median |" in done.stdout
    assert _git("worktree", "list") == worktrees and not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("args, says", [
    (["--before", "no-such-rev"], "--before='no-such-rev' names no commit"),
    (["--before=--force"], "--before='--force' names no commit"),  # an option of git's, not a revision
])
def test_a_before_that_names_no_commit_is_one_line(tmp_path, args, says):
    out = tmp_path / "walk.json"
    done = subprocess.run([sys.executable, str(SCRIPT), *args, "--kinds", "slurm", "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    expected = "expected a revision of this repository, such as f5126ff"
    assert done.stderr.strip() == f"bench/render_walk.py: {says}; {expected}"
    assert not out.exists()


def test_an_out_in_no_folder_is_refused_before_any_render(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--kinds", "slurm", "--out", str(tmp_path / "no" / "x.json")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().endswith("expected a file in a folder that exists")
