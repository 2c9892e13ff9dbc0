"""Build the control plane's programs (etcd, kube-apiserver, ...) from the Go module in ``kube/``,
and each operator's (the Kubeflow training operator, JobSet, ...) from its own module under
``kube/operators/<name>/``.

``kube/tools.go`` names each program once: a blank import of its main package, the
program's name in a trailing comment where it is not the package's last element.
``kube/go.mod`` requires k8s.io/kubernetes at one release and replaces every k8s.io staging
module with its published release ``v0.<minor>.<patch>``: k8s.io/kubernetes requires those
at ``v0.0.0`` and replaces them with ``./staging/src/...`` in its own go.mod (kubernetes
v1.37.2, go.mod), which a module that depends on it cannot follow, while the staging
folders are published unchanged as their own modules at ``v0.<minor>.<patch>``
(kubernetes, staging/README.md). etcd is required at the version the release names
(kubernetes, build/dependencies.yaml, ``etcd``), whose main package is the root of
go.etcd.io/etcd/server/v3 (etcd v3.7.0, server/main.go).

Each program is built as upstream builds its release binaries (kubernetes v1.37.2,
hack/lib/golang.sh: ``CGO_ENABLED=0`` for every one of these, ``-trimpath``, the tags
``selinux,notest,grpcnotrace``, ``-ldflags -s -w`` and the version variables of
hack/lib/version.sh), one ``go build`` per program, under ``nice`` and one package at a
time (``-p 1``): the build host is shared. The binaries land in ``<cache>/<key>/bin/``,
outside the checkout, where the key hashes go.mod, go.sum, the Go version and these flags;
each is written under a temporary name and renamed, so a killed build leaves none half
written. Go's own build cache (``go env GOCACHE``) is reused across keys.

An operator's module is a module of its own because each operator's dependency graph pins
its own k8s.io versions (the training operator v1.8.1 k8s.io/api v0.29, JobSet v0.11.0
v0.35, ...), which one module with the plane's v0.37 replaces would override. Its go.mod
requires the operator's module at one release and carries the replaces that module's own
go.mod needs (a dependent does not inherit them); its tools.go names the programs, every
one a package of that module. It is built with the same flags, stripped (``-s -w``) with no
version variables (each operator reports its module version from its own build info), into
``<cache>/<key>/bin/`` keyed the same way.

It never vendors or copies upstream source, writes into the checkout or runs a shell.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure, TorchpodError, one_line

MODULE = Path("kube")  # the Go module, relative to the repository root
OPERATORS = MODULE / "operators"  # one Go module per operator below it
PLANE = "plane"  # the name the control plane's module goes by in tables and on the command line
FILE_CAP = 1 << 20  # go.mod, go.sum and tools.go are tens of kilobytes
KUBERNETES = "k8s.io/kubernetes"
# The Go the build machines carry when it is not on PATH.
GO_FALLBACK = Path("/usr/local/go/bin/go")
# Upstream's release flags (module docstring). The version variables are set in both
# packages that hold them (kubernetes v1.37.2, hack/lib/version.sh, kube::version::ldflags).
TAGS = "selinux,notest,grpcnotrace"
VERSION_PACKAGES = ("k8s.io/client-go/pkg/version", "k8s.io/component-base/version")
FLAGS = ("-p", "1", "-trimpath", "-tags", TAGS)
BUILD_ENV = {"CGO_ENABLED": "0"}
NICE = ("nice", "-n", "19")

_SEMVER = re.compile(r"v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_RELEASE = re.compile(r"v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?")
_MODULE_PATH = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~/-]*")
_PROGRAM = re.compile(r"[a-z0-9][a-z0-9-]*")
_IMPORT = re.compile(r'_\s+"([^"]*)"\s*(?://\s*(\S*))?')


@dataclass(frozen=True)
class Program:
    """One program: its file name in the cache and its Go main package."""

    name: str
    package: str


@dataclass(frozen=True)
class GoMod:
    """What go.mod requires (path -> version) and replaces (path -> (path, version))."""

    requires: Mapping[str, str]
    replaces: Mapping[str, tuple[str, str]]


@dataclass(frozen=True)
class Plan:
    """Everything a build needs, decided before anything runs."""

    module: Path  # the Go module's folder
    go: str  # the go command
    kubernetes: str  # the control plane's release, e.g. v1.37.2 ("" for an operator's module)
    programs: tuple[Program, ...]
    bindir: Path
    name: str = PLANE  # "plane", or the operator's folder name under kube/operators/
    upstream: str = KUBERNETES  # the module whose programs these are
    version: str = ""  # its pinned version (the plane's: ``kubernetes``)

    def missing(self) -> tuple[Program, ...]:
        return tuple(p for p in self.programs if not (self.bindir / p.name).is_file())


@dataclass(frozen=True)
class Built:
    """One program's outcome: seconds its build took, or None when it was already there."""

    name: str
    seconds: float | None


