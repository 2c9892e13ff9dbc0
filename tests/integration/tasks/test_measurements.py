"""`invoke measurements --check`: the task runs from the command line against this tree,
writes nothing, and says the committed table is current."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import ROOT


def invoke(*args: str) -> subprocess.CompletedProcess:
    # the tree under test, whatever `pip install -e` points at (as pyproject's pytest pythonpath)
    path = os.pathsep.join([str(ROOT / "entrypoints"), str(ROOT / "toolkit"), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=ROOT, capture_output=True, text=True,
                          check=False, env={**os.environ, "PYTHONPATH": path}, timeout=120)


def test_check_passes_on_the_committed_page_and_writes_nothing():
    page = ROOT / "docs" / "measurements.md"
    before = page.stat().st_mtime_ns, page.read_bytes()
    proc = invoke("measurements", "--check")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "unchanged docs/measurements.md" and not proc.stderr.strip()
    assert (page.stat().st_mtime_ns, page.read_bytes()) == before


def test_the_task_documents_its_flag():
    proc = invoke("--help", "measurements")
    assert proc.returncode == 0, proc.stderr
    assert "--check" in proc.stdout and "bench/results/*.json" in proc.stdout
