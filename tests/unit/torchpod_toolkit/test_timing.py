"""torchpod_toolkit.timing: a build's export is a phase of its own, taken out of the build
phase it came from; a phase met twice adds up."""

from __future__ import annotations

from torchpod_toolkit import timing


def test_a_builds_export_is_its_own_phase_and_leaves_the_build_phase_it_came_from():
    clock = timing.Clock()
    clock.add("payload", 60.0)
    clock.add("layers", 5.0)
    clock.add("wheels", 3.0)
    clock.add("wheels", 1.5)  # a phase met twice adds up
    phases = clock.phases({"payload": 20.0, "layers": 1.0})
    assert list(phases) == list(timing.PHASES)
    assert (phases["payload"], phases["layers"], phases["export"], phases["wheels"], phases["probe"]) == \
        (40.0, 4.0, 21.0, 4.5, 0.0)
    assert timing.Clock().phases({"payload": 3.0})["payload"] == 0.0  # never below nothing
