"""Invoke tasks: build, push and test torchpod images. Tasks only orchestrate.

Everything they build or run comes from images/*.yaml through torchpod_toolkit; a
deliberate abort is ``Exit("what failed; how to fix")``. Command line beats code default.

The tasks live in namespaces (``invoke --list``): ``image.build``, ``image.push``,
``image.wheels``, ``jobs.manifests``, ``cluster.demo``, ``bench.<script>`` for every
``bench/*.py``, ``test`` and ``measurements``. The names before namespaces (``build``,
``push``, ``wheels``, ``manifests``, ``demo``, ``bench-rendezvous``) stay as aliases
(``ALIASES``) so the README's commands and users' scripts keep working.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import inspect
import os
import shlex
import sys
import time
from pathlib import Path

from invoke import Collection, Exit, Task, task

from torchpod import readers
from torchpod.contract import switch
from torchpod.errors import TorchpodError, one_line
from torchpod_toolkit import settings
from torchpod_toolkit.cluster.demo import WORKLOADS
from torchpod_toolkit.cluster.scenarios import SCENARIOS
from torchpod_toolkit.imagebuild.definitions import DEFAULT_IMAGE
from torchpod_toolkit.manifests.options import cli_options as manifest_options
from torchpod_toolkit.manifests.options import options as manifest_option_records

ROOT = Path(__file__).resolve().parent


class _Task(Task):
    """A task whose short flags are declared (``short={"arch": "a"}``), never guessed.

    invoke's auto_shortflags gives each option the first character of its name not yet
    taken, the dash of ``site-lib`` included (``--help manifests`` showed ``--=STRING``),
    and a flag's letter moved whenever an option was added before it (invoke 2.x/3.x,
    invoke/tasks.py, ``Task.arg_opts``). Here an option has the letter written next to its
    task or none; a letter that names no option, or one used twice, fails at load.
    """

    def __init__(self, body, short=None, **kwargs):
        super().__init__(body, auto_shortflags=False, **kwargs)
        self.short = dict(short or {})
        params = list(self.argspec(body).parameters)
        unknown = sorted(set(self.short) - set(params))
        letters = list(self.short.values())
        if unknown or len(set(letters)) != len(letters) or any(len(x) != 1 or not x.isalpha() for x in letters):
            raise ValueError(f"task {body.__name__}: short flags {self.short} must name its options "
                             f"({', '.join(params)}) with one distinct letter each")

    def arg_opts(self, name, default, taken_names):
        opts = super().arg_opts(name, default, taken_names)
        if name in self.short:
            opts["names"].append(self.short[name])
        return opts

    # The task's dotted name (``image.build``), set by _namespace: the settings table's key.
    path = ""

    def __call__(self, *args, **kwargs):
        # the settings the task reads, checked before it starts: a bad value is one line
        try:
            settings.check(os.environ, self.path)
        except TorchpodError as exc:
            raise _abort(exc) from None
        return super().__call__(*args, **kwargs)


def _task(short=None, **kwargs):
    """``@task`` with declared short flags (``_Task``)."""
    return task(klass=_Task, short=short, **kwargs)


def _after_dashes(c, what: str, form: str) -> list[str]:
    """The words after ``--``: sys.argv keeps the user's quoting, invoke's remainder is
    re-joined text (split again only where sys.argv has no ``--``, e.g. a task called
    from Python)."""
    if "--" in sys.argv:
        return sys.argv[sys.argv.index("--") + 1:]
    try:
        return shlex.split(c.remainder)
    except ValueError as exc:
        raise TorchpodError(f"{what}: {exc}; expected `{form}`") from None


def _defs():
    from torchpod_toolkit.imagebuild.definitions import load_definitions

    try:
        return load_definitions(ROOT / "images")
    except TorchpodError as exc:  # a bad definition is one line in every task, never a traceback
        raise _abort(exc) from None


def _abort(exc: TorchpodError) -> Exit:
    return Exit(f"torchpod: {one_line(exc)}", code=exc.exit_code)


def _arches(defn, arch: str):
    if not arch:
        return list(defn.arches)
    return [defn.arch(a) for a in arch.split(",") if a.strip()]


TEST_PLUGIN = ROOT / "tests" / "netplugin"


def test_plugin_tarball() -> tuple[Path, str]:
    """The tests' stand-in net plugin packed as a release (tests/netplugin/release.json)."""
    import json

    from torchpod_toolkit.imagebuild.sources import pack_release

    release = json.loads(readers.read_text(TEST_PLUGIN / "release.json", what="tests' plugin release.json",
                                           expected="the stand-in plugin's release record", cap=readers.DATA_CAP))
    path = pack_release(TEST_PLUGIN, release["files"], release["name"], release["version"],
                        ROOT / ".cache" / "sources")
    return path, release["version"]


