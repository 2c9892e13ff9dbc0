"""A Kubernetes control plane on this machine for the tests: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler from the binaries ``build`` made, in one
throwaway folder, with certificates made at start and a kubeconfig for an administrator.

This module holds what a plane is and its processes, which every other part of the harness
shares: the loopback ports it takes, the record of a started plane, each component started
in a process group of its own and stopped by the id recorded (each checked to still run the
binary it started), the end of a component's log and its resident memory. Beside it:
``planecerts`` (the certificates and kubeconfigs), ``planeargs`` (each component's command
line), ``planehealth`` (the health checks), ``planestart`` (``start`` and the record it
leaves) and ``planeup`` (the plane `invoke kube.up` leaves running).

Every port is on 127.0.0.1. The harness never touches ``~/.kube``, listens beyond loopback,
or leaves a process behind.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from torchpod import readers
from torchpod.errors import InputError

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.0.0.0/24"
API_SERVICE_IP = next(ipaddress.IPv4Network(SERVICE_CIDR).hosts())  # the API's own Service: the first address
STATUS_CAP = 16 << 10  # /proc/PID/status: about 1.5 KiB; VmRSS is in its first half
LOG_TAIL = 4000  # characters of a failed component's log in the error


@dataclass(frozen=True)
class Ports:
    """The loopback ports of one plane."""

    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int


@dataclass(frozen=True)
class Plane:
    """A started plane: its folder, ports, processes and the administrator's kubeconfig."""

    root: Path
    ports: Ports
    pids: Mapping[str, int]
    binaries: Mapping[str, str]
    seconds: float  # from the first process started to every health check answered

    @property
    def kubeconfig(self) -> Path:
        return self.root / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.ports.apiserver}"


def free_ports(count: int) -> list[int]:
    """``count`` distinct loopback ports the kernel hands out (closed again before use)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((LOOPBACK, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# --- processes -------------------------------------------------------------------------------

def spawn(argv: Sequence[str], log: Path) -> subprocess.Popen[bytes]:
    """One component in a process group of its own (start_new_session): an interrupted task
    does not stop it; ``stop`` does."""
    with log.open("ab") as out:
        return subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=log.parent)


def log_tail(path: Path, limit: int = LOG_TAIL) -> str:
    """The last ``limit`` characters of a component's log, undecodable bytes replaced; what
    stood in the way of reading it (no log, a FIFO in its place) in parentheses instead."""
    try:
        return readers.tail_text(path, what=str(path), expected="a component's log", chars=limit)
    except InputError as exc:
        return f"(no log: {exc})"


def runs(pid: int, binary: str) -> bool:
    """Whether ``pid`` is alive and runs ``binary`` (not a reused id, not a zombie)."""
    try:
        return os.readlink(f"/proc/{pid}/exe") == str(Path(binary).resolve())
    except OSError:
        return False


def running(plane: Plane) -> bool:
    """Whether any component of ``plane`` still runs."""
    return any(runs(pid, plane.binaries[c]) for c, pid in plane.pids.items())


def _reap(pid: int) -> None:
    """Collect the exit status of a process that has ended, if it is this process's child
    (``start`` in the same process, as the tests do); another's is its parent's to collect."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def stop_processes(pids: Mapping[str, int], binaries: Mapping[str, str], grace: float = 15.0) -> list[str]:
    """TERM, then KILL after ``grace`` seconds, each process still running its binary, last
    started first; the components that needed KILL."""
    killed = []
    for component in reversed(list(pids)):
        pid, binary = pids[component], binaries[component]
        if not runs(pid, binary):
            continue
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while runs(pid, binary) and time.monotonic() < deadline:
            time.sleep(0.1)
        if runs(pid, binary):
            os.kill(pid, signal.SIGKILL)
            killed.append(component)
        _reap(pid)
    return killed


def stop(plane: Plane, keep: bool = False) -> list[str]:
    """Stop every component of ``plane``; remove its folder unless ``keep``."""
    killed = stop_processes(plane.pids, plane.binaries)
    if not keep:
        shutil.rmtree(plane.root)
    return killed


def rss_bytes(pids: Mapping[str, int]) -> dict[str, int]:
    """Each process's resident memory (``VmRSS`` of /proc/PID/status), 0 for one gone."""
    found = {}
    for component, pid in pids.items():
        try:  # the process's name, on the first line, may be any bytes
            status = readers.read_head(f"/proc/{pid}/status", what=f"/proc/{pid}/status", expected="procfs's status",
                                       limit=STATUS_CAP).decode("utf-8", "replace")
        except InputError:  # gone
            found[component] = 0
            continue
        kib = [line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:")]
        found[component] = int(kib[0]) * 1024 if kib and kib[0].isdigit() else 0
    return found
