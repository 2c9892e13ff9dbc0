"""`invoke build` / `invoke push` refuse bad input with one line and a non-zero exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from paths import ROOT
from tasks_cli import invoke


@pytest.mark.parametrize("args, env, needle", [
    (["build", "--arch", "sparc"], {}, "--arch='sparc' is not a known architecture"),
    (["build", "--image", "nope"], {}, "--image='nope' is not defined; expected one of"),
    (["build", "--arch", "x86_64", "--ca-bundle", "/nonexistent.pem"], {}, "--ca-bundle='/nonexistent.pem'"),
    (["build", "--arch", "x86_64"], {"DOCKER_HOST": "unix:///nonexistent/docker.sock"},
     "no Docker engine at unix:///nonexistent/docker.sock"),
    (["push", "--registry", "http://x"], {}, "--registry='http://x'; expected HOST:PORT"),
    (["test", "--tier", "everything"], {}, "--tier='everything'"),
])
def test_bad_input_is_one_line_and_non_zero(args, env, needle):
    proc = invoke(*args, **env)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert needle in lines[0]
    assert lines[0].startswith("torchpod: ")


def test_every_tier_collects_together():
    # `invoke test` collects all tiers in one pytest run: a module name or a `from conftest
    # import` that resolves to another tier's file breaks collection only there.
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests", "--collect-only", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "error" not in proc.stdout.lower().split("collected")[-1], proc.stdout[-3000:]
