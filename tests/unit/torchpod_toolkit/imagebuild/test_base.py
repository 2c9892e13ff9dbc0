"""torchpod_toolkit.imagebuild.base, checked without an engine: a registry base is used as it is, the
build host's base is pinned only by a lock for that arch, whether a base must be bootstrapped
is read from the tag ensure_base gives it, and the commit's time stamps a build."""

from __future__ import annotations

import subprocess
from dataclasses import replace

from torchpod.arch import ARCHES
from torchpod_toolkit.imagebuild import base, commands, host, locks
from torchpod_toolkit.imagebuild.definitions import load_definitions

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


class _Images:
    """The docker SDK's ``client.images`` for a store holding the tags ``held``."""

    def __init__(self, held: set[str]):
        self.held, self.asked = held, []

    def get(self, ref: str):
        import docker

        self.asked.append(ref)
        if ref not in self.held:
            raise docker.errors.ImageNotFound(ref)
        return ref


class _Client:
    def __init__(self, held: set[str]):
        self.images = _Images(held)


def test_a_base_needs_a_bootstrap_exactly_when_no_image_has_the_tag_ensure_base_gives_it():
    x86 = ARCHES["x86_64"]
    debs = locks.load(ROOT / "images", DEFN, x86, debian=True)
    tag = commands.base_tag(DEFN, x86, {d.name: d.version for d in debs.entries if d.layer == "base"})
    empty, held = _Client(set()), _Client({tag})
    assert base.needs_bootstrap(empty, DEFN, x86, debs) and empty.images.asked == [tag]
    assert not base.needs_bootstrap(held, DEFN, x86, debs)
    assert base.ensure_base(held, None, DEFN, x86, ROOT / ".cache", debs) == tag  # the same tag, found
    # another lock's pins are another base: it would be bootstrapped
    assert base.needs_bootstrap(held, DEFN, x86, None)
    registry = replace(DEFN, base=replace(DEFN.base, debian=None, image="nvcr.io/nvidia/base:1"))
    assert not base.needs_bootstrap(None, registry, x86)  # never asks the engine


def test_the_commits_time_stamps_a_build_unless_source_date_epoch_says_otherwise(tmp_path, monkeypatch):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    assert base.source_date_epoch(tmp_path) == 1700000000
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert base.source_date_epoch(tmp_path) == 0  # no commit: time 0, never the clock
    commit = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%ct"], capture_output=True, text=True)
    assert base.source_date_epoch(ROOT) == int(commit.stdout.strip())
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "not a number")  # ignored, not a crash
    assert base.source_date_epoch(ROOT) == int(commit.stdout.strip())
