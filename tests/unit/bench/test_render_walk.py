"""bench/render_walk.py's counting, on walks written by hand: rooms by path, runs folded,
returns counted; and its --kinds refused in one line."""

from __future__ import annotations

import argparse

import pytest

from paths import bench_script

walk = bench_script("render_walk")


@pytest.mark.parametrize("path, room", [
    ("tasks.py", "tasks.py"),
    ("entrypoints/torchpod/contract.py", "launcher"),
    ("entrypoints/torchpod/schedulers/slurm.py", "launcher"),
    ("toolkit/torchpod_toolkit/settings.py", "ground"),
    ("toolkit/torchpod_toolkit/manifests/kinds/jobset.py", "manifests/"),
    ("toolkit/torchpod_toolkit/imagebuild/definitions.py", "imagebuild/"),
])
def test_a_module_is_in_the_room_of_its_folder(path, room):
    assert walk.room(path) == room


def test_returns_count_visits_to_a_room_left_before_not_runs_in_one():
    steps = ["a", "a", "b", "b", "a", "c", "a", "b"]
    assert walk.visits(steps) == ["a", "b", "a", "c", "a", "b"]
    assert walk.returns(steps) == 3  # a, a, b again
    assert walk.returns(["a", "a", "a"]) == 0 and walk.returns([]) == 0


def test_a_summary_counts_modules_and_rooms_apart():
    here = "toolkit/torchpod_toolkit/manifests/"
    modules = ["tasks.py", f"{here}options.py", f"{here}spec.py", f"{here}options.py", "tasks.py"]
    found = walk.summary(modules)
    assert found["room_walk"] == ["tasks.py", "manifests/", "tasks.py"]
    assert (found["room_returns"], found["module_returns"], found["modules"]) == (1, 2, 3)


@pytest.mark.parametrize("text", ["jobset,jobset", "nope", "", "slurm,", "slurm;pbs"])
def test_kinds_outside_the_list_or_repeated_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected kinds among volcano, "):
        walk.kinds(text)
    assert walk.kinds("slurm,jobset") == ["slurm", "jobset"]