# Short flags: the letters invoke had given each option before they were declared, kept so
# that users' scripts keep working; a new option gets one only by being added here.
@_task(short={"arch": "a", "ca_bundle": "c", "netplugin_version": "e", "image": "i", "netplugin_tarball": "n",
              "offline": "o", "netplugin_sha256": "t"}, help={
    "arch": "x86_64 or aarch64 (amd64/arm64 accepted; comma-separated for several); default: every arch of the image",
    "image": "image definition (a file stem in images/)",
    "offline": "install wheels only from .cache/wheels/<image>-<arch> (see `invoke wheels`)",
    "ca_bundle": "CA bundle passed to pip as a BuildKit secret (default: the host's, if any)",
    "netplugin_tarball": "variants: build the net plugin from this release tarball instead of the definition's "
                         "source ('test' = the tests' stand-in plugin)",
    "netplugin_version": "the version the tarball's plugin reports (with --netplugin-tarball)",
    "netplugin_sha256": "check the tarball against this sha256 (with --netplugin-tarball)",
})
def build(c, arch="", image=DEFAULT_IMAGE, offline=False, ca_bundle="", netplugin_tarball="",
          netplugin_version="", netplugin_sha256=""):
    """Build, verify and label images for one or more architectures."""
    from torchpod_toolkit.imagebuild import definitions, host, pipeline

    try:
        defn = definitions.select(_defs(), image)
        if netplugin_tarball == "test":
            tarball, version = test_plugin_tarball()
            defn = definitions.with_netplugin_source(defn, tarball, version)
        elif netplugin_tarball:
            if not netplugin_version:
                raise TorchpodError("--netplugin-tarball needs --netplugin-version: the version its plugin reports")
            defn = definitions.with_netplugin_source(defn, Path(netplugin_tarball), netplugin_version,
                                                     netplugin_sha256 or None)
        arches = _arches(defn, arch)
        bundle = Path(ca_bundle) if ca_bundle else host.default_ca_bundle()
        if bundle is not None and not bundle.is_file():
            raise TorchpodError(f"--ca-bundle={ca_bundle!r} is not a readable file; give a PEM bundle path")
        results = [pipeline.build(defn, a, root=ROOT, offline=offline, ca_bundle=bundle) for a in arches]
    except TorchpodError as exc:
        raise _abort(exc) from None
    print("\n" + pipeline.summary_table(results))
    print("\nwhere the time went (s; wheels and base run side by side, export is BuildKit's)")
    print(pipeline.phase_table(results), flush=True)
    return results


@_task(short={"image": "i", "insecure": "n", "registry": "r", "arch": "a"}, help={
    "registry": "where: HOST[:PORT] (its torchpod/<image> repository) or HOST[:PORT]/PATH/NAME[:TAG] "
                "(plain HTTP for loopback hosts or with --insecure)",
    "image": "image definition (a file stem in images/)",
    "arch": "x86_64 or aarch64; default: every arch of the image built here",
    "insecure": "talk plain HTTP to a non-loopback registry",
})
def push(c, registry="", image=DEFAULT_IMAGE, arch="", insecure=False):
    """Push an image's built arches as <tag>-<arch>, and <tag> (a manifest list when several);
    credentials from your Docker config (`docker login`)."""
    from torchpod_toolkit.imagebuild import definitions
    from torchpod_toolkit.imagebuild import registry as reg

    try:
        defn = definitions.select(_defs(), image)
        result = reg.push(defn, registry, arch=arch, insecure=insecure)
    except TorchpodError as exc:
        raise _abort(exc) from None
    if result.skipped:
        print(f"torchpod: not pushed: {', '.join(result.skipped)} (no local image; `invoke build --image "
              f"{defn.name} --arch {result.skipped[0]}` first): {result.manifest_ref} holds "
              f"{', '.join(a for a, _, _ in result.images)} only", file=sys.stderr)
    for arch_name, ref, digest in result.images:
        print(f"{arch_name:8} {result.repository}@{digest}  ({ref})")
    kind = f"manifest list of {len(result.images)} arches" if result.is_list else "the image above"
    print(f"{'image':8} {result.repository}@{result.manifest_digest}  ({result.manifest_ref}: {kind})")
    print(f"use: --image {result.repository}@{result.manifest_digest}")


@_task(short={"arch": "a", "image": "i", "offline": "o"}, help={
    "image": "image definition (a file stem in images/)",
    "arch": "x86_64 or aarch64; default: every arch of the image",
    "offline": "fetch nothing: fail naming the first locked file the wheelhouse lacks",
})
def wheels(c, image=DEFAULT_IMAGE, arch="", offline=False):
    """Fill the wheelhouse (~/.cache/torchpod/wheelhouse) with an image's locked files, hash-checked."""
    from torchpod_toolkit.imagebuild import definitions, host, locks, wheelhouse

    try:
        defn = definitions.select(_defs(), image)
        for a in _arches(defn, arch):
            lock = locks.load(ROOT / "images", defn, a, debian=False)
            fetched = wheelhouse.fill(defn, a, lock, home=wheelhouse.root(), ca_bundle=host.default_ca_bundle(),
                                      offline=offline)
            print(f"{defn.name} {a.name}: {len(lock.entries)} locked files in {wheelhouse.root()}, {fetched} fetched")
    except TorchpodError as exc:
        raise _abort(exc) from None


