"""`invoke demo --kube --manifest FILE`, run as a user runs it: a JobSet manifest `invoke
manifests` wrote for an image this machine does not have is applied as written to a control
plane the demo starts, JobSet's own controller makes the pods, the image under test stands
in for the manifest's, the DDP example trains to Completed and the table shows both ranks; nothing
the demo started or tagged is left behind.

Without the control plane's or JobSet's programs the test fails under CI
(TORCHPOD_REQUIRE_TOOLS=1) and skips elsewhere, naming `invoke kube.build`."""

from __future__ import annotations

import re
import subprocess
import sys

import docker
import pytest

from torchpod_toolkit.kube import kubelet as kubelet_mod
from torchpod_toolkit.kube import plane

from cluster_helpers import EXAMPLES
from kube_helpers import require_operator, require_programs
from paths import ROOT

MANIFEST_IMAGE = "registry.invalid/torchpod/pytorch:kube-demo"
# a plane, an operator and two training pods of its own: run alone, after the side-by-side tests
pytestmark = pytest.mark.solo


def test_a_rendered_jobset_runs_to_success_on_a_plane_of_its_own(tmp_path, docker_client, cluster_image):
    require_programs()
    require_operator("jobset")
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(MANIFEST_IMAGE)
    rendered = subprocess.run(
        [sys.executable, "-m", "invoke", "manifests", "--scheduler", "jobset", "--nodes", "2", "--gpus-per-node", "0",
         "--image", MANIFEST_IMAGE, "--name", "kd", "--namespace", "kd", "--out", str(tmp_path), "--",
         f"{EXAMPLES}/ddp_resnet.py", "--steps", "5"],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    (manifest,) = tmp_path.glob("*.yaml")
    done = subprocess.run([sys.executable, "-m", "invoke", "demo", "--kube", "--manifest", str(manifest),
                           "--timeout", "240"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = done.stdout
    assert done.returncode == 0, out[-6000:] + done.stderr[-3000:]
    for line in (f"==> image {MANIFEST_IMAGE}: the image under test {cluster_image}, tagged for the run",
                 "==> operator jobset: installed", "(Pod Security enforce=restricted), on 2 nodes",
                 "jobset job kd (JobSet): succeeded", "world size 2; 2 ranks reported",
                 "the ranks' parameters agree"):
        assert line in out, out[-6000:]
    rows = [r.split() for r in out.split("\n\n")[1].splitlines()[2:]]
    assert sorted(r[5] for r in rows) == ["0", "1"] and {r[2] for r in rows} == {"Succeeded"}, out[-3000:]
    # nothing left: the tag, the stand-in's containers and network, the plane's processes
    with pytest.raises(docker.errors.ImageNotFound):
        docker_client.images.get(MANIFEST_IMAGE)
    (stand_in,) = re.findall(rf"containers labelled ({re.escape(kubelet_mod.LABEL)}=[0-9a-f]+)", out)
    assert docker_client.containers.list(all=True, filters={"label": stand_in}) == []
    assert docker_client.networks.list(filters={"label": stand_in}) == []
    assert not [p for p in plane.COMPONENTS if subprocess.run(["pgrep", "-f", f"torchpod-kube-demo-.*{p}"],
                                                              capture_output=True).returncode == 0]
