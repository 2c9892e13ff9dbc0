"""The repository's root, named once for every tier, and bench/'s programs and helpers, told
apart by one rule (a helper's name starts with ``_``) and loaded as the programs load them.

pytest imports test modules in importlib mode (pyproject's ``addopts``), so a test file's
own folder is not on ``sys.path``; ``tests/`` is (pyproject's ``pythonpath``). That makes
this module and the shared cases (``launcher_cases``, ``fabric_cases``, ...) importable by
name from a test at any depth, without ``from conftest import`` or a ``parents[N]`` that
breaks each time a file moves.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
UNIT_FIXTURES = TESTS / "unit" / "fixtures"
# SkyPilot in an environment of its own (setup.sh makes it; its cloud SDKs stay out of ours):
# the integration tier judges SkyPilot tasks with SkyPilot's own schema and parser.
SKYPILOT_PYTHON = Path("/opt/torchpod-skypilot/bin/python")


BENCH = ROOT / "bench"


def bench_programs() -> list[Path]:
    """The bench programs: each ``bench/<name>.py`` whose name does not start with ``_``.
    Each is a measurement run by path, with an invoke task ``bench.<name>`` of its own."""
    return sorted(p for p in BENCH.glob("*.py") if not p.name.startswith("_"))


def bench_helpers() -> list[Path]:
    """The bench helpers: each ``bench/_<name>.py``, a module that programs import (figures,
    judges, ...). It runs nothing on its own, so it has no task."""
    return sorted(p for p in BENCH.glob("*.py") if p.name.startswith("_"))


def _bench_on_path() -> None:
    """bench/ on ``sys.path``, as Python puts a script's folder there when it runs the script
    by path: a program's ``import _helper`` finds bench/_helper.py. Appended, not put first,
    so that a test helper of tests/ keeps its name (tests/hostile_reads.py and
    bench/hostile_reads.py are both ``hostile_reads``)."""
    import sys

    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))


def bench_script(name: str, registered: str | None = None):
    """``bench/<name>.py`` loaded as a module (bench/ is not a package), with bench/ on
    ``sys.path`` for the helpers it imports. The module is put in ``sys.modules`` first, under
    ``registered`` or ``bench_<name>``: a dataclass looks its module up there."""
    import importlib.util
    import sys

    _bench_on_path()
    spec = importlib.util.spec_from_file_location(registered or f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def bench_helper(name: str):
    """The helper ``bench/<name>.py`` (``name`` starts with ``_``) imported under its own name:
    the one module object the programs that import it share, so a test that patches it
    patches what those programs run."""
    import importlib

    if not name.startswith("_"):
        raise ValueError(f"bench_helper({name!r}): a helper's name starts with _; load a program with bench_script")
    _bench_on_path()
    return importlib.import_module(name)
