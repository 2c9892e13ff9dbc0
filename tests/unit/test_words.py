"""The repository speaks to a reader outside the project: no code comment, docstring, doc or
test names a tracker issue of this project, one of its numbered requirements, or a
background document the repository does not hold. (Upstream issues are cited by their
repository: `NVIDIA/nvidia-container-toolkit GitHub #211`.)"""

from __future__ import annotations

import re
import subprocess

from paths import ROOT

INTERNAL = re.compile(r"\((?:issue|Issue) \d+|\bissue \d+ (?:gives|says|asks)|\bMust \d+|\bseed \d{3}\b"
                      r"|\bseeds?' blocks|\.\./shared/", re.ASCII)


def _tracked_text_files() -> list:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / n for n in names if n.endswith((".py", ".md", ".sh", ".yaml", ".toml", ".cfg", ".txt"))
            and not n.startswith("tests/reference/")]


def test_no_file_refers_to_the_projects_own_issues_or_background_documents():
    found = []
    for path in _tracked_text_files():
        if path == ROOT / "tests/unit/test_words.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if INTERNAL.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "\n".join(found)


def test_the_pattern_finds_what_it_is_for():
    for line in ("# see (issue 18, Must 7)", "as seed 001 shows", "from ../shared/seeds", "(Issue 4)"):
        assert INTERNAL.search(line), line
    for line in ("NVIDIA/nvidia-container-toolkit GitHub #211", "--seed 1", "must be pinned"):
        assert not INTERNAL.search(line), line