def read_text(path: Path, cap: int = FILE_CAP) -> str:
    """A regular file of at most ``cap`` bytes, strict UTF-8, read by the launcher's bounded
    reader (torchpod.readers); anything else is one line naming it. A symbolic link is refused
    before that reader, which follows links: the module's files are the checkout's own."""
    if path.is_symlink() or not path.is_file():
        raise InputError(f"{path}: expected a regular file of the Go module in {MODULE}/")
    return readers.read_text(path, what=str(path), expected="a go.mod, go.sum or tools.go", cap=cap)


def _directives(text: str) -> Iterator[tuple[str, str, int]]:
    """(verb, rest, line number) of each go.mod directive, blocks unfolded, comments dropped."""
    block = ""
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("//", 1)[0].strip()
        if not line:
            continue
        if block:
            if line == ")":
                block = ""
            else:
                yield block, line, number
            continue
        verb, _, rest = line.partition(" ")
        if rest.strip() == "(":
            block = verb
        else:
            yield verb, rest.strip(), number


def parse_go_mod(text: str, where: str) -> GoMod:
    """The requires and replaces of a go.mod (the forms ``go mod tidy`` writes)."""
    requires: dict[str, str] = {}
    replaces: dict[str, tuple[str, str]] = {}
    for verb, rest, number in _directives(text):
        words = rest.split()
        if verb == "require":
            if len(words) != 2 or not _MODULE_PATH.fullmatch(words[0]):
                raise InputError(f"{where}:{number}: require {rest!r}; expected `PATH VERSION`")
            requires[words[0]] = words[1]
        elif verb == "replace":
            arrow = words.index("=>") if "=>" in words else -1
            if arrow not in (1, 2) or len(words) != arrow + 3 or not _MODULE_PATH.fullmatch(words[0]):
                raise InputError(f"{where}:{number}: replace {rest!r}; expected `PATH [VERSION] => PATH VERSION`")
            replaces[words[0]] = (words[-2], words[-1])
    return GoMod(requires=requires, replaces=replaces)


def kubernetes_release(mod: GoMod, where: str) -> str:
    """The k8s.io/kubernetes release go.mod requires, checked against every staging replace:
    each k8s.io module is replaced by itself at ``v0.<minor>.<patch>`` of that release."""
    version = mod.requires.get(KUBERNETES, "")
    found = _SEMVER.fullmatch(version)
    if not found:
        raise InputError(f"{where}: require {KUBERNETES} {version or '(none)'}; expected a release vX.Y.Z")
    staging = f"v0.{found.group(2)}.{found.group(3)}"
    pins = {old: new for old, new in mod.replaces.items() if old.startswith("k8s.io/")}
    if not pins:
        raise InputError(f"{where}: no k8s.io replace; expected each staging module pinned to {staging} "
                         f"(`replace k8s.io/api => k8s.io/api {staging}`, ...)")
    wrong = sorted(f"{old} => {' '.join(new)}" for old, new in pins.items() if new != (old, staging))
    if wrong:
        raise InputError(f"{where}: {'; '.join(wrong)}; expected each k8s.io module replaced by itself at "
                         f"{staging}, the staging release of {KUBERNETES} {version}")
    return version


def parse_tools(text: str, where: str) -> tuple[Program, ...]:
    """The programs ``tools.go`` names: ``_ "PACKAGE"``, optionally ``// NAME``."""
    programs: list[Program] = []
    for number, line in enumerate(text.splitlines(), 1):
        found = _IMPORT.fullmatch(line.strip())
        if not found:
            continue
        package, name = found.group(1), found.group(2)
        name = package.rsplit("/", 1)[-1] if name is None else name
        if not _MODULE_PATH.fullmatch(package) or not _PROGRAM.fullmatch(name):
            raise InputError(f"{where}:{number}: {line.strip()!r}; expected `_ \"PACKAGE\"` with an optional "
                             "`// NAME` (lower case letters, digits and -)")
        programs.append(Program(name, package))
    names = [p.name for p in programs]
    if not programs or len(set(names)) != len(names):
        raise InputError(f"{where}: programs {names}; expected one blank import per program, each name once")
    return tuple(programs)


def cache_key(go_mod: str, go_sum: str, go_version: str) -> str:
    """What decides the binaries' bytes, hashed: the pins, their checksums, the Go that
    compiles them and the flags. Lengths are hashed too, so no two inputs run together."""
    digest = hashlib.sha256()
    recipe = json.dumps([FLAGS, BUILD_ENV, VERSION_PACKAGES])
    for part in (go_mod, go_sum, go_version, recipe):
        data = part.encode("utf-8")
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()[:16]


