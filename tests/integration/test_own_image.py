"""docs/own-image.md's wheel, built as the page says: the command in its first code block,
run in a copy of the project, makes one pure-Python wheel that installs with no other
package into an empty virtual environment, whose `torchpod` then answers."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import venv

from torchpod import __version__

from paths import ROOT

PAGE = ROOT / "docs" / "own-image.md"
# what a wheel of the project is built from (pyproject.toml: packages under these, its readme)
SOURCES = ("pyproject.toml", "README.md", "entrypoints", "toolkit")


def page_command() -> list[str]:
    """The page's wheel command, as written (its comment dropped)."""
    blocks = re.findall(r"```\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    (line,) = [ln for b in blocks for ln in b.splitlines() if "pip wheel" in ln]
    return shlex.split(line, comments=True)


def test_the_pages_wheel_installs_alone_and_runs(tmp_path):
    project = tmp_path / "clone"
    project.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, project / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(source, project / name)
    command = page_command()
    assert command[:4] == ["python3", "-m", "pip", "wheel"] and "--no-deps" in command, command
    built = subprocess.run([sys.executable, *command[1:]], cwd=project, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (project / "dist").glob("torchpod-*.whl")
    assert wheel.name == f"torchpod-{__version__}-py3-none-any.whl", wheel.name
    env = tmp_path / "env"
    venv.create(env, with_pip=True)
    pip = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stderr[-2000:]
    listed = subprocess.run([str(env / "bin" / "python"), "-m", "pip", "list", "--format", "freeze"],
                            capture_output=True, text=True, timeout=120).stdout.split()
    assert [p for p in listed if not p.startswith(("pip==", "setuptools=="))] == [f"torchpod=={__version__}"], listed
    answer = subprocess.run([str(env / "bin" / "torchpod"), "--version"], capture_output=True, text=True, timeout=60)
    assert answer.returncode == 0 and __version__ in answer.stdout + answer.stderr, (answer.stdout, answer.stderr)
