"""Starting a control plane (``plane``) in a new folder, and the record it leaves there.

``start`` writes the folder's certificates, kubeconfigs and scheduler configuration
(``prepare``), starts etcd, then the API server, then the controller manager and the
scheduler side by side, and returns once every component answers its health check
(``planehealth``); ``plane.stop`` ends the processes it started (by the ids it recorded,
each checked to still run the binary it started) and removes the folder. The record
(``plane.json``) is what ``load`` reads back, once, through the bounded reader.
"""

from __future__ import annotations

import datetime
import errno
import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from torchpod import readers
from torchpod.errors import InputError, RuntimeFailure, one_line

from .plane import COMPONENTS, LOOPBACK, Plane, Ports, free_ports, spawn, stop_processes
from .planeargs import ARGV, scheduler_config
from .planecerts import CLIENTS, kubeconfig, make_pki
from .planehealth import await_healthy

STATE = "plane.json"
STATE_CAP = 64 << 10  # the record `start` writes is a few hundred bytes


def prepare(root: Path, ports: Ports, now: datetime.datetime) -> None:
    """The folder's certificates, kubeconfigs and scheduler configuration."""
    pki = root / "pki"
    make_pki(pki, now)
    server = f"https://{LOOPBACK}:{ports.apiserver}"
    for stem, _, _ in CLIENTS:
        (root / f"{stem}.kubeconfig").write_text(kubeconfig(server, pki, stem))
    (root / "scheduler.yaml").write_text(scheduler_config(root))
    (root / "logs").mkdir()


def start(bindir: Path, root: Path, timeout: float = 180.0, now: datetime.datetime | None = None,
          clock: Callable[[], float] = time.monotonic) -> Plane:
    """Start the four components in ``root`` (a new, empty folder) and wait until each is healthy.

    etcd first, then the API server, then the controller manager and the scheduler side by
    side. On any failure every process started is stopped before the error is raised; the
    folder and its logs stay."""
    absent = [c for c in COMPONENTS if not (bindir / c).is_file()]
    if absent:
        raise RuntimeFailure(f"{', '.join(absent)} missing in {bindir}; run `invoke kube.build` first")
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise RuntimeFailure(f"{root} is not empty; expected a new folder for the control plane")
    ports = Ports(*free_ports(5))
    prepare(root, ports, now or datetime.datetime.now(datetime.timezone.utc))
    began, deadline = clock(), clock() + timeout
    started: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for group in (("etcd",), ("kube-apiserver",), ("kube-controller-manager", "kube-scheduler")):
            for component in group:
                started[component] = spawn(ARGV[component](bindir, root, ports), root / "logs" / f"{component}.log")
            for component in group:
                await_healthy(component, started[component], ports, root, deadline, clock)
    except BaseException:
        stop_processes({c: p.pid for c, p in started.items()}, {c: str(bindir / c) for c in started})
        raise
    plane = Plane(root=root, ports=ports, pids={c: p.pid for c, p in started.items()},
                  binaries={c: str(bindir / c) for c in COMPONENTS}, seconds=clock() - began)
    (root / STATE).write_text(json.dumps({**asdict(plane), "root": str(root)}, indent=2))
    return plane


def recorded(root: Path) -> Plane | None:
    """The plane ``start`` recorded in ``root``; None when no file is there. Whether there is
    one is the read's own answer (no check before it that could change before the read)."""
    path = root / STATE
    if path.is_symlink():  # `start` writes a file; the reader would follow a link
        raise RuntimeFailure(f"{path}: no control plane recorded there (a symbolic link)")
    try:  # read once, checked on the descriptor it is read from
        text = readers.read_text(path, what=str(path), expected="the record `start` writes", cap=STATE_CAP)
    except InputError as exc:
        if isinstance(exc, readers.Unreadable) and exc.errno == errno.ENOENT:
            return None
        raise RuntimeFailure(f"no control plane recorded in {root}: {exc}") from None
    try:
        data = json.loads(text)
        found = Plane(root=Path(data["root"]), ports=Ports(**data["ports"]), pids=dict(data["pids"]),
                      binaries=dict(data["binaries"]), seconds=float(data["seconds"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise RuntimeFailure(f"{path}: not the record `start` writes ({one_line(exc)})") from None
    if set(found.pids) - set(found.binaries) or not all(isinstance(p, int) for p in found.pids.values()):
        raise RuntimeFailure(f"{path}: not the record `start` writes (process ids without their binaries)")
    return found


def load(root: Path) -> Plane:
    """The plane ``start`` recorded in ``root``; no record there is an error."""
    found = recorded(root)
    if found is None:
        raise RuntimeFailure(f"no control plane recorded in {root}: {root / STATE} does not exist")
    return found
