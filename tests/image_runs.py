"""The one run per image and arch that the image tier spends on the image's torch.

Under QEMU every `import torch` costs about a minute, so what several tests ask of the
image's torch comes from one container: as the users clusters really run it as (an
arbitrary UID, no /etc/passwd entry, a read-only root with a tmpfs /tmp), the launcher plans
(once as it is, once under a Slurm-like environment), the doctor reports, and a two-process
`torchpod run` trains through torchvision. Rank 0, whose torch is already imported, then
reads what the image tier checks against the labels: the probe, torch's own versions, and
the image's own torchrun parser judging the Slurm plan (the host's torch, newer, would accept
flags an image's older torch rejects: torch 2.9 has no --signals-to-handle).

Runs are remembered per image, arch and user for the test session; the image tier keeps the
tests of one image and arch on one worker (tests/image/conftest.py), so each is made once.
"""

from __future__ import annotations

import json

from torchpod_toolkit.imagebuild.host import emulation_volumes, host_arch

from paths import ROOT

# An OpenShift-like arbitrary UID in group 0, and one with a group of its own (Apptainer,
# enroot, Docker's --user); neither is in /etc/passwd.
USERS = ["12345:0", "12345:12345"]

# A worker run by `torchpod run`: the group forms, torchvision runs a model, torch hub's
# cache directory (under HOME) takes a file, and the user has no passwd entry. Rank 0 then
# prints the facts the image's labels are checked against.
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
rank = dist.get_rank()
dist.destroy_process_group()
if rank == 0:
    from torch.distributed.run import get_args_parser
    from torchpod.probe import probe
    with open("/tmp/slurm-plan.json") as f:
        plan = json.load(f)
    ns = get_args_parser().parse_args(plan["torchrun_args"] + ["train.py", "--lr", "1"])
    known = {s for a in get_args_parser()._actions for s in a.option_strings}
    facts = {"probe": probe(True), "plan": plan, "nnodes": ns.nnodes, "rdzv_endpoint": ns.rdzv_endpoint,
             "has_signals_flag": "--signals-to-handle" in known,
             "torch": [torch.__version__, torch.version.cuda, list(torch.cuda.nccl.version())]}
    os.write(1, ("FACTS " + json.dumps(facts) + "\\n").encode())
"""

# The plan under a Slurm-like environment is made before the run: inside a worker,
# torchrun's own variables (RANK, MASTER_ADDR, ...) would be part of its environment.
SCRIPT = """set -eu
cat > /tmp/worker.py <<'PY'
{worker}
PY
SLURM_JOB_ID=77 SLURM_JOB_NODELIST='n[1-2]' SLURM_NODEID=0 SLURM_NNODES=2 TORCHPOD_HOSTNAME=n1 \\
  CUDA_VISIBLE_DEVICES= torchpod plan -- train.py --lr 1 > /tmp/slurm-plan.json
torchpod plan > /tmp/plan.json
rc=0; torchpod doctor --format json > /tmp/doctor.json || rc=$?
[ "$rc" -le 1 ] || {{ echo "doctor exit $rc"; exit 1; }}
CUDA_VISIBLE_DEVICES= torchpod run --nproc-per-node=2 /tmp/worker.py
echo "PLAN $(tr -d '\\n' < /tmp/plan.json)"
echo "DOCTOR $(tr -d '\\n' < /tmp/doctor.json)"
"""

_RUNS: dict[tuple[str, str, str], str] = {}


def run_as(built, docker_client, image_test_label, user: str) -> str:
    """The output of SCRIPT in a fresh container of ``built``'s image as ``user`` (made once)."""
    key = (built.defn.name, built.arch.name, user)
    if key not in _RUNS:
        volumes = emulation_volumes(built.arch, host_arch(), ROOT / ".cache")
        out = docker_client.containers.run(
            built.defn.ref(built.arch), ["-c", SCRIPT.format(worker=WORKER)], entrypoint="sh", user=user,
            read_only=True, tmpfs={"/tmp": ""}, platform=built.arch.docker, network_disabled=True, remove=True,
            labels=image_test_label, volumes=volumes, stdout=True, stderr=True)
        _RUNS[key] = out.decode(errors="replace")
    return _RUNS[key]


def facts(built, docker_client, image_test_label) -> dict:
    """What the image's torch says (rank 0's FACTS line of the first user's run)."""
    text = run_as(built, docker_client, image_test_label, USERS[0])
    lines = [ln for ln in text.splitlines() if ln.startswith("FACTS ")]
    assert len(lines) == 1, f"no FACTS line from rank 0:\n{text[-3000:]}"
    return json.loads(lines[0][len("FACTS "):])
