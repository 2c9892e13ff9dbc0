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
    # built from parts, so that this file holds no such reference itself
    for line in ("# see (issue " + "18, Must" + " 7)", "as seed" + " 001 shows", "from ../" + "shared/x",
                 "(Iss" + "ue 4)"):
        assert INTERNAL.search(line), line
    for line in ("NVIDIA/nvidia-container-toolkit GitHub #211", "--seed 1", "must be pinned"):
        assert not INTERNAL.search(line), line


# A top-level document named without a path (README.md, ARCHITECTURE.md) is one of this
# repository's; an upstream one carries its project and path (nccl-tests doc/PERFORMANCE.md).
TOP_DOCUMENT = re.compile(r"(?<![\w/.-])([A-Z][A-Z0-9_]+\.md)\b")


def _named_documents(text: str) -> set[str]:
    return set(TOP_DOCUMENT.findall(text))


def test_every_top_level_document_named_is_in_the_repository():
    found = []
    for path in _tracked_text_files():
        if path == ROOT / "tests/unit/test_words.py":  # its own examples below
            continue
        absent = sorted(n for n in _named_documents(path.read_text(encoding="utf-8", errors="replace"))
                        if not (ROOT / n).is_file())
        found += [f"{path.relative_to(ROOT)} names {n}" for n in absent]
    assert not found, "say the rule itself, or cite the upstream file by project and path:\n" + "\n".join(found)


def test_the_document_pattern_reads_names_not_paths():
    assert _named_documents("(the house limit, STYLE.md) and README.md") == {"STYLE.md", "README.md"}
    assert _named_documents("nccl-tests doc/PERFORMANCE.md, ext-net/README.md, docs/testing.md") == set()
