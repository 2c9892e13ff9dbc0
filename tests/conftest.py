"""Shared fixtures: the Docker engine, image definitions, tools, and container cleanup.

Tiers (docs/testing.md, "Tiers"): ``unit`` (pure: no process, server or Docker), ``integration``
(local processes and servers: torchrun, scontrol, HTTP), ``image`` (inside built images,
a real registry), ``cluster`` (containers as nodes).

A test that needs a tool or the engine skips with a reason when it is truly absent, and
never breaks collection; CI sets TORCHPOD_REQUIRE_TOOLS=1, which turns such a skip into a
failure, so nothing silently skips there. Every container a test starts carries the label
``torchpod.test`` and is force-removed at teardown, pass or fail.
"""

from __future__ import annotations

import os
import shutil
import uuid

import pytest

from needs import missing
from paths import ROOT

TEST_LABEL = "torchpod.test"


def pytest_configure(config):
    """A setting the test run reads (the CI switch, the development mounts) holding a value
    outside its form stops the run before any test, in one line: taken for off, the CI switch
    would turn the failures CI promises back into skips."""
    from torchpod.errors import TorchpodError, one_line
    from torchpod_toolkit import settings

    try:
        settings.check(os.environ, "test")
    except TorchpodError as exc:
        raise pytest.UsageError(one_line(exc)) from None


@pytest.fixture(scope="session")
def require_tool():
    """require_tool(name, package) -> the tool's path, or a skip/failure naming the package."""

    def require(name: str, package: str) -> str:
        path = shutil.which(name)
        if path is None:
            missing(f"`{name}` (apt-get install {package}, or ./setup.sh)")
        return path

    return require


@pytest.fixture(scope="session")
def skypilot_python() -> str:
    """A Python that imports SkyPilot: this one, or the environment setup.sh makes for it."""
    import importlib.util
    import sys

    from paths import SKYPILOT_PYTHON

    if importlib.util.find_spec("sky") is not None:
        return sys.executable
    if SKYPILOT_PYTHON.is_file():
        return str(SKYPILOT_PYTHON)
    missing(f"SkyPilot ({SKYPILOT_PYTHON}: ./setup.sh makes it)")
    raise AssertionError("unreachable")


@pytest.fixture(autouse=True)
def _death_signals_as_they_were():
    """A test that runs `torchpod run` in-process may leave SIGTERM and its kin ignored, as
    the launcher does once torchrun has ended (torchpod.supervise ``then_ignore``); every
    process the worker started later would inherit that, and shrug off its own stop. Each
    test's end puts them back."""
    import signal

    from torchpod.supervise import TERMINATING

    before = {sig: signal.getsignal(sig) for sig in TERMINATING}
    yield
    for sig, handler in before.items():
        if handler is not None and signal.getsignal(sig) != handler:
            signal.signal(sig, handler)


@pytest.fixture(autouse=True, scope="session")
def _no_launcher_variables_from_outside():
    """torch's parser reads PET_* from os.environ; tests must not see the caller's."""
    # the test harness's own switches (TORCHPOD_DEV_*, TORCHPOD_REQUIRE_TOOLS) stay
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(("PET_", "TORCHPOD_"))
             and not k.startswith(("TORCHPOD_DEV_", "TORCHPOD_REQUIRE_"))}
    yield
    os.environ.update(saved)


@pytest.fixture(scope="session")
def definitions():
    from torchpod_toolkit.imagebuild.definitions import load_definitions

    return load_definitions(ROOT / "images")


@pytest.fixture(scope="session")
def image_test_label(session_id) -> dict[str, str]:
    """Label of this session's image-test containers (unique: concurrent sessions never collide)."""
    return {TEST_LABEL: f"image-{session_id}"}


@pytest.fixture(scope="session")
def docker_client(image_test_label):
    import docker

    from torchpod.errors import TorchpodError
    from torchpod_toolkit.imagebuild.host import docker_client as connect

    try:
        client = connect()
    except TorchpodError as exc:
        missing(f"a Docker engine: {exc}")
    yield client
    selector = f"{TEST_LABEL}={image_test_label[TEST_LABEL]}"
    for container in client.containers.list(all=True, filters={"label": selector}):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass


@pytest.fixture(scope="session")
def session_id() -> str:
    return uuid.uuid4().hex[:8]
