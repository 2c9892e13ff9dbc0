"""torchpod.schedulers.protocol: every module in SCHEDULERS is a Detector, at run time (the
members and their parameters) and for the type checker (mypy accepts each real module and
refuses a module that lacks a member or gets one wrong)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import torchpod
from torchpod.schedulers import BY_NAME, SCHEDULERS
from torchpod.schedulers.protocol import Detector

MEMBERS = sorted(n for n in vars(Detector) if not n.startswith("_"))
ENTRYPOINTS = Path(torchpod.__file__).resolve().parents[1]


def test_the_protocol_names_what_the_package_uses():
    assert MEMBERS == ["MARKERS", "NAME", "STRONG", "claims", "detect"]


@pytest.mark.parametrize("module", SCHEDULERS, ids=lambda m: m.NAME)
def test_each_module_has_every_member_at_run_time(module):
    assert isinstance(module.NAME, str) and BY_NAME[module.NAME] is module
    assert isinstance(module.STRONG, bool)
    assert isinstance(module.MARKERS, tuple) and all(isinstance(m, str) for m in module.MARKERS)
    for name in ("claims", "detect"):
        want = list(inspect.signature(getattr(Detector, name)).parameters)[1:]  # without self
        assert list(inspect.signature(getattr(module, name)).parameters) == want, (module.NAME, name)


GOOD = '''
from __future__ import annotations
from torchpod.options import UserOptions
from torchpod.schedulers.common import Detection, Env, Facts
NAME = "broken"
STRONG = False
MARKERS = ("A_VAR",)
def claims(env: Env, user: UserOptions) -> bool:
    return False
def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:
    raise NotImplementedError
'''
# one way each to break the contract: the line of GOOD replaced, and by what
BROKEN = {
    "no_detect": ("def detect(env: Env, facts: Facts, user: UserOptions) -> Detection:\n"
                  "    raise NotImplementedError\n", ""),
    "no_name": ('NAME = "broken"\n', ""),
    "markers_a_string": ('MARKERS = ("A_VAR",)\n', 'MARKERS = "A_VAR"\n'),
    "claims_without_user": ("def claims(env: Env, user: UserOptions) -> bool:", "def claims(env: Env) -> bool:"),
    "detect_returns_a_dict": ("-> Detection:", "-> dict:"),
}


def test_mypy_accepts_every_module_and_refuses_each_broken_one(tmp_path, require_tool):
    require_tool("mypy", "mypy (the [dev] extra: pip install -e '.[dev]')")
    lines = ["from torchpod.schedulers.protocol import Detector"]
    (tmp_path / "good_mod.py").write_text(GOOD)
    lines += ["import good_mod", "good: Detector = good_mod"]
    for module in SCHEDULERS:
        lines += [f"from torchpod.schedulers import {module.__name__.rsplit('.', 1)[1]} as real_{module.NAME}",
                  f"ok_{module.NAME}: Detector = real_{module.NAME}"]
    expected = set()
    for name, (old, new) in BROKEN.items():
        assert old in GOOD, name
        (tmp_path / f"{name}.py").write_text(GOOD.replace(old, new))
        lines += [f"import {name}", f"bad_{name}: Detector = {name}"]
        expected.add(len(lines))
    (tmp_path / "check.py").write_text("\n".join(lines) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "/dev/null", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), "check.py"],
        cwd=tmp_path, env={"MYPYPATH": str(ENTRYPOINTS), "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=300,
    )
    flagged = {int(line.split(":")[1]) for line in proc.stdout.splitlines() if ": error:" in line}
    assert flagged == expected, proc.stdout + proc.stderr
