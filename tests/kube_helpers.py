"""The real Kubernetes control plane as the cluster tests use it: the plan of `invoke
kube.build` (a plain module on pytest's ``pythonpath``; the ``kube`` fixture in
tests/cluster/conftest.py starts the plane from it), kubectl through the administrator's
kubeconfig, and a bounded wait."""

from __future__ import annotations

import functools
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from torchpod.errors import TorchpodError
from torchpod_toolkit.kube import build, plane

from needs import missing
from paths import ROOT

T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def kube_plan() -> build.Plan:
    """Where `invoke kube.build` put the programs for this checkout's kube/ module."""
    try:
        return build.plan_for(ROOT, os.environ)
    except TorchpodError as exc:
        missing(f"a Go toolchain and kube/'s module ({exc})")
        raise AssertionError("unreachable") from None


def require_programs() -> build.Plan:
    """The plan, once every program it names is built (else :func:`needs.missing`)."""
    plan = kube_plan()
    absent = [p.name for p in plan.missing()]
    if absent:
        missing(f"{', '.join(absent)} in {plan.bindir} (`invoke kube.build`)")
    return plan


def until(what: str, probe: Callable[[], Any], seconds: float = 90.0) -> Any:
    """``probe()``'s first true answer, polled twice a second; the test fails naming ``what``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    pytest.fail(f"{what} within {seconds:.0f} s")


def settled(read: Callable[[], T], done: Callable[[T], bool], seconds: float, every: float = 1.0) -> T:
    """``read()``'s answer once ``done`` holds for it, or its last answer when ``seconds`` run
    out: for an assertion that then shows what it last saw, where :func:`until` would only
    name what it waited for."""
    deadline = time.monotonic() + seconds
    while True:
        answer = read()
        if done(answer) or time.monotonic() > deadline:
            return answer
        time.sleep(every)


@dataclass(frozen=True)
class Kube:
    """A started control plane and the programs it was started from."""

    plane: plane.Plane
    plan: build.Plan

    def kubectl(self, *args: str, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess[str]:
        """kubectl with the administrator's kubeconfig; a failure fails the test unless ``check`` is off."""
        argv = [str(self.plan.bindir / "kubectl"), f"--kubeconfig={self.plane.kubeconfig}",
                f"--cache-dir={self.plane.kubeconfig.parent / 'kubectl'}", "--request-timeout=30s", *args]
        result = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)
        if check and result.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)}: exit {result.returncode}: {result.stderr}")
        return result

    def namespace(self, name: str) -> None:
        """A new namespace, once the controller manager has given it the service account pods need."""
        self.kubectl("create", "namespace", name)
        until(f"the default service account of {name}",
              lambda: self.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode == 0)


def require_operator(name: str) -> build.Plan:
    """The plan of the operator whose module is kube/operators/<name>, once its programs are
    built (else :func:`needs.missing` naming `invoke kube.build`)."""
    try:
        plan = build.operator_plan_for(ROOT, os.environ, name)
    except TorchpodError as exc:
        missing(f"a Go toolchain and kube/operators/{name}'s module ({exc})")
        raise AssertionError("unreachable") from None
    absent = [p.name for p in plan.missing()]
    if absent:
        missing(f"{', '.join(absent)} in {plan.bindir} (`invoke kube.build`)")
    return plan
