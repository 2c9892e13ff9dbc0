"""The repository's root, named once for every tier.

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


def bench_script(name: str, registered: str | None = None):
    """``bench/<name>.py`` loaded as a module (bench/ is not a package). ``registered``: the
    name it is put in ``sys.modules`` under first, as a script whose dataclasses look their
    module up there needs (gpu_check)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(registered or f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    if registered:
        sys.modules[registered] = module
    spec.loader.exec_module(module)
    return module
