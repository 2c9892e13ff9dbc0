"""torchpod_toolkit.base, checked without an engine: a registry base is used as it is, the
build host's base is pinned only by a lock for that arch, and the commit's time stamps a build."""

from __future__ import annotations

import subprocess
from dataclasses import replace

from torchpod.arch import ARCHES
from torchpod_toolkit import base, host, locks
from torchpod_toolkit.definitions import load_definitions

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]


def test_a_registry_base_is_used_as_it_is_without_the_engine(tmp_path):
    registry = replace(DEFN, base=replace(DEFN.base, debian=None, image="nvcr.io/nvidia/base:1"))
    # client and builder None: asking the engine anything would fail
    assert base.ensure_base(None, None, registry, ARCHES["x86_64"], tmp_path) == "nvcr.io/nvidia/base:1"
    assert not any(tmp_path.iterdir())  # nothing bootstrapped
    assert base.host_debs(ROOT, registry) is None  # nothing to pin


def test_the_build_hosts_base_is_pinned_by_the_lock_for_its_arch_only(monkeypatch):
    machine = host.host_arch()
    assert base.host_debs(ROOT, DEFN) == locks.load(ROOT / "images", DEFN, machine, debian=True)
    other = next(a for a in DEFN.arches if a != machine)
    only_other = replace(DEFN, arches=(other,))
    assert base.host_debs(ROOT, only_other) is None  # its build stage bootstraps unpinned


def test_the_commits_time_stamps_a_build_unless_source_date_epoch_says_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert base.source_date_epoch(tmp_path) == 1700000000
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert base.source_date_epoch(tmp_path) == 0  # no commit: time 0, never the clock
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], capture_output=True, text=True)
    assert base.source_date_epoch(ROOT) == int(commit.stdout.strip())
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "not a number")  # ignored, not a crash
    assert base.source_date_epoch(ROOT) == int(commit.stdout.strip())
