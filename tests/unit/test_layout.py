"""The architecture as ARCHITECTURE.md states it: what each package may import, and that
only the launcher package reaches an image."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from paths import ROOT

LAUNCHER = ROOT / "entrypoints" / "torchpod"
TOOLKIT = ROOT / "toolkit" / "torchpod_toolkit"

# The launcher runs on the standard library; torch and torchvision exist only inside the image
# (which launcher modules import them: ARCHITECTURE.md, checked by test_imports.py).
STDLIB = set(sys.stdlib_module_names)
LAUNCHER_MAY_IMPORT = STDLIB | {"torchpod", "torch", "torchvision"}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", sorted(LAUNCHER.rglob("*.py")), ids=lambda p: str(p.relative_to(LAUNCHER)))
def test_launcher_imports_only_the_standard_library_and_torch(path):
    extra = imports(path) - LAUNCHER_MAY_IMPORT
    assert not extra, f"{path.relative_to(ROOT)} imports {sorted(extra)}: host tooling belongs in torchpod_toolkit"


def test_no_package_named_build():
    # pytest's norecursedirs, black's exclude and many ignore files skip a `build` folder
    assert not [p for p in ROOT.glob("*/*/build") if p.is_dir()]
    assert not [p for p in ROOT.glob("*/*/*/build") if p.is_dir() and "__pycache__" not in str(p)]


def test_only_the_launcher_and_examples_enter_the_build_context():
    allowed = [line[1:].strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()
               if line.startswith("!")]
    assert "entrypoints/torchpod" in allowed
    assert not [a for a in allowed if a.startswith(("toolkit", "tests", "entrypoints/torchpod_"))], allowed
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    sources = re.findall(r"^(?:COPY|ADD)\s+(?!--from)(\S+)", dockerfile, flags=re.M)
    # ...and what RUNs bind-mount from the build context (a mount with from= reads a stage)
    sources += re.findall(r"--mount=type=bind,source=([^,\s]+),target=", dockerfile)
    # a variant's plugin tarball: sources.stage_netplugin_source copies it under .cache/sources/netplugin
    where = {"${NETPLUGIN_TARBALL}": ".cache/sources/netplugin"}
    assert sources and all(where.get(s, s).rstrip("/") in allowed for s in sources), sources


# What the toolkit (and tasks.py) may take from the launcher: the contract (every shared fact)
# and the error family, whole; beyond them only these documented public names.
# (module, name) for `from module import name`; a module imported whole lists the attributes
# the toolkit may use on it.
TOOLKIT_MAY_IMPORT_WHOLE = {"torchpod.contract", "torchpod.errors"}
LAUNCHER_PUBLIC_API = {
    ("torchpod.arch", "Arch"),  # arch.py owns the architecture names; torchpod.contract re-exports them
    ("torchpod.arch", "normalise_arch"),
    ("torchpod.fabric", "by_name"),  # a fabric's record: the host paths a job binds for its net plugin
    ("torchpod.fabric", "presets"),  # shape presets, through presets.load()
    ("torchpod.fabric", "driver"),  # driver.MAJOR_FLOOR: the oldest driver each CUDA major runs on (a label)
    ("torchpod", "netplugin"),  # netplugin.wanted(): the plugin API versions an NCCL asks for
    ("torchpod", "preflight_options"),  # check_options(): the preflight workload's options, checked
    ("torchpod", "readers"),  # the one bounded reader of a file torchpod did not write (READERS below)
}
# What the toolkit reads with: a whole file (text or bytes), its start or end, or a descriptor
# on a regular file (for a reader that takes a file object, such as zipfile); and the caps.
READERS = {"read_text", "read_bytes", "read_head", "read_tail", "tail_text", "open_regular", "Unreadable", "DATA_CAP",
           "ATTR_CAP"}
LAUNCHER_PUBLIC_ATTRIBUTES = {"presets": {"load"}, "driver": {"MAJOR_FLOOR"}, "netplugin": {"wanted"},
                              "preflight_options": {"check_options"}, "readers": READERS}


def _launcher_imports(path: Path) -> list[tuple[str, str, str]]:
    """(module, name, local alias) of every import from the launcher package in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, "", a.asname or a.name) for a in node.names if a.name.split(".")[0] == "torchpod"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                and node.module.split(".")[0] == "torchpod":
            out += [(node.module, a.name, a.asname or a.name) for a in node.names]
    return out


