"""torchpod.schedulers.detectors: the detectors that claim an environment, in the order
they are tried; standalone comes after all of them and is not one of them."""

from __future__ import annotations

from torchpod.schedulers import SCHEDULERS, detectors, standalone


def test_every_scheduler_but_standalone_is_a_detector_in_the_packages_order():
    assert detectors.DETECTORS == SCHEDULERS[:-1] and SCHEDULERS[-1] is standalone
    assert standalone not in detectors.DETECTORS
    names = [d.NAME for d in detectors.DETECTORS]
    assert len(names) == len(set(names))


def test_the_innermost_scheduler_comes_first():
    # a task SkyPilot or Flux starts inside a Slurm allocation inherits SLURM_*: they win
    order = [d.NAME for d in detectors.DETECTORS]
    assert order.index("skypilot") < order.index("slurm") and order.index("flux") < order.index("slurm")
    assert order.index("mpi") > order.index("lsf") and order[-1] == "explicit"