def version_ldflags(release: str) -> str:
    """``-ldflags``: stripped, with the release in both version packages (what
    ``kubectl version`` and ``/version`` report)."""
    found = _SEMVER.fullmatch(release)
    if not found:
        raise InputError(f"Kubernetes release {release!r}; expected vX.Y.Z")
    values = {"gitVersion": release, "gitMajor": found.group(1), "gitMinor": found.group(2)}
    return " ".join(["-s", "-w", *(f"-X {package}.{key}={value}"
                                   for package in VERSION_PACKAGES for key, value in values.items())])


def build_argv(go: str, program: Program, out: Path, release: str) -> list[str]:
    """The one command that builds ``program`` into ``out``: with the Kubernetes ``release`` in
    its version variables, or, where ``release`` is "" (an operator), stripped only."""
    ldflags = version_ldflags(release) if release else "-s -w"
    return [*NICE, go, "build", *FLAGS, "-ldflags", ldflags, "-o", str(out), program.package]


def cache_root(env: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/torchpod/kube``, else ``$HOME/.cache/torchpod/kube``."""
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]) / "torchpod" / "kube"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".cache" / "torchpod" / "kube"
    raise InputError("neither XDG_CACHE_HOME nor HOME is set; expected one of them to place the Kubernetes build")


def find_go(env: Mapping[str, str]) -> str:
    """The go command: on PATH, else where the build machines carry it."""
    found = shutil.which("go", path=env.get("PATH", ""))
    if found:
        return found
    if GO_FALLBACK.is_file():
        return str(GO_FALLBACK)
    raise InputError(f"no `go` on PATH and none at {GO_FALLBACK}; expected Go 1.26 or later (its go.mod's `go` line)")


def make_plan(root: Path, env: Mapping[str, str], go: str, go_version: str) -> Plan:
    """Read and check the Go module under ``root`` and decide where its binaries go."""
    module = root / MODULE
    go_mod, go_sum = read_text(module / "go.mod"), read_text(module / "go.sum")
    release = kubernetes_release(parse_go_mod(go_mod, str(module / "go.mod")), str(module / "go.mod"))
    programs = parse_tools(read_text(module / "tools.go"), str(module / "tools.go"))
    bindir = cache_root(env) / cache_key(go_mod, go_sum, go_version) / "bin"
    return Plan(module=module, go=go, kubernetes=release, programs=programs, bindir=bindir, version=release)


def upstream_of(mod: GoMod, programs: Sequence[Program], where: str) -> tuple[str, str]:
    """The one required module every program is a package of, and its version (a release)."""
    owners = {p.package: [m for m in mod.requires if p.package == m or p.package.startswith(m + "/")]
              for p in programs}
    found = {max(paths, key=len) if paths else "" for paths in owners.values()}
    if len(found) != 1 or "" in found:
        raise InputError(f"{where}: programs {sorted(owners)} lie in {sorted(found - {''}) or 'no required module'}; "
                         "expected every program a package of one module go.mod requires")
    upstream = found.pop()
    version = mod.requires[upstream]
    if not _RELEASE.fullmatch(version):
        raise InputError(f"{where}: require {upstream} {version}; expected a release vX.Y.Z")
    return upstream, version


def make_operator_plan(module: Path, env: Mapping[str, str], go: str, go_version: str) -> Plan:
    """Read and check one operator's Go module (``kube/operators/<name>``) and decide where its
    binaries go."""
    go_mod, go_sum = read_text(module / "go.mod"), read_text(module / "go.sum")
    programs = parse_tools(read_text(module / "tools.go"), str(module / "tools.go"))
    upstream, version = upstream_of(parse_go_mod(go_mod, str(module / "go.mod")), programs, str(module / "go.mod"))
    bindir = cache_root(env) / cache_key(go_mod, go_sum, go_version) / "bin"
    return Plan(module=module, go=go, kubernetes="", programs=programs, bindir=bindir, name=module.name,
                upstream=upstream, version=version)


def operator_modules(root: Path) -> list[Path]:
    """Each operator's module folder under ``kube/operators/``, by name."""
    folder = root / OPERATORS
    return sorted(p for p in folder.iterdir() if (p / "go.mod").is_file()) if folder.is_dir() else []


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One build per cache folder at a time: a second waits, then finds the binaries there."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


Runner = Callable[..., "subprocess.CompletedProcess[bytes]"]


def build(plan: Plan, env: Mapping[str, str], run: Runner = subprocess.run,
          clock: Callable[[], float] = time.monotonic, say: Callable[[str], None] = print) -> list[Built]:
    """Build each program ``plan.bindir`` lacks, one ``go build`` each, and say its time."""
    plan.bindir.mkdir(parents=True, exist_ok=True)
    done: list[Built] = []
    with _locked(plan.bindir / ".lock"):
        for program in plan.programs:
            target = plan.bindir / program.name
            if target.is_file():
                say(f"{program.name}: present in {plan.bindir}")
                done.append(Built(program.name, None))
                continue
            partial = plan.bindir / f".{program.name}.partial"
            say(f"{program.name}: building {program.package} ({plan.upstream} {plan.version or plan.kubernetes})")
            start = clock()
            result = run(build_argv(plan.go, program, partial, plan.kubernetes), cwd=plan.module,
                         env={**env, **BUILD_ENV}, check=False)
            if result.returncode != 0 or not partial.is_file():
                partial.unlink(missing_ok=True)
                raise RuntimeFailure(f"go build {program.package} failed (exit {result.returncode}); its errors "
                                     f"are above; the module is {plan.module}")
            os.replace(partial, target)
            seconds = clock() - start
            say(f"{program.name}: built in {seconds:.0f} s")
            done.append(Built(program.name, seconds))
    return done


def _seconds(built: Built) -> str:
    return "present" if built.seconds is None else f"{built.seconds:.0f}"


def table(done: Sequence[Built]) -> str:
    """The build times as a table: one row per program, ``present`` where nothing was built."""
    rows = [f"{'program':<26}{'build s':>10}"]
    rows += [f"{b.name:<26}{_seconds(b):>10}" for b in done]
    return "\n".join(rows)


def modules_table(done: Sequence[tuple[str, Sequence[Built]]]) -> str:
    """:func:`table` for several modules: a first column names the module of each program."""
    rows = [f"{'module':<20}{'program':<26}{'build s':>10}"]
    rows += [f"{module:<20}{b.name:<26}{_seconds(b):>10}" for module, built in done for b in built]
    return "\n".join(rows)


def go_version(go: str, env: Mapping[str, str]) -> str:
    """``go env GOVERSION`` (one line, within a minute)."""
    try:
        out = subprocess.run([go, "env", "GOVERSION"], env=dict(env), capture_output=True, timeout=60, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        raise RuntimeFailure(f"{go} env GOVERSION: {one_line(exc)}; expected a working Go 1.26 or later") from None
    return out.stdout.decode("utf-8", "replace").strip()


def plan_for(root: Path, env: Mapping[str, str]) -> Plan:
    """The control plane's plan for the checkout at ``root``, asking the go command found in
    ``env`` its version."""
    go = find_go(env)
    return make_plan(root, env, go, go_version(go, env))


def operator_plan_for(root: Path, env: Mapping[str, str], name: str) -> Plan:
    """The plan of the operator whose module is ``kube/operators/<name>``."""
    module = root / OPERATORS / name
    if module not in operator_modules(root):
        known = ", ".join(p.name for p in operator_modules(root)) or "none"
        raise InputError(f"operator {name!r}: no {module}/go.mod; expected one of: {known}")
    go = find_go(env)
    return make_operator_plan(module, env, go, go_version(go, env))


def plans_for(root: Path, env: Mapping[str, str]) -> list[Plan]:
    """Every module's plan: the control plane's first, then each operator's by name."""
    go = find_go(env)
    version = go_version(go, env)
    return [make_plan(root, env, go, version),
            *(make_operator_plan(module, env, go, version) for module in operator_modules(root))]


def build_all(plans: Sequence[Plan], env: Mapping[str, str], run: Runner = subprocess.run,
              clock: Callable[[], float] = time.monotonic, say: Callable[[str], None] = print) -> str:
    """Build every plan in turn (one ``go build`` at a time) and return one table of them all."""
    return modules_table([(plan.name, build(plan, env, run=run, clock=clock, say=say)) for plan in plans])


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """``python -m torchpod_toolkit.kube.build [--root DIR] [--module NAME] [--print-bindir]``."""
    parser = argparse.ArgumentParser(prog="python -m torchpod_toolkit.kube.build", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository's root (default: .)")
    parser.add_argument("--module", default="", help=f"one module: {PLANE!r} or an operator's folder name under "
                        f"{OPERATORS}/ (default: every module)")
    parser.add_argument("--print-bindir", action="store_true",
                        help="print where the binaries go (the control plane's, or --module's); build nothing")
    args = parser.parse_args(argv)
    env = dict(os.environ if env is None else env)
    try:
        if args.module and args.module != PLANE:
            plans = [operator_plan_for(args.root, env, args.module)]
        else:
            plans = [plan_for(args.root, env)] if args.module or args.print_bindir else plans_for(args.root, env)
        if args.print_bindir:
            print(plans[0].bindir)
            return 0
        print(build_all(plans, env))
    except TorchpodError as exc:
        print(f"torchpod: {one_line(exc)}", file=sys.stderr)
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main())