TOOLKIT_SOURCES = sorted(p for p in TOOLKIT.rglob("*.py") if "__pycache__" not in p.parts) + [ROOT / "tasks.py"]


@pytest.mark.parametrize("path", TOOLKIT_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_toolkit_takes_from_the_launcher_only_the_contract_and_public_names(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for module, name, alias in _launcher_imports(path):
        if module in TOOLKIT_MAY_IMPORT_WHOLE:
            continue
        assert (module, name) in LAUNCHER_PUBLIC_API, \
            f"{path.relative_to(ROOT)} imports {name or module} from {module}: take it from torchpod.contract"
        allowed = LAUNCHER_PUBLIC_ATTRIBUTES.get(name)
        if allowed is not None:
            used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                    and isinstance(n.value, ast.Name) and n.value.id == alias}
            assert used <= allowed, f"{path.relative_to(ROOT)} uses {sorted(used - allowed)} of {name}"


def test_the_public_names_exist():
    import importlib
    import importlib.util

    for module, name in LAUNCHER_PUBLIC_API:  # a name in the module, or a submodule of that name
        found = hasattr(importlib.import_module(module), name) or importlib.util.find_spec(f"{module}.{name}")
        assert found, (module, name)
    for module, attrs in (("torchpod.fabric.presets", {"load"}), ("torchpod.netplugin", {"wanted"}),
                          ("torchpod.preflight_options", {"check_options"}),
                          ("torchpod.readers", {n for n in READERS if not n.endswith("_CAP")})):
        assert all(callable(getattr(importlib.import_module(module), a)) for a in attrs)


# The toolkit's rooms, each a folder, over the shared ground at the package's top (ARCHITECTURE.md):
# which room each may import. Ground imports no room; the image build and the job writing
# know nothing of each other; the harness runs the jobs the job writing renders.
GROUND = {"grammars", "measurement_builds", "measurement_result", "measurement_runs", "measurements", "settings",
          "timing"}
ROOMS_MAY_IMPORT = {"ground": set(), "imagebuild": {"ground"}, "manifests": {"ground"},
                    "cluster": {"ground", "manifests"}, "kube": {"ground", "manifests", "cluster"}}


def _room(package: Path, module: str) -> str | None:
    """The room a dotted ``torchpod_toolkit.…`` name lies in ("ground" for a top module)."""
    head = module.split(".")[1:2]
    if not head:
        return None
    if (package / head[0]).is_dir():
        return head[0]
    return "ground" if (package / f"{head[0]}.py").is_file() else None


def room_arrows(package: Path) -> set[tuple[str, str, str]]:
    """(file, its room, the room it imports) for every import across rooms in ``package``."""
    arrows = set()
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        room = rel.parts[0] if len(rel.parts) > 1 else "ground"
        here = ["torchpod_toolkit", *rel.parent.parts]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level:
                base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else []))
                names = [f"{base}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            for name in names:
                target = _room(package, name) if name.startswith("torchpod_toolkit.") else None
                if target is not None and target != room:
                    arrows.add((str(rel), room, target))
    return arrows


def test_the_toolkits_top_holds_only_the_shared_ground():
    top = {p.stem for p in TOOLKIT.glob("*.py")} - {"__init__"}
    assert top == GROUND, "a module of one room belongs in its folder (ARCHITECTURE.md's module table)"
    assert {p.name for p in TOOLKIT.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(ROOMS_MAY_IMPORT) - {
        "ground"}


def test_no_room_imports_a_room_it_may_not():
    wrong = sorted(a for a in room_arrows(TOOLKIT) if a[2] not in ROOMS_MAY_IMPORT[a[1]])
    assert wrong == [], wrong


def test_an_arrow_up_from_the_ground_or_across_rooms_is_found(tmp_path):
    package = tmp_path / "torchpod_toolkit"
    for folder in ("imagebuild", "manifests"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "grammars.py").write_text("from .manifests import spec\n")
    (package / "manifests" / "spec.py").write_text("from .. import grammars\nfrom ..imagebuild import host\n")
    (package / "imagebuild" / "host.py").write_text("import torchpod_toolkit.grammars\n")
    assert room_arrows(package) == {("grammars.py", "ground", "manifests"),
                                    ("manifests/spec.py", "manifests", "ground"),
                                    ("manifests/spec.py", "manifests", "imagebuild"),
                                    ("imagebuild/host.py", "imagebuild", "ground")}


def test_toolkit_is_a_separate_package_the_launcher_never_names():
    assert (TOOLKIT / "__init__.py").exists()
    for path in LAUNCHER.rglob("*.py"):
        assert "torchpod_toolkit" not in imports(path), path


TESTS = ROOT / "tests"
TIERS = ("unit", "integration", "image", "cluster")
# Test files whose subject is the repository rather than one module: they stay at their
# tier's top. Everything else mirrors the code it tests.
REPOSITORY_TESTS = {"unit/test_layout.py", "unit/test_docs.py", "unit/test_packaging.py",
                    "unit/test_function_length.py", "integration/test_launcher_e2e.py",
                    "unit/test_needs.py", "unit/test_crowd.py",  # the suite's own helpers (tests/needs.py, crowd.py)
                    "integration/test_setup.py", "unit/test_layer_scan.py",
                    "unit/test_words.py", "integration/test_own_image.py",  # docs/own-image.md's wheel
                    "unit/test_imports.py",  # both packages' import graph
                    "unit/test_reads.py"}  # every read in both packages, bench/ and the payload's script
# A second file for one module, split by what it feeds the module (hostile input,
# hypothesis properties, scripts run for real, shellcheck, scripts run under stand-ins of
# the container runtimes): test_<module>_<suffix>.py.
SUFFIXES = ("_hostile", "_properties", "_exec", "_shellcheck", "_shell", "_runtimes")
SOURCES = {"torchpod": LAUNCHER, "torchpod_toolkit": TOOLKIT, "examples": ROOT / "examples", "bench": ROOT / "bench",
           "docker": ROOT / "docker"}


def test_test_modules_are_imported_by_path(pytestconfig):
    # importlib mode: no test folder goes on sys.path, so two tiers may both hold a
    # test_cli.py and no test can reach another tier's conftest by its name.
    assert pytestconfig.option.importmode == "importlib"
    assert "--import-mode=importlib" in pytestconfig.getini("addopts")
    assert TESTS in [Path(p) for p in pytestconfig.getini("pythonpath")]


def test_no_test_imports_a_conftest_by_name():
    found = [str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py") if "conftest" in imports(p)]
    assert found == [], "share fixtures through conftest, constants through a module in tests/"


def test_the_repository_root_is_named_once():
    # tests/paths.py alone derives it: a parents[N] in each file broke whenever one moved.
    found = [str(p.relative_to(TESTS)) for p in TESTS.rglob("*.py")
             if re.search(r"Path\(__file__\)", p.read_text())]
    assert found == ["paths.py"], found


def test_shared_test_modules_sit_where_pythonpath_finds_them():
    # Only tests/ is on sys.path: a plain module deeper down could not be imported by name,
    # and one named like a real package would shadow it for every test.
    for tier in TIERS:
        plain = [str(p.relative_to(TESTS)) for p in (TESTS / tier).rglob("*.py")
                 if not p.name.startswith("test_") and p.name != "conftest.py"]
        assert plain == [], f"move {plain} to tests/ (pytest's pythonpath)"
    shared = {p.stem for p in TESTS.glob("*.py") if p.name != "conftest.py"}
    assert shared and not shared & (STDLIB | {"torchpod", "torchpod_toolkit", "tasks", "yaml", "pytest"})


def _subject(test: Path) -> Path | None:
    """The source a test file under tests/<tier>/<package>/ mirrors, or None if none."""
    rel = test.relative_to(TESTS)
    package, *folders = rel.parts[1:-1]
    stem = test.stem.removeprefix("test_")
    for suffix in SUFFIXES:
        if stem.endswith(suffix) and stem != suffix.lstrip("_"):
            stem = stem.removesuffix(suffix)
            break
    base = SOURCES[package].joinpath(*folders)
    # a helper whose name starts with _ (bench/_options.py) is tested by test_options.py
    for candidate in (base / f"{stem}.py", base / stem / "__init__.py", base / f"_{stem}.py"):
        if candidate.exists():
            return candidate
    return None


def test_tests_mirror_the_code():
    strays = []
    for tier in ("unit", "integration"):
        for test in sorted((TESTS / tier).rglob("test_*.py")):
            rel = test.relative_to(TESTS)
            if str(rel) in REPOSITORY_TESTS:
                continue
            if rel.parts[1] == "tasks":
                ok = (ROOT / "tasks.py").exists() or (ROOT / "tasks").is_dir()
            else:
                ok = rel.parts[1] in SOURCES and _subject(test) is not None
            if not ok:
                strays.append(str(rel))
    assert strays == [], "name each test file after the module it tests (tests/<tier>/<package>/.../test_<module>.py)"


# Modules with no test_<module>.py of their own, each with the reason, as
# "package.module": "why". None today; an entry here is a decision, a missing file is not.
NO_TEST_FILE: dict[str, str] = {}
PACKAGES = {"torchpod": LAUNCHER, "torchpod_toolkit": TOOLKIT}


def _without_test_file(packages: dict[str, Path], tests: Path) -> list[str]:
    """Every module of ``packages`` (not __init__ or __main__) with no test_<module>.py at
    tests/<tier>/<package>/<its folders>/ in any tier, as "package.module"."""
    missing = []
    for package, source in packages.items():
        for path in sorted(source.rglob("*.py")):
            rel = path.relative_to(source)
            if "__pycache__" in rel.parts or path.stem in ("__init__", "__main__"):
                continue
            if not any((tests / tier / package / rel.parent / f"test_{path.stem}.py").is_file() for tier in TIERS):
                missing.append(".".join((package, *rel.parent.parts, path.stem)))
    return missing


def test_every_module_has_a_test_file_of_its_own():
    missing = _without_test_file(PACKAGES, TESTS)
    assert sorted(set(missing) - set(NO_TEST_FILE)) == [], \
        "add tests/<tier>/<package>/.../test_<module>.py, or an entry with its reason in NO_TEST_FILE"
    stale = sorted(set(NO_TEST_FILE) - set(missing))
    assert stale == [], f"{stale} now have a test file (or are gone): take them off NO_TEST_FILE"


def test_a_new_module_without_a_test_file_is_found(tmp_path):
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for module in ("__init__", "__main__", "tested", "sub/__init__", "sub/new", "sub/elsewhere"):
        (tmp_path / "pkg" / f"{module}.py").write_text("")
    for test in ("unit/pkg/test_tested.py", "cluster/pkg/sub/test_elsewhere.py", "unit/pkg/test_new.py",
                 "unit/pkg/sub/test_new_hostile.py"):  # the wrong folder, and a second file only
        (tmp_path / "tests" / test).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "tests" / test).write_text("")
    assert _without_test_file({"pkg": tmp_path / "pkg"}, tmp_path / "tests") == ["pkg.sub.new"]


def _detectors() -> list[str]:
    from torchpod.schedulers import SCHEDULERS

    return sorted(m.__name__.rsplit(".", 1)[1] for m in SCHEDULERS)


@pytest.mark.parametrize("module", _detectors())
def test_every_detector_has_a_unit_test_that_imports_it_by_name(module):
    # each detector's claims() and detect() tested on their own, not only through resolve()
    test = TESTS / "unit" / "torchpod" / "schedulers" / f"test_{module}.py"
    assert test.exists(), f"add {test.relative_to(ROOT)}"
    text = test.read_text()
    assert re.search(rf"^from torchpod\.schedulers(?: import (?:.*\b)?{module}\b|\.{module} import)", text, re.M), test
