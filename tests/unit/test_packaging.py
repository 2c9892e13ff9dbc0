"""pyproject.toml: the launcher's distribution needs nothing; every third-party module the
build-host toolkit and tasks.py import is in the `toolkit` extra; `dev` is the toolkit plus
the test tools, and setup.sh installs `dev` and the host tools the benches need."""

from __future__ import annotations

import ast
import re
import sys

import pytest

from paths import ROOT

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# import name -> distribution name, where they differ
DISTRIBUTION = {"yaml": "pyyaml", "cyclonedx": "cyclonedx-python-lib", "packageurl": "packageurl-python"}
FIRST_PARTY = {"torchpod", "torchpod_toolkit"}


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+(?:\[[^\]]*\])?", r).group(0).lower() for r in requirements}


def third_party_imports(paths) -> set[str]:
    found = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                found |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - FIRST_PARTY


def test_the_launcher_distribution_has_no_dependencies():
    assert PROJECT["dependencies"] == []


def test_the_toolkit_extra_covers_every_module_the_toolkit_imports():
    imported = third_party_imports([*(ROOT / "toolkit").rglob("*.py"), ROOT / "tasks.py"])
    declared = {n.split("[")[0] for n in requirement_names(PROJECT["optional-dependencies"]["toolkit"])}
    assert imported, "the scan found no import at all"
    missing = {DISTRIBUTION.get(m, m).lower() for m in imported} - declared
    assert not missing, f"toolkit imports {sorted(missing)} but the `toolkit` extra does not declare them"


def test_dev_is_the_toolkit_plus_the_test_tools():
    dev = requirement_names(PROJECT["optional-dependencies"]["dev"])
    assert "torchpod[toolkit]" in dev
    assert {"pytest", "hypothesis", "pytest-testinfra"} <= dev


def _setup_array(text: str, name: str) -> list[str]:
    found = re.search(rf"^{name}=\(([^)]*)\)$", text, flags=re.MULTILINE)
    assert found, f"setup.sh has no {name}=(...) line"
    return found.group(1).split()


def test_setup_installs_only_what_the_first_command_needs_unless_asked_for_the_tests():
    setup = (ROOT / "setup.sh").read_text()
    core, tests = _setup_array(setup, "CORE_DEBS"), _setup_array(setup, "TEST_DEBS")
    assert {"docker.io", "mmdebstrap"} <= set(core)
    # the tests' tools: etcd, a registry, Slurm's client, a compiler, shellcheck, iperf3
    # (bench/allreduce.py bind-mounts it), tc and nsenter (the preflight throttle test)
    assert {"etcd-server", "docker-registry", "slurm-client", "gcc", "shellcheck", "iperf3", "iproute2"} <= set(tests)
    assert not set(tests) & set(core)
    assert 'python3 -m pip install -q --disable-pip-version-check -e ".[$1]"' in setup
