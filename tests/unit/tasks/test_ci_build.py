"""`invoke test`'s image builds (tasks._build_ci_images): every ``ci: true`` definition is built
for every arch it declares, exactly once; images that install the same wheels are built
together, arch by arch, and with pruning on (CI) BuildKit's cache is freed after each group
and arch, so one payload's stage and pip cache are held at a time (CI ran out of disk when
all five were held at once)."""

from __future__ import annotations

from paths import ROOT
from tasks_cli import load_tasks

TASKS = load_tasks("tasks_ci_build_under_test")


class _Recorder:
    def __init__(self):
        self.commands: list[str] = []

    def run(self, command, **_):
        self.commands.append(command)


def _trace(monkeypatch, prune: bool, trims: list | None = None) -> list[tuple]:
    """Every build and prune, in order, with nothing actually built; each wheelhouse trim's
    kept hashes go to ``trims``. The wheelhouse is never the user's: an earlier version of
    this test emptied the real one (~/.cache/torchpod/wheelhouse) on a host low on disk."""
    events: list[tuple] = []

    def build(c, arch="", image="", netplugin_tarball="", **_):
        events.append(("build", image, arch, netplugin_tarball))

    def trim(home, keep, min_free):
        assert home == wheelhouse.root() and min_free == TASKS.MIN_FREE_BYTES
        (trims if trims is not None else []).append(set(keep))
        return 0

    from torchpod_toolkit.imagebuild import host, payload, wheelhouse

    c = _Recorder()
    # no engine in the unit tier: the stale payloads' sweep is recorded apart, never run
    monkeypatch.setattr(host, "docker_client", lambda: None)
    monkeypatch.setattr(payload, "drop_stale_payloads", lambda client: [])
    monkeypatch.setenv("TORCHPOD_WHEELHOUSE", "/nonexistent/torchpod-test-wheelhouse")
    monkeypatch.setattr(wheelhouse, "trim", trim)
    monkeypatch.setattr(TASKS, "build", build)
    monkeypatch.setattr(c, "run", lambda command, **_: events.append(("prune", command)))
    TASKS._build_ci_images(c, prune=prune)
    return events


def test_with_pruning_the_wheelhouse_keeps_what_later_builds_install(monkeypatch):
    from torchpod_toolkit.imagebuild import locks

    defs = TASKS._defs()
    trims: list[set] = []
    events = _trace(monkeypatch, prune=True, trims=trims)
    assert len(trims) == sum(1 for e in events if e[0] == "prune") and trims[-1] == set()
    # after the first span, every file a later build installs is kept, and nothing else
    first = [e for e in events[:events.index(next(e for e in events if e[0] == "prune"))]]
    later = [e for e in events[len(first):] if e[0] == "build"]
    wanted = {w.sha256 for _, image, arch, _ in later
              for w in locks.load(ROOT / "images", defs[image], defs[image].arch(arch), debian=False).entries}
    assert trims[0] == wanted and wanted


def test_every_ci_image_and_arch_is_built_once_and_no_other(monkeypatch):
    defs = TASKS._defs()
    builds = [e[1:3] for e in _trace(monkeypatch, prune=False) if e[0] == "build"]
    expected = {(d.name, a.name) for d in defs.values() if d.ci for a in d.arches}
    assert sorted(builds) == sorted(expected)
    assert any(not d.ci for d in defs.values())  # a `ci: false` definition exists and was left out


def test_variants_get_the_stand_in_plugin_and_plain_images_none(monkeypatch):
    defs = TASKS._defs()
    for _, image, _, tarball in (e for e in _trace(monkeypatch, prune=False) if e[0] == "build"):
        assert tarball == ("test" if defs[image].aws_ofi_nccl else "")


def test_without_pruning_nothing_is_pruned(monkeypatch):
    assert all(e[0] == "build" for e in _trace(monkeypatch, prune=False))


def test_with_pruning_each_payload_and_arch_is_built_then_freed(monkeypatch):
    """Between two prunes, every build installs the same wheels for the same arch."""
    defs = TASKS._defs()
    events = _trace(monkeypatch, prune=True)
    assert events[-1][0] == "prune" and all("builder prune -af" in e[1] for e in events if e[0] == "prune")
    spans: list[list[tuple]] = [[]]
    for event in events:
        if event[0] == "prune":
            spans.append([])
        else:
            spans[-1].append(event)
    spans = [s for s in spans if s]
    assert len(spans) == sum(1 for e in events if e[0] == "prune")  # no prune without a build before it
    for span in spans:
        payloads = {(defs[e[1]].base, defs[e[1]].python, defs[e[1]].torch, e[2]) for e in span}
        assert len(payloads) == 1, span
    # the default image and its two variants share one payload: built in one span per arch,
    # the plain image first (a variant is that image plus one layer)
    default = [s for s in spans if any(e[1] == "pytorch" for e in s)]
    assert [[e[1] for e in s] for s in default] == [["pytorch", "pytorch-efa", "pytorch-slingshot"]] * 2