@_task(short={"arch": "a", "check": "k", "image": "i", "wheels_only": "w"}, help={
    "image": "image definition (a file stem in images/); default: every definition",
    "arch": "x86_64 or aarch64 (comma-separated for several); default: every arch the definition declares",
    "check": "write nothing: fail, one line each, where a lock no longer matches its definition, no longer "
             "resolves or a hash changed upstream",
    "wheels_only": "relock the wheels only (no Docker: the Debian lock is kept)",
})
def lock(c, image="", arch="", check=False, wheels_only=False):
    """Resolve each definition's wheels and Debian packages per arch into images/locks/ (sha256 of every file)."""
    from torchpod_toolkit.imagebuild import definitions

    try:
        defs = _defs()
        chosen = [definitions.select(defs, image)] if image else list(defs.values())
        work = [(d, a) for d in chosen for a in _arches(d, arch)]
    except TorchpodError as exc:
        raise _abort(exc) from None
    problems = _check_locks(defs, work) if check else _write_locks(work, wheels_only)
    for line in problems:
        print(f"torchpod: {one_line(line)}", file=sys.stderr)
    if problems:
        raise Exit(code=1)


def _check_locks(defs, work) -> list[str]:
    from torchpod_toolkit.imagebuild import host, locks, resolver

    out = locks.stray(ROOT / "images", defs)
    fetch = resolver.index_fetcher(host.default_ca_bundle())
    for defn, arch in work:
        try:
            if defn.base.debian:
                locks.load(ROOT / "images", defn, arch, debian=True)
            wheels = locks.load(ROOT / "images", defn, arch, debian=False)
        except TorchpodError as exc:
            if defn.ci or locks.wheel_path(ROOT / "images", defn, arch).exists():
                out.append(str(exc))
            else:  # a definition CI does not build may stay unlocked; its build refuses until it is
                print(f"{defn.name} {arch.name}: not locked (ci: false); {locks.relock(defn, arch)} before building it")
            continue
        try:
            indexes = [u for u in (defn.torch.index_url, defn.torch.extra_index_url) if u]
            wrong = locks.upstream_problems(wheels, indexes, fetch)
        except TorchpodError as exc:
            wrong = [f"{wheels.path}: {exc}"]
        out += wrong
        if not wrong:
            print(f"{defn.name} {arch.name}: {len(wheels.entries)} files locked, each still on its index "
                  "with its sha256")
    return out


def _write_locks(work, wheels_only: bool) -> list[str]:
    from torchpod_toolkit.imagebuild import host, locks, resolver

    out: list[str] = []
    refreshed: set[str] = set()
    bundle = host.default_ca_bundle()
    for defn, arch in work:
        try:
            wheels = resolver.lock_wheels(defn, arch, ROOT / ".cache", bundle)
            files = [(locks.wheel_path(ROOT / "images", defn, arch), locks.render(defn, arch, wheels, debian=False))]
            if defn.base.debian and not wheels_only:
                files.append((locks.deb_path(ROOT / "images", defn, arch),
                              locks.render(defn, arch, resolver.lock_debs(defn, arch, ROOT, refreshed), debian=True)))
        except TorchpodError as exc:
            out.append(f"{defn.name} {arch.name}: {exc}")
            continue
        for path, text in files:  # all of one (image, arch) or nothing: written only once both resolved
            path.parent.mkdir(parents=True, exist_ok=True)
            same = path.exists() and readers.read_text(path, what=str(path.relative_to(ROOT)), cap=readers.DATA_CAP,
                                                       expected="a lock `invoke lock` wrote") == text
            if not same:
                tmp = path.with_name(f".{path.name}.tmp")
                tmp.write_text(text)
                os.replace(tmp, path)
            print(f"{path.relative_to(ROOT)}: {'unchanged' if same else 'written'}")
    return out


