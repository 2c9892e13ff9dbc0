"""The namespaced tasks from the command line: `invoke --list` names
every namespaced task and every old name and no bench helper (bench/_<name>.py), each bench
task runs its own program with the words after `--`, a helper cannot be run as a task, and
the old names and short flags still work as users typed them."""

from __future__ import annotations

import re

import pytest

from paths import bench_helpers, bench_programs
from tasks_cli import invoke

NAMESPACED = ("image.build", "image.push", "image.wheels", "image.lock", "jobs.manifests", "cluster.demo", "test",
              "measurements", "kube.build", "kube.up", "kube.down")
OLD_NAMES = ("build", "push", "wheels", "lock", "manifests", "demo", "bench-rendezvous", "test", "measurements")
BENCHES = bench_programs()


def test_the_list_names_every_task_and_every_old_name():
    proc = invoke("--list")
    assert proc.returncode == 0, proc.stderr
    listed = set(re.findall(r"^  (\S+)", proc.stdout, flags=re.MULTILINE))
    benches = {f"bench.{p.stem.replace('_', '-')}" for p in BENCHES}
    assert set(NAMESPACED) | set(OLD_NAMES) | benches == listed
    helpers = {h.stem.replace("_", "-").lstrip("-") for h in bench_helpers()}
    assert helpers and not [n for n in listed if n.replace("_", "-").split(".")[-1].lstrip("-") in helpers]


@pytest.mark.parametrize("name", ["bench._layer_figures", "bench.-layer-figures", "bench._layer-figures"])
def test_a_bench_helper_is_no_task(name):
    proc = invoke(name, "--", "--help")
    assert proc.returncode == 1 and f"No idea what '{name}' is!" in proc.stderr, proc.stderr
    assert not proc.stdout


@pytest.mark.parametrize("script", BENCHES, ids=lambda p: p.stem)
def test_a_bench_task_runs_its_script_with_the_words_after_dashes(script):
    proc = invoke(f"bench.{script.stem.replace('_', '-')}", "--", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {script.name} "), proc.stdout[:300]


def test_the_old_rendezvous_name_takes_its_flags_and_the_words_after_dashes():
    # argparse reads --nodes, then prints its help for --help: the flags reached the script
    proc = invoke("bench-rendezvous", "-n", "2", "--repeats", "1", "--", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: rendezvous.py ")


def test_a_bench_script_that_fails_fails_the_task():
    proc = invoke("bench.images", "--", "--rounds", "not-a-number")
    assert proc.returncode == 2
    assert "argument --rounds: invalid int value: 'not-a-number'" in proc.stderr


@pytest.mark.parametrize("name", ["manifests", "jobs.manifests"])
def test_help_names_site_lib_without_a_dash_letter(name):
    proc = invoke("--help", name)
    assert proc.returncode == 0, proc.stderr
    assert "--=" not in proc.stdout and re.search(r"^  --site-lib=STRING", proc.stdout, flags=re.MULTILINE)
    assert re.search(r"^  -s STRING, --scheduler=STRING", proc.stdout, flags=re.MULTILINE)


@pytest.mark.parametrize("args, needle", [
    (["image.build", "--arch", "sparc"], "--arch='sparc' is not a known architecture"),
    (["build", "-a", "sparc"], "--arch='sparc' is not a known architecture"),
    (["image.push", "--registry", "http://x"], "--registry='http://x' is not a repository; expected HOST[:PORT]"),
    (["push", "-r", "http://x"], "--registry='http://x' is not a repository; expected HOST[:PORT]"),
    (["image.wheels", "--arch", "sparc"], "--arch='sparc' is not a known architecture"),
    (["jobs.manifests", "-s", "lsf9", "-n", "2", "-i", "i:1", "--", "t.py"], "--scheduler='lsf9' is unknown"),
    (["cluster.demo", "--scheduler", "nope"], "--scheduler='nope' is unknown"),
    (["test", "-t", "everything"], "--tier='everything'"),
])
def test_bad_input_to_a_namespaced_task_or_an_old_short_flag_is_one_line(args, needle):
    proc = invoke(*args)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("torchpod: ") and needle in lines[0], proc.stderr
