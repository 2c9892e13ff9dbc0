"""setup.sh's parts, as setup.sh itself reports them (``--dry-run`` runs no step): the README's
first command installs what it needs and nothing only the tests need."""

from __future__ import annotations

import subprocess

import pytest

from paths import ROOT


def plan(*flags: str) -> list[str]:
    out = subprocess.run(["bash", str(ROOT / "setup.sh"), "--dry-run", *flags], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    return [line.removeprefix("would run: ") for line in out.splitlines() if line.startswith("would run: ")]


def test_the_first_command_installs_only_what_it_needs_and_the_tests_part_adds_the_rest():
    first, emulation, tests = plan(), plan("--emulation"), plan("--tests")
    assert {"pip_install toolkit", "install_debs", "start_docker"} <= set(first)
    for step in ("pip_install dev", "install_host_torch", "install_skypilot", "install_qemu"):
        assert step in tests and step not in first, step
    assert set(emulation) - set(first) == {"install_qemu"}


@pytest.mark.parametrize(("flag", "shown"), [("--test", "'--test'"), ("-x", "'-x'"), ("--tests=1", "'--tests=1'"),
                                            ("--dry-run\n", "$'--dry-run\\n'"), ("a b", "a\\ b"),
                                            ("$(id)", "\\$\\(id\\)")])
def test_an_unknown_option_is_one_line_and_exit_2_before_anything_runs(flag, shown):
    proc = subprocess.run(["bash", str(ROOT / "setup.sh"), "--dry-run", flag], capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"setup.sh: unknown option {shown}; expected --emulation, --tests, "
                                        "--bench, --restart-docker, --dry-run or --help"]