# Test tiers, in the order `all` runs them (docs/testing.md, "Tiers"): unit has no processes, servers
# or Docker; integration starts processes and local servers; image and cluster need Docker.
TIERS = ("unit", "integration", "image", "cluster")
# pytest's runs per tier. The unit tier is pure (no process, server or shared state): every
# core (pytest-xdist). The integration tier's processes and servers each take ports the
# kernel hands out and folders of their own, so its tests run on every core too. The image
# tier's tests of one image and arch stay on one worker (tests/image/conftest.py groups
# them) and the workers split the images, most of whose time is one emulated process each.
# The cluster tier runs twice: side by side on more workers than cores (most of a test's time
# is waiting on rendezvous, Slurm's timers and containers starting; the tests of a module with
# a module-scoped cluster share one worker, tests/cluster/conftest.py), then the tests marked
# `solo`, which measure a bandwidth, one at a time with nothing beside them. Every run names
# its 30 slowest tests.
# Each run: (its name, pytest-xdist's flags, its selection).
XDIST_GROUPS = ("-n", "auto", "--dist", "loadgroup")
# three: on two cores, four workers beside three control planes once starved a pod's `import
# torch` for minutes (CPU pressure 96 %) and jobs missed their bounds
CLUSTER_WORKERS = ("-n", "3", "--dist", "loadgroup")
TIER_RUNS = {
    "unit": (("", ("-n", "auto"), ()),),
    "integration": (("", ("-n", "auto"), ()),),
    "image": (("", XDIST_GROUPS, ()),),
    "cluster": (("side by side", CLUSTER_WORKERS, ("-m", "not solo")), ("solo", (), ("-m", "solo"))),
}
DURATIONS = "--durations=30"


@_task(short={"build_images": "b", "pytest_args": "p", "tier": "t"}, help={
    "tier": ", ".join(TIERS) + " or all",
    "build_images": "build the CI images first, incrementally (default true; --no-build-images skips)",
    "pytest_args": "extra arguments for pytest, split as a shell splits words (no expansion)",
    "setup": "run `./setup.sh --tests` first: it installs the test tools that are absent (default true; "
             "--no-setup skips)",
})
def test(c, tier="all", build_images=True, pytest_args="", setup=True):
    """Run the test suite: unit, integration, inside the built images, containers as nodes.

    Each tier is its own pytest run, in that order, and its time is printed: the unit tier
    (a minute) fails before any image is built. A later tier's failure does not stop the
    tiers after it; the task fails at the end, naming each failed tier."""
    if tier not in (*TIERS, "all"):
        raise Exit(f"torchpod: --tier={tier!r}; expected one of {', '.join(TIERS)} or all", code=2)
    try:  # before any image is built: a bad line costs nothing
        extra = shlex.split(pytest_args)
    except ValueError as exc:
        raise Exit(f"torchpod: --pytest-args={pytest_args!r}: {exc}; expected pytest's arguments, "
                   "quoted as in a shell", code=2) from None
    chosen = TIERS if tier == "all" else (tier,)
    clock = _Clock()
    if setup:
        with clock("setup.sh --tests"):
            c.run(shlex.join([str(ROOT / "setup.sh"), "--tests"]), pty=False)
    failed = []
    for name in chosen:
        if name in ("image", "cluster") and build_images and not clock.has("build CI images"):
            with clock("build CI images"):
                _build_ci_images(c, prune=switch(os.environ, settings.PRUNE_BUILD_CACHE))
        codes = []
        for run_name, parallel, select in TIER_RUNS.get(name, (("", (), ()),)):
            with clock(f"tier {name}" + (f" ({run_name})" if run_name else "")):
                result = c.run(shlex.join(tier_command(name, [*select, *extra], parallel)), pty=False, warn=True)
            codes.append(0 if result is None else result.exited)
        # a run of a split tier may select nothing (pytest's exit 5: --pytest-args -k ...); all may not
        bad = [code for code in codes if code not in (0, 5)] or ([5] if set(codes) == {5} else [])
        if bad:
            failed.append(f"{name} (pytest exit {bad[0]})")
            if name == "unit" and len(chosen) > 1:
                break  # a logic error: no image is built for it
    print("\n" + clock.table("invoke test"), flush=True)
    if failed:
        raise Exit(f"torchpod: tests failed in tier {', '.join(failed)}; see each tier's output above", code=1)


def tier_command(name: str, extra: list[str], parallel: tuple[str, ...] = ()) -> list[str]:
    """The pytest command of one run of a tier; ``parallel`` (pytest-xdist's flags) only where
    pytest-xdist is installed."""
    flags = parallel if importlib.util.find_spec("xdist") else ()
    return [sys.executable, "-m", "pytest", f"tests/{name}", *flags, DURATIONS, *extra]


class _Clock:
    """Named wall-clock spans, printed as they end and as a closing table."""

    def __init__(self):
        self._now = time.monotonic
        self.spans: list[tuple[str, float]] = []

    def has(self, name: str) -> bool:
        return any(n == name for n, _ in self.spans)

    def __call__(self, name: str):
        @contextlib.contextmanager
        def span():
            print(f"==> {name}", flush=True)
            start = self._now()
            try:
                yield
            finally:
                self.spans.append((name, self._now() - start))
                print(f"==> {name}: {self.spans[-1][1]:.0f} s", flush=True)

        return span()

    def table(self, title: str) -> str:
        width = max([len(title), *(len(n) for n, _ in self.spans)])
        rows = [f"{title:<{width}}  {'s':>7}"]
        rows += [f"{n:<{width}}  {t:7.1f}" for n, t in self.spans]
        rows.append(f"{'total':<{width}}  {sum(t for _, t in self.spans):7.1f}")
        return "\n".join(rows)


