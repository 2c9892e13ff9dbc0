"""Shared fixtures: the Docker engine, image definitions, and container cleanup.

Tests that need the engine skip with a reason only when no engine answers; CI always
starts one (.ci/run), so nothing skips there. Every container a test starts carries the
label ``torchpod.test`` and is force-removed at teardown, pass or fail.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_LABEL = "torchpod.test"


@pytest.fixture(scope="session")
def definitions():
    from torchpod.build.definitions import load_definitions

    return load_definitions(ROOT / "images")


@pytest.fixture(scope="session")
def image_test_label(session_id) -> dict[str, str]:
    """Label of this session's image-test containers (unique: concurrent sessions never collide)."""
    return {TEST_LABEL: f"image-{session_id}"}


@pytest.fixture(scope="session")
def docker_client(image_test_label):
    from torchpod.build.engine import docker_client as connect
    from torchpod.errors import TorchpodError

    try:
        client = connect()
    except TorchpodError as exc:
        pytest.skip(f"needs a Docker engine: {exc}")
    yield client
    import docker

    selector = f"{TEST_LABEL}={image_test_label[TEST_LABEL]}"
    for container in client.containers.list(all=True, filters={"label": selector}):
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass


@pytest.fixture(scope="session")
def session_id() -> str:
    return uuid.uuid4().hex[:8]
