"""`invoke build`, `push`, `test` and `demo` refuse bad input with one line and a non-zero exit."""

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
    (["push", "--registry", "http://x"], {}, "--registry='http://x' is not a repository; expected HOST[:PORT]"),
    (["test", "--tier", "everything"], {}, "--tier='everything'"),
    (["demo", "--kube"], {}, "--kube needs --manifest FILE"),
    (["demo", "--kube", "--manifest", "manifests/jobset/train.jobset.yaml", "--nodes", "3"], {},
     "--nodes with --kube: the manifest names its kind, nodes and command"),
    (["demo", "--kube", "--manifest", "manifests/jobset/train.jobset.yaml", "--gpus"], {}, "--gpus with --kube"),
    (["demo", "--kube", "--manifest", "manifests/runai/train.runai.yaml"], {}, "is a Run:ai job"),
    (["demo", "--kube", "--manifest", "/nonexistent.yaml"], {}, "--manifest='/nonexistent.yaml' cannot be read"),
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


GROUPED_CONFTEST = '''
import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:  # as tests/image and tests/cluster group theirs
        item.add_marker(pytest.mark.xdist_group(name=item.callspec.params["group"]))
'''
GROUPED_TESTS = '''
import os, time
import pytest

@pytest.mark.parametrize("group", ["a", "b", "c"])
@pytest.mark.parametrize("n", range(4))
def test_where(group, n):
    time.sleep(0.05)
    with open(os.environ["WHERE"], "a") as f:
        f.write(f"{group} {os.environ['PYTEST_XDIST_WORKER']}\\n")
'''


def test_the_tiers_xdist_groups_keep_each_group_on_one_worker(tmp_path):
    """The image and cluster tiers rely on `--dist loadgroup` keeping a group's tests on one
    worker (one emulated run per image, one Slurm cluster or control plane per module). Two
    ways it stopped without a word: a conftest hook that adds the groups after pytest-xdist's
    own has read them, and pytest 9.2's structured node IDs, to which pytest-xdist 3.8 no
    longer appends the group (pyproject.toml keeps pytest below 9.2). This runs a
    group-marked suite as `invoke test` runs a tier, and fails on either."""
    from tasks import XDIST_GROUPS

    (tmp_path / "conftest.py").write_text(GROUPED_CONFTEST)
    (tmp_path / "test_grouped.py").write_text(GROUPED_TESTS)
    where = tmp_path / "where.txt"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           *XDIST_GROUPS[:1], "2", *XDIST_GROUPS[2:], str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, env={**__import__("os").environ,
                                                                            "WHERE": str(where)}, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers: dict[str, set[str]] = {}
    for line in where.read_text().splitlines():
        group, worker = line.split()
        workers.setdefault(group, set()).add(worker)
    assert sorted(workers) == ["a", "b", "c"] and all(len(w) == 1 for w in workers.values()), workers
    # the tiers' own hooks add their groups first, as this suite's does: after xdist's, no group is read
    for tier in ("image", "cluster"):
        text = (ROOT / "tests" / tier / "conftest.py").read_text()
        assert "@pytest.hookimpl(tryfirst=True)\ndef pytest_collection_modifyitems(" in text, tier