def _payload_groups(defs) -> list[list]:
    """The CI definitions grouped by the wheels they install (base, Python, torch pins): one
    group's images share their payload stage and its layer (pytorch, pytorch-efa and
    pytorch-slingshot do), so they are built together, before that payload can be pruned."""
    groups: dict[tuple, list] = {}
    for defn in (d for d in defs.values() if d.ci):
        groups.setdefault((defn.base, defn.python, defn.torch), []).append(defn)
    # the plain image first: a variant is that image plus one layer
    return [sorted(group, key=lambda d: d.aws_ofi_nccl is not None) for group in groups.values()]


# Under this much free disk after a payload, CI drops the wheels no later build needs from the
# wheelhouse: the nine images, one payload's BuildKit cache and the whole wheelhouse (~13 GB)
# did not fit together on every CI machine.
MIN_FREE_BYTES = 25 << 30


def _build_ci_images(c, prune: bool) -> None:
    """Build both arches of every ``ci: true`` image, one payload group and arch at a time.

    Always (re)build: BuildKit's cache makes an unchanged tree a matter of seconds, and the
    images under test then always match the tree, never a stale build. With ``prune`` (CI,
    which builds once and never again) BuildKit's cache is freed after each group and arch:
    a payload stage (5-7 GB of unpacked wheels) and pip's cache of them (3-5 GB) are then
    held for one payload at a time, not for all five. The images keep their layers. CI's
    peak disk use fell from about 75 GB to about 40 (docs/testing.md, "Disk"). Then, only
    when the disk is low, the wheelhouse keeps just what later builds need (``trim``).
    """
    from torchpod_toolkit.imagebuild import host, locks, payload, pipeline, wheelhouse

    order = [(group, arch) for group in _payload_groups(_defs())
             for arch in dict.fromkeys(a.name for defn in group for a in defn.arches)]
    results = []
    for i, (group, arch) in enumerate(order):
        for defn in (d for d in group if any(a.name == arch for a in d.arches)):
            # a variant's upstream plugin source is unreachable here: CI builds it from
            # the tests' stand-in plugin, through the same definition key (docs/images.md, "CI")
            results += build(c, arch=arch, image=defn.name, netplugin_tarball="test" if defn.aws_ofi_nccl else "") or []
        if prune:
            stale = payload.drop_stale_payloads(host.docker_client())
            if stale:
                print(f"==> payload images no image stands on any more, removed: {', '.join(stale)}", flush=True)
            c.run(f"{host.find_builder().docker} builder prune -af", pty=False)
            later = {w.sha256 for g, a in order[i + 1:] for d in g if any(x.name == a for x in d.arches)
                     for w in locks.load(ROOT / "images", d, d.arch(a), debian=False).entries}
            dropped = wheelhouse.trim(wheelhouse.root(), later, MIN_FREE_BYTES)
            if dropped:
                print(f"==> disk under {MIN_FREE_BYTES >> 30} GiB free: {dropped} wheels no later build needs "
                      f"dropped from {wheelhouse.root()}", flush=True)
    if results:
        print("\nthe CI images: where the time went (s)\n" + pipeline.phase_table(results), flush=True)
    if prune and results:  # a payload no image of this tree stands on is 5 GB of nothing
        gone = payload.drop_payloads(host.docker_client(), {r.payload for r in results})
        if gone:
            print(f"==> payload images no CI image stands on, removed: {', '.join(gone)}", flush=True)


def _cluster_image(arch: str = "x86_64") -> str:
    defn = _defs()[DEFAULT_IMAGE]
    return defn.ref(defn.arch(arch))


