"""A throwaway registry for the tests: Debian's docker-registry (distribution v2), started
on a loopback address with its storage in a folder the caller names, and stopped after.
Docker treats a registry on 127.0.0.0/8 as insecure by default, so plain HTTP serves both
pushes and pulls (moby registry/config.go, ``newServiceConfig``: 127.0.0.0/8 is always
in InsecureRegistryCIDRs)."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(binary: str, folder: Path, port: int) -> Iterator[str]:
    """docker-registry on 127.0.0.1:``port``, storing in ``folder``/data; its address, once it answers."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.yml"
    config.write_text(json.dumps({  # YAML is a superset of JSON
        "version": 0.1,
        "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(folder / "data")}},
        "http": {"addr": f"127.0.0.1:{port}"},
    }))
    log = folder / "registry.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, "serve", str(config)], stdout=out, stderr=subprocess.STDOUT)
    address = f"127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://{address}/v2/", timeout=1)
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
        else:
            pytest.fail(f"docker-registry never answered on {address} in 10 s; its log:\n{log.read_text()[-2000:]}")
        if proc.poll() is not None:
            pytest.fail(f"docker-registry exited ({proc.returncode}); its log:\n{log.read_text()[-2000:]}")
        yield address
    finally:
        proc.terminate()
        proc.wait(timeout=10)
