"""Inside each built image, as the users clusters really run it as: an arbitrary UID with
group 0 (OpenShift's restricted SCC) and with a group of its own (Apptainer, enroot, Docker's
--user), neither in /etc/passwd, on a read-only root filesystem with a tmpfs /tmp (Docker's
--read-only; Kubernetes' readOnlyRootFilesystem with an emptyDir). The launcher plans, a
two-process `torchpod run` trains through torchvision and writes torch hub's cache, and the
doctor reports, all without writing under / (torchpod.home moves HOME under /tmp). On an
emulated arch this is also the image's two-process group and torchvision check (test_image.py
runs those natively only: a minute of QEMU each)."""

from __future__ import annotations

import json

import pytest

from torchpod_toolkit.engine import emulation_volumes, host_arch

from paths import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.image]

USERS = ["12345:0", "12345:12345"]

# A worker run by `torchpod run`: the group forms, torchvision runs a model, torch hub's
# cache directory (under HOME) takes a file, and the user has no passwd entry.
WORKER = """
import json, os, pwd, torch, torch.distributed as dist, torchvision
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0]); dist.all_reduce(t)
with torch.no_grad():
    out = torchvision.models.resnet18(num_classes=4).eval()(torch.randn(1, 3, 32, 32))
boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [50.0, 50.0, 60.0, 60.0]])
keep = torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8, 0.7]), iou_threshold=0.5).tolist()  # a compiled op
hub = torch.hub.get_dir(); os.makedirs(hub, exist_ok=True)
with open(os.path.join(hub, f"probe{dist.get_rank()}"), "w") as f:
    f.write("ok")
try:
    pwd.getpwuid(os.getuid()); named = True
except KeyError:
    named = False
line = "RESULT " + json.dumps({"rank": dist.get_rank(), "sum": t.item(), "shape": list(out.shape), "keep": keep,
                              "version": torchvision.__version__, "hub": hub,
                              "home": os.environ["HOME"], "uid": os.getuid(), "gid": os.getgid(), "named": named})
os.write(1, (line + "\\n").encode())  # one write: two ranks share the pipe, and print() writes the newline apart

dist.destroy_process_group()
"""

SCRIPT = """set -eu
cat > /tmp/worker.py <<'PY'
{worker}
PY
torchpod plan > /tmp/plan.json
rc=0; torchpod doctor --format json > /tmp/doctor.json || rc=$?
[ "$rc" -le 1 ] || {{ echo "doctor exit $rc"; exit 1; }}
CUDA_VISIBLE_DEVICES= torchpod run --nproc-per-node=2 /tmp/worker.py
echo "PLAN $(tr -d '\\n' < /tmp/plan.json)"
echo "DOCTOR $(tr -d '\\n' < /tmp/doctor.json)"
"""


def _run_as(built, docker_client, image_test_label, user: str) -> str:
    volumes = emulation_volumes(built.arch, host_arch(), ROOT / ".cache")
    out = docker_client.containers.run(
        built.defn.ref(built.arch), ["-c", SCRIPT.format(worker=WORKER)], entrypoint="sh", user=user,
        read_only=True, tmpfs={"/tmp": ""}, platform=built.arch.docker, network_disabled=True, remove=True,
        labels=image_test_label, volumes=volumes, stdout=True, stderr=True)
    return out.decode(errors="replace")


def test_any_user_trains_plans_and_checks_on_a_read_only_root(built, docker_client, image_test_label):
    # Under QEMU each run costs minutes of emulated imports: an emulated arch runs the group-0
    # user, and the own-group user (which differs only in the group) runs natively.
    for user in USERS if built.native else USERS[:1]:
        _check_user(built, docker_client, image_test_label, user)


def _check_user(built, docker_client, image_test_label, user: str) -> None:
    text = _run_as(built, docker_client, image_test_label, user)
    uid, gid = (int(x) for x in user.split(":"))
    results = [json.loads(ln.split("RESULT ", 1)[1]) for ln in text.splitlines() if ln.startswith("RESULT ")]
    assert sorted(r["rank"] for r in results) == [0, 1], text[-3000:]
    home = f"/tmp/torchpod-home-{uid}"
    for r in results:
        assert (r["sum"], r["shape"], r["keep"], r["uid"], r["gid"], r["named"]) == (3.0, [1, 4], [0, 2], uid, gid,
                                                                                     False), r
        assert r["version"] == built.labels["io.torchpod.torchvision"], r
        assert r["home"] == home and r["hub"].startswith(home), r
    plan = json.loads(next(ln for ln in text.splitlines() if ln.startswith("PLAN "))[5:])
    assert plan["env"]["HOME"] == home and any("is not a writable directory" in n for n in plan["notes"])
    doctor = json.loads(next(ln for ln in text.splitlines() if ln.startswith("DOCTOR "))[7:])
    assert doctor  # a report, not a traceback


def test_nothing_is_left_to_byte_compile_at_run_time(built):
    """Everything Python imports from the image is compiled in it: a read-only root or a
    user who cannot write there costs nothing (a .py without its .pyc is one this Python
    cannot compile at all)."""
    out = built.run("python - <<'PY'\n"
                    "import importlib.util, pathlib, sys\n"
                    "roots = [pathlib.Path(sys.prefix) / 'lib', pathlib.Path('/opt/torchpod/examples')]\n"
                    "bad = []\n"
                    "for root in roots:\n"
                    "    for p in root.rglob('*.py'):\n"
                    "        if pathlib.Path(importlib.util.cache_from_source(str(p))).exists():\n"
                    "            continue\n"
                    "        try:\n"
                    "            compile(p.read_bytes(), str(p), 'exec')\n"
                    "        except SyntaxError:\n"
                    "            continue\n"
                    "        bad.append(str(p))\n"
                    "print(len(bad), bad[:5])\n"
                    "PY")
    assert out.strip().startswith("0 "), out