@_task(short={"gpus": "g", "manifest": "m", "nodes": "n", "scheduler": "s", "timeout": "t", "workload": "w"},
       help={
    "scheduler": ", ".join(SCENARIOS),
    "nodes": "containers playing nodes",
    "workload": ", ".join(WORKLOADS),
    "timeout": "seconds before the job is stopped",
    "gpus": "give the nodes the host's GPUs (NCCL); default CPU and gloo",
    "manifest": "a Kubernetes manifest `invoke manifests` wrote: run the pods its operator would create "
                "(their args; the image under test stands in for the manifest's)",
    "kube": "with --manifest: apply it as written to a control plane started for the run, the real operator "
            "making the pods (`invoke kube.build` first)",
})
def demo(c, scheduler="volcano", nodes=2, workload="ddp_resnet", timeout=600, gpus=False, manifest="", kube=False):
    """Run one job on N containers as a scheduler would start it; stream output; summarize."""
    import signal

    from torchpod_toolkit.cluster import demo as demo_mod
    from torchpod_toolkit.imagebuild.host import docker_client

    def interrupt(signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    if kube:
        _kube_demo(manifest, float(timeout), {"scheduler": (scheduler, "volcano"), "nodes": (nodes, 2),
                                              "workload": (workload, "ddp_resnet"), "gpus": (gpus, False)})
        return
    try:
        req = demo_mod.DemoRequest(scheduler=scheduler, nodes=int(nodes), workload=workload,
                                   image=_cluster_image(), timeout=float(timeout), gpus=gpus,
                                   manifest=manifest)
        code = demo_mod.run(docker_client(), req)
    except TorchpodError as exc:
        raise _abort(exc) from None
    except KeyboardInterrupt:
        raise Exit("torchpod: demo interrupted; its containers and network were removed", code=130) from None
    if code:
        raise Exit("torchpod: demo job failed; see the node output and the summary above", code=code)


def _kube_demo(manifest: str, timeout: float, others: dict) -> None:
    """`invoke demo --kube --manifest FILE` (torchpod_toolkit.kube.demo): the manifest names
    the kind, the nodes and the command, so the options that would say them are refused."""
    from torchpod_toolkit.imagebuild.host import docker_client
    from torchpod_toolkit.kube import demo as kube_demo

    if not manifest:
        raise Exit("torchpod: --kube needs --manifest FILE; expected a Kubernetes manifest `invoke manifests` "
                   "wrote", code=2)
    given = [name for name, (value, default) in others.items() if value != default]
    if given:
        raise Exit(f"torchpod: --{given[0]} with --kube: the manifest names its kind, nodes and command, and the "
                   "stand-in's nodes have no GPUs behind their counts; expected --manifest and --timeout alone",
                   code=2)
    try:
        code = kube_demo.run(docker_client(), kube_demo.Request(Path(manifest), _cluster_image(), timeout, ROOT),
                             os.environ)
    except TorchpodError as exc:
        raise _abort(exc) from None
    except KeyboardInterrupt:
        raise Exit("torchpod: demo interrupted; the control plane, its operators and containers were stopped",
                   code=130) from None
    if code:
        raise Exit("torchpod: the job did not succeed; see the pods' lines and the table above", code=code)


# The manifests task's options: JobSpec's (declared once, with the field: jobspec.Option), then
# the task's own.
_MANIFEST_OPTIONS = [*manifest_options(), *(
    ("out", "", "directory to write the files into (default: print them)"),
    ("refresh", False, "re-render every worked example in manifests/ from its own Regenerate line"),
    ("force", False, "overwrite files in --out that exist with other content (by default they are kept and named)"),
    ("submit", False, "after writing the files (--out), run the Submit line's command on the job's file; print the "
                      "job's id and the command that watches it; exit with the submitter's status"),
)]


def _signature(options):
    """Give a task body ``(c, **opts)`` the signature invoke reads its flags and defaults
    from (invoke.tasks.Task.argspec: inspect.signature, which honours __signature__)."""
    def wrap(body):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        params = [inspect.Parameter(name, kind, default=value) for name, value, _ in options]
        body.__signature__ = inspect.Signature([inspect.Parameter("c", kind), *params])
        return body
    return wrap


# Short flags chosen for what people type most and would guess (-o for the output folder,
# -e and -v as docker spells env and volume); none for an option that rewrites or overwrites
# files (--refresh, --force) or opens the host (--privileged): those are typed out. None for
# --queue and --walltime either: no letter means them to every batch system (sbatch's -q is
# the QOS and -p the partition, qsub's and bsub's -q the queue; sbatch's -w is the node list
# and -t the time, bsub's -W the run limit, -t a deadline), and a letter a Slurm user reads
# as another option would submit a job that is not the one asked for.
MANIFEST_SHORT = {"scheduler": "s", "nodes": "n", "image": "i", "gpus_per_node": "g", "out": "o", "env": "e",
                  "volume": "v"}


def _with_default(text: str, value) -> str:
    """A flag's help with its default, unless the text says it already or there is none."""
    if isinstance(value, bool) or value in (None, "", ()) or "default" in text:
        return text
    return f"{text} (default: {value})"


@_task(short=MANIFEST_SHORT, help={name: _with_default(text, value) for name, value, text in _MANIFEST_OPTIONS},
       iterable=[name for name, how in manifest_option_records() if how.repeat])
@_signature(_MANIFEST_OPTIONS)
def manifests(c, **opts):
    """Write a ready-to-submit job for a scheduler: `invoke manifests --scheduler S ... -- train.py ARGS`."""
    from torchpod_toolkit.manifests import command as manifest_command

    try:
        if opts["refresh"]:
            manifest_command.refresh(ROOT / "manifests")
            return
        code = manifest_command.run(opts, _after_dashes(c, "the script and its arguments", "-- train.py [ARGS...]"))
    except TorchpodError as exc:
        raise _abort(exc) from None
    if code:
        raise Exit(code=code)


BENCH = ROOT / "bench"


def bench_programs(folder: Path) -> list[Path]:
    """The bench programs in ``folder``, each of which gets a ``bench.<name>`` task: every
    ``<name>.py`` whose name does not start with ``_``. A ``_<name>.py`` is a helper that
    programs import (bench/_layer_figures.py): it runs nothing on its own, so it gets no task."""
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


def bench_command(script: Path, args) -> list[str]:
    """``python bench/SCRIPT.py ARGS``: how every ``bench.*`` task runs its script."""
    return [sys.executable, str(script), *args]


def _run_bench(c, script: Path, flags: list[str]) -> None:
    try:
        args = [*flags, *_after_dashes(c, f"{script.relative_to(ROOT)}'s flags", "-- [FLAGS...]")]
    except TorchpodError as exc:
        raise _abort(exc) from None
    c.run(shlex.join(bench_command(script, args)), pty=False)


def _bench_doc(script: Path) -> str:
    """A bench task's docstring, from its script's: the first sentence up to its first colon
    (the title ``invoke --list`` shows), the whole text, and how to pass the script flags."""
    text = readers.read_text(script, what=str(script.relative_to(ROOT)), expected="a bench program",
                             cap=readers.DATA_CAP)
    doc = ast.get_docstring(ast.parse(text)) or ""
    sentence = " ".join(doc.split("\n\n", 1)[0].split()).split(". ", 1)[0].split(": ", 1)[0].rstrip(".")
    path, name = script.relative_to(ROOT), script.stem.replace("_", "-")
    return (f"{sentence or path}.\n\n{doc}\n\n"
            f"Runs `python {path}`; its own flags go after `--`, e.g. `invoke bench.{name} -- --help`.")


@_task(name="rendezvous", short={"nodes": "n", "repeats": "r"}, help={
    "nodes": "comma-separated node counts (default: the script's)",
    "repeats": "runs per node count and launcher, interleaved (default: the script's)",
})
def bench_rendezvous(c, nodes="", repeats=0):
    """Run bench/rendezvous.py (the task's docstring is the script's: set below)."""
    flags = [*(["--nodes", nodes] if nodes else []), *(["--repeats", str(repeats)] if repeats else [])]
    _run_bench(c, BENCH / "rendezvous.py", flags)


bench_rendezvous.__doc__ = _bench_doc(BENCH / "rendezvous.py")


def _bench_task(script: Path) -> Task:
    """A ``bench.<name>`` task for a script that takes no task flags: all of them after ``--``."""
    def body(c):
        _run_bench(c, script, [])
    body.__name__ = script.stem
    body.__doc__ = _bench_doc(script)
    return _Task(body, name=script.stem)


@_task(short={"check": "c"}, help={
    "check": "write nothing; fail when docs/measurements.md differs from bench/results/*.json",
})
def measurements(c, check=False):
    """Render the measurements table of docs/measurements.md from bench/results/*.json."""
    from torchpod_toolkit import measurements as measurements_mod

    page = ROOT / "docs" / "measurements.md"
    try:
        changed = measurements_mod.update(page, ROOT / "bench" / "results", check=check)
    except TorchpodError as exc:
        raise _abort(exc) from None
    print(f"{'wrote' if changed else 'unchanged'} {page.relative_to(ROOT)}")


@_task(name="build")
def kube_build(c):
    """Build the control plane's programs (etcd, kube-apiserver, ...) and each operator's from their Go modules.

    kube/ holds the control plane's module, kube/operators/<name>/ each operator's. Each
    missing program is one `go build` (niced, one package at a time) into a cache outside
    the checkout, keyed by its module's go.mod, go.sum and the Go version; each build's
    time is printed. An unchanged module builds nothing."""
    from torchpod_toolkit.kube import build as kube_build_mod

    try:
        print(kube_build_mod.build_all(kube_build_mod.plans_for(ROOT, os.environ), os.environ))
    except TorchpodError as exc:
        raise _abort(exc) from None


@_task(name="up", help={"timeout": "seconds to wait for every component's health check"})
def kube_up(c, timeout=180):
    """Start etcd, kube-apiserver, kube-controller-manager and kube-scheduler from kube.build's binaries.

    In a new folder under /tmp, certificates made at start, loopback only; prints the
    kubeconfig, the start time and the memory each component holds. `invoke kube.down` stops it."""
    from torchpod_toolkit.kube import build as kube_build_mod
    from torchpod_toolkit.kube import planeup

    try:
        plan = kube_build_mod.plan_for(ROOT, os.environ)
        print(planeup.report(planeup.up(plan.bindir, kube_build_mod.cache_root(os.environ), float(timeout))))
    except TorchpodError as exc:
        raise _abort(exc) from None


@_task(name="down")
def kube_down(c):
    """Stop the control plane `invoke kube.up` started and remove its folder."""
    from torchpod_toolkit.kube import build as kube_build_mod
    from torchpod_toolkit.kube import planeup

    try:
        stopped = planeup.down(kube_build_mod.cache_root(os.environ))
    except TorchpodError as exc:
        raise _abort(exc) from None
    print(f"stopped the control plane in {stopped.root}" if stopped else "no control plane was started")


def _alias(canonical: _Task, path: str) -> _Task:
    """``canonical`` under the name it had before namespaces: the same body, flags (repeatable
    ones too) and help, and a first line that names the namespaced form."""
    alias = _Task(canonical.body, short=canonical.short, help=dict(canonical.help), iterable=list(canonical.iterable))
    alias.__doc__ = f"Same as {path} (its name before namespaces).\n\n{canonical.__doc__}"
    alias.path = canonical.path
    return alias


def _declare_settings(root: Collection) -> None:
    """Each task learns its dotted name, and its --help gains the settings it reads, from the
    settings table (torchpod_toolkit.settings): never written by hand in a docstring."""
    for path in root.task_names:
        task = root[path]
        task.path = path
        section = settings.help_section(path)
        if section:
            task.__doc__ = f"{inspect.cleandoc(task.__doc__ or '')}\n\n{section}"


def _namespace() -> Collection:
    benches = {s.stem: _bench_task(s) for s in bench_programs(BENCH) if s.name != "rendezvous.py"}
    benches["rendezvous"] = bench_rendezvous
    root = Collection(
        test, measurements,
        Collection("image", build, push, wheels, lock),
        Collection("jobs", manifests),
        Collection("cluster", demo),
        Collection("kube", kube_build, kube_up, kube_down),
        Collection("bench", *(benches[name] for name in sorted(benches))),
    )
    _declare_settings(root)
    for old, path in ALIASES.items():
        root.add_task(_alias(root[path], path), name=old)
    return root


# The names the tasks had before namespaces -> their namespaced form. Each stays a task of
# its own at the top (invoke resolves a dotted name only inside its collection).
ALIASES = {"build": "image.build", "push": "image.push", "wheels": "image.wheels", "lock": "image.lock",
           "manifests": "jobs.manifests", "demo": "cluster.demo", "bench-rendezvous": "bench.rendezvous"}



# The tasks whose own words go after ``--`` (a training command, a bench script's flags),
# and the form their refusal shows.
AFTER_DASHES = {"jobs.manifests": "-- train.py [ARGS...]", "manifests": "-- train.py [ARGS...]"}


def _stray_word(root: Collection, argv: list[str]) -> str:
    """One line for a word before ``--`` that is neither an option of the task it follows,
    an option's value, nor another task: a training command typed without ``--``.

    invoke's own parser takes such a word for a task name and says "No idea what
    'train.py' is!" (invoke 2.x, invoke/parser/parser.py, ParseMachine.handle), which names
    neither the task nor the fix. The task's flags, and which of them take a value, are
    invoke's own Arguments (Task.get_arguments); '' when the line is well formed.
    """
    words = argv[1:argv.index("--")] if "--" in argv else argv[1:]
    names = set(root.task_names) | {a for aliases in root.task_names.values() for a in aliases}
    at = next((i for i, w in enumerate(words) if w in names), None)
    if at is None:
        return ""
    path = words[at]
    form = AFTER_DASHES.get(path) or ("-- [FLAGS...]" if path.startswith("bench.") else "")
    if not form:
        return ""
    takes_value = {n.replace("_", "-"): arg.kind is not bool for arg in root[path].get_arguments() for n in arg.names}
    i = at + 1
    while i < len(words):
        word = words[i]
        if word in names:  # the next task on the line
            return ""
        if not word.startswith("-"):
            return (f"'{word}' is not an option of invoke {path}; what the task runs goes after `--`: "
                    f"invoke {path} [OPTIONS] {form}")
        flag = word.lstrip("-").split("=", 1)[0].replace("_", "-")
        joined = "=" in word or (not word.startswith("--") and len(word) > 2)
        i += 2 if takes_value.get(flag) and not joined else 1
    return ""


ns = _namespace()
if Path(sys.argv[0]).name in ("invoke", "inv") or Path(sys.argv[0]).parent.name == "invoke":
    _stray = _stray_word(ns, sys.argv)
    if _stray:
        print(f"torchpod: {_stray}", file=sys.stderr)
        sys.exit(2)
