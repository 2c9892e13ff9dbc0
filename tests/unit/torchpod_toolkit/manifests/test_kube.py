"""`invoke manifests`: every generated manifest is valid (Kubernetes schemas, the operators'
CRDs made strict), within policy, and plans as intended on every pod the operator model
says it creates; bad input is one line; the worked examples in manifests/ are current."""

from __future__ import annotations

import copy
import re
from functools import lru_cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from torchpod.errors import InputError
from torchpod_toolkit.manifests import kube, operators, policy, render as render_mod
from torchpod_toolkit.manifests.spec import HPC, KUBE, JobSpec, check

from launcher_cases import plan_for
from torchpod.schedulers.common import Facts

from paths import ROOT

REFERENCE = ROOT / "tests" / "reference"
EXAMPLES = ROOT / "manifests"
K8S_VERSION = "1.33.0"  # the Kubernetes version core objects are validated for (README)
IMAGE = "registry.example.com/torchpod/pytorch:2.13.0-cuda13.0"
SITE_LIB_HOST = "/home/user/software/aws-ofi-nccl-1.14.0/lib"
CRDS = {
    ("batch.volcano.sh/v1alpha1", "Job"): "crds/batch.volcano.sh_jobs.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "crds/kubeflow.org_pytorchjobs.yaml",
    ("trainer.kubeflow.org/v1alpha1", "TrainJob"): "crds/trainer.kubeflow.org_trainjobs.yaml",
}


def _specs() -> list[JobSpec]:
    out = []
    for sched in KUBE:
        for rdma in ("none", "hostnetwork", "device-plugin"):
            if sched == "trainer" and rdma == "hostnetwork":
                continue
            resource = "rdma/rdma_shared_device_a" if rdma == "device-plugin" else ""
            out.append(JobSpec(sched, 3, IMAGE, ("train.py", "--epochs", "2"), rdma=rdma, rdma_resource=resource,
                               preset="oci-bm-gpu-h100.8" if rdma == "hostnetwork" else ""))
        out.append(JobSpec(sched, 2, IMAGE, ("train.py",), name="etcdjob", rdzv="etcd", etcd_server=True))
        out.append(JobSpec(sched, 2, IMAGE, ("train.py",), name="cpujob", gpus_per_node=0,
                           rdzv="etcd", etcd_endpoint="etcd.infra:2379"))
    out.append(JobSpec("kubeflow", 2, IMAGE, ("train.py",), name="efajob", preset="aws-p5", rdma="device-plugin",
                       rdma_resource="vpc.amazonaws.com/efa"))
    for sched in HPC:
        for runtime in ("apptainer", "enroot", "podman", "docker", "none"):
            out.append(JobSpec(sched, 2, IMAGE, ("train.py", "--lr", "1e-3"), runtime=runtime, gpus_per_node=4,
                               preset="hpe-slingshot-gh200" if sched == "pbs-pals" else "",
                               site_lib=SITE_LIB_HOST if sched == "pbs-pals" and runtime != "none" else ""))
    out.append(JobSpec("slurm", 2, IMAGE, ("train.py",), name="efajob", runtime="apptainer", preset="aws-p5"))
    return out


SPECS = _specs()
KUBE_SPECS = [s for s in SPECS if s.kube]


def _id(s: JobSpec) -> str:
    return f"{s.scheduler}-{s.name}-{s.rdma}-{s.rdzv}-{s.runtime or 'k8s'}"


def _docs(spec: JobSpec) -> list[dict]:
    out = render_mod.render(spec)
    return [d for o in out if o.name.endswith(".yaml") for d in yaml.safe_load_all(o.text) if d]


@lru_cache(maxsize=None)
def _crd_schema(key) -> dict:
    crd = yaml.safe_load((REFERENCE / CRDS[key]).read_text())
    version = key[0].split("/")[1]
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    return _strict(copy.deepcopy(schema))


def _strict(node):
    """An API server prunes unknown fields; the tests reject them (reference README)."""
    if isinstance(node, dict):
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for v in node.values():
            _strict(v)
    elif isinstance(node, list):
        for v in node:
            _strict(v)
    return node


def _pod_templates(doc):
    """Pod specs inside a custom resource, wrapped as Pods for the core schema."""
    spec = doc["spec"]
    if doc["kind"] == "Job":
        templates = [t["template"] for t in spec["tasks"]]
    elif doc["kind"] == "PyTorchJob":
        templates = [r["template"] for r in spec["pytorchReplicaSpecs"].values()]
    else:
        return []
    return [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "t", **(t.get("metadata") or {})},
             "spec": t["spec"]} for t in templates]


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=_id)
def test_core_objects_and_pod_templates_pass_strict_kubernetes_schema(spec):
    for doc in _docs(spec):
        core = [doc] if doc["apiVersion"] == "v1" else _pod_templates(doc)
        for obj in core:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=_id)
def test_custom_resources_pass_their_crd_schema_strictly(spec):
    crs = [d for d in _docs(spec) if (d["apiVersion"], d["kind"]) in CRDS]
    assert len(crs) == 1
    jsonschema.validate(crs[0], _crd_schema((crs[0]["apiVersion"], crs[0]["kind"])))


@pytest.mark.parametrize("scheduler, path, field", [
    ("volcano", ["spec"], "minAvaliable"),
    ("kubeflow", ["spec"], "nprocPerNod"),
    ("trainer", ["spec", "trainer"], "numNode"),
])
def test_strict_crd_schema_rejects_a_misspelt_field(scheduler, path, field):
    doc = next(d for d in _docs(JobSpec(scheduler, 2, IMAGE, ("t.py",))) if d["apiVersion"] != "v1")
    target = doc
    for key in path:
        target = target[key]
    target[field] = 1
    with pytest.raises(jsonschema.ValidationError, match=field):
        jsonschema.validate(doc, _crd_schema((doc["apiVersion"], doc["kind"])))


def test_strict_core_schema_rejects_a_misspelt_pod_field():
    doc = _docs(JobSpec("volcano", 2, IMAGE, ("t.py",)))[0]
    pod = _pod_templates(doc)[0]
    pod["spec"]["containers"][0]["volumeMount"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(pod, K8S_VERSION, strict=True)


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=_id)
def test_every_generated_manifest_is_within_policy(spec):
    assert policy.violations(_docs(spec)) == []


def test_policy_flags_what_a_manifest_must_not_ask_for():
    docs = _docs(JobSpec("kubeflow", 2, IMAGE, ("t.py",), rdma="hostnetwork", privileged=True))
    assert any("privileged" in v for v in policy.violations(docs))
    assert policy.violations(docs, allow_privileged=True) == []
    c = docs[0]["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    c["securityContext"]["capabilities"]["add"].append("SYS_ADMIN")
    c["image"] = "registry.example.com/torchpod/pytorch:latest"
    c["resources"]["requests"]["nvidia.com/gpu"] = "4"
    found = "\n".join(policy.violations(docs, allow_privileged=True))
    assert "SYS_ADMIN" in found and "'latest'" in found and "nvidia.com/gpu requests 4 but limits 8" in found


def _pod_plan(pod: operators.Pod, tmp_path: Path):
    env = dict(pod.env)
    root = tmp_path / pod.name
    for path, text in pod.files:
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    env["CUDA_VISIBLE_DEVICES"] = ""
    args = list(pod.args)
    assert args[0] == "run" and "--" in args, args  # the image's entrypoint, no shell
    split = args.index("--")
    return plan_for(env, tuple(args[1:split]), Facts(hostname=pod.hostname, root=root, sysfs_root=root / "sys"),
                    script=args[split + 1])


EXPECTED_SCHEDULER = {"volcano": "volcano", "volcano-master": "volcano", "kubeflow": "kubeflow",
                      "kubeflow-elastic": "kubeflow", "trainer": "kubeflow", "runai": "runai"}


def _endpoint(spec: JobSpec) -> str:
    n = spec.name
    return {"volcano": f"{n}-worker-0.{n}", "volcano-master": f"{n}-master-0.{n}",
            "kubeflow": f"{n}-master-0", "runai": f"{n}-master-0", "kubeflow-elastic": f"{n}-worker-0",
            "trainer": f"{n}-node-0-0.{n}"}[spec.scheduler] + f":{check(spec).port}"


@pytest.mark.parametrize("spec", KUBE_SPECS, ids=_id)
def test_every_pod_the_operator_creates_plans_as_intended(spec, tmp_path):
    spec = check(spec)
    pods = operators.pods(kube.objects(spec))
    assert len(pods) == spec.nodes
    plans = [_pod_plan(p, tmp_path) for p in pods]
    assert {p.scheduler for p in plans} == {EXPECTED_SCHEDULER[spec.scheduler]}
    assert {str(p.nnodes).split(":")[-1] for p in plans} == {str(spec.nodes)}
    assert sorted(p.node_rank for p in plans) == list(range(spec.nodes))
    assert len({p.rdzv_id for p in plans}) == 1
    if spec.rdzv == "etcd":
        assert {(p.rdzv_backend, str(p.rdzv_endpoint)) for p in plans} == {("etcd-v2", spec.etcd_endpoint)}
    else:
        assert {str(p.rdzv_endpoint) for p in plans} == {_endpoint(spec)}
        hosts = [dict(p.rdzv_conf).get("is_host") for p in plans]
        assert hosts == ["true"] + ["false"] * (spec.nodes - 1), hosts
    if spec.preset:
        assert all(dict(p.env).get("NCCL_IB_HCA") or "TORCHPOD_PRESET" in dict(pod.env)
                   for p, pod in zip(plans, pods))


BAD = [
    (dict(nodes=0), "--nodes=0"),
    (dict(nodes=-2), "--nodes=-2"),
    (dict(scheduler="lsf"), "--scheduler='lsf' is unknown"),
    (dict(image="registry.example.com/torchpod/pytorch"), "has no tag"),
    (dict(image="registry.example.com:5000/torchpod/pytorch"), "has no tag"),
    (dict(image="torchpod/pytorch:latest"), "'latest'"),
    (dict(preset="oci-bm-gpu-a10"), "--preset='oci-bm-gpu-a10' is unknown"),
    (dict(preset="oci-bm-gpu-h100.8", gpus_per_node=16), "shape with 8 GPUs"),
    (dict(rdzv="etcd"), "--rdzv etcd needs an etcd endpoint"),
    (dict(rdzv="etcd", etcd_endpoint="etcd.infra"), "has no port"),
    (dict(rdma="device-plugin"), "--rdma device-plugin needs --rdma-resource"),
    (dict(rdma="sriov"), "--rdma='sriov' is unknown"),
    (dict(scheduler="slurm", runtime="singularity"), "--runtime='singularity' is unknown"),
    (dict(scheduler="slurm", rdma="hostnetwork"), "is for Kubernetes pods"),
    (dict(runtime="apptainer"), "is for HPC job scripts"),
    (dict(scheduler="trainer", rdma="hostnetwork"), "cannot set hostNetwork"),
    (dict(scheduler="volcano-master", nodes=1), "expected 2 or more"),
    (dict(name="Train_1"), "--name='Train_1'"),
    (dict(command=()), "no training script"),
    (dict(scheduler="pbs-pals", preset="hpe-slingshot-gh200", gpus_per_node=4), "needs --site-lib HOSTDIR"),
    (dict(scheduler="slurm", preset="aws-p5", site_lib="/opt/x"), "--site-lib is for Slingshot presets"),
    (dict(scheduler="slurm", preset="hpe-slingshot-gh200", gpus_per_node=4, site_lib="lib"), "absolute host path"),
    (dict(preset="hpe-slingshot-gh200", gpus_per_node=4), "a Slingshot HPC shape"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m for _, m in BAD])
def test_bad_input_is_one_line_naming_the_flag(change, message):
    fields = dict(scheduler="volcano", nodes=2, image=IMAGE, command=("train.py",))
    fields.update(change)
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec(**fields))
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("spec", [s for s in SPECS if not s.kube], ids=_id)
def test_hpc_script_starts_one_launcher_per_node(spec):
    (out,) = render_mod.render(spec)
    text = out.text
    # torchpod named (no container, pyxis), or the image's ENTRYPOINT given `run --` (docker,
    # podman, enroot start: the imported image's /etc/rc execs the ENTRYPOINT)
    launch = [ln for ln in text.splitlines() if "torchpod run" in ln or " run -- " in ln]
    assert len(launch) == 1, text  # exactly one launch line, and it fans out per node
    line = launch[0]
    if spec.scheduler == "slurm":
        assert line.startswith("srun --ntasks-per-node=1") and "#SBATCH --ntasks-per-node=1" in text
    elif spec.scheduler == "pbs-pals":
        assert line.startswith('mpiexec -n "$NNODES" --ppn 1') and ":mpiprocs=1" in text
    else:
        assert line.startswith("pbsdsh -- ") and ":mpiprocs=1" in text
        assert "PBS_NODEFILE" in line or spec.runtime == "none"  # the nodefile reaches the container
    assert "torchrun" not in text  # the launcher, not a hand-written torchrun
    if spec.runtime in ("apptainer", "enroot"):
        assert text.count(" pull ") + text.count("enroot import") == 1  # fetched once per job


def _examples() -> list[Path]:
    return sorted(p for p in EXAMPLES.rglob("*") if p.is_file() and p.name != "README.md")


def test_worked_examples_exist_for_every_scheduler():
    shown = {m.group(1) for p in _examples() for m in [re.search(r"--scheduler (\S+)", p.read_text())] if m}
    assert shown == set(KUBE) | set(HPC)


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.name)
def test_worked_example_is_what_its_regenerate_line_renders(path):
    spec = render_mod.parse_invoke_line(render_mod.regenerate_line(path.read_text()))
    rendered = {o.name: o.text for o in render_mod.render(spec)}
    assert path.name in rendered, sorted(rendered)
    assert path.read_text() == rendered[path.name], f"{path} is stale: run `invoke manifests --refresh`"


@pytest.mark.parametrize("runtime, form", [("apptainer", "--bind {h}:{c}:ro"), ("podman", "-v {h}:{c}:ro"),
                                           ("docker", "-v {h}:{c}:ro"), ("enroot", "{h}:{c}:ro")])
def test_hpc_scripts_bind_the_sites_plugin_where_the_launcher_looks(runtime, form):
    spec = check(JobSpec("slurm", 2, IMAGE, ("t.py",), runtime=runtime, preset="hpe-slingshot-gh200",
                         gpus_per_node=4, site_lib=SITE_LIB_HOST))
    (out,) = render_mod.render(spec)
    binds = spec.fabric_binds()
    assert {c for _, c in binds} >= {"/opt/torchpod/site/lib", "/opt/torchpod/site/deps/libcxi.so.1"}
    for host, inside in binds:
        assert form.format(h=host, c=inside) in out.text, out.text
    assert "Net plugin: bound in from the host" in out.text


def test_an_efa_pod_mounts_the_efa_installers_tree_read_only():
    docs = _docs(JobSpec("kubeflow", 2, IMAGE, ("t.py",), preset="aws-p5", rdma="device-plugin",
                         rdma_resource="vpc.amazonaws.com/efa"))
    pod = docs[0]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert {"name": "site-0", "hostPath": {"path": "/opt/amazon", "type": "Directory"}} in pod["volumes"]
    assert {"name": "site-0", "mountPath": "/opt/amazon", "readOnly": True} in pod["containers"][0]["volumeMounts"]


def test_the_docs_show_the_current_pbs_script_that_fixes_seed_001():
    script = (EXAMPLES / "pbs" / "ddp.pbs-pals.sh").read_text()
    launch = next(line for line in script.splitlines() if line.startswith("mpiexec "))
    page = ROOT / "docs" / "manifests.md"
    assert launch in page.read_text(), "docs/manifests.md's PBS example is stale: copy it from the file"


def test_podman_passes_every_variable_family_the_launcher_reads():
    (out,) = render_mod.render(JobSpec("pbs-pals", 2, IMAGE, ("t.py",), runtime="podman", gpus_per_node=4))
    assert "--env 'PALS_*' --env 'PBS_*'" in out.text, out.text
    (out,) = render_mod.render(JobSpec("slurm", 2, IMAGE, ("t.py",), runtime="podman", gpus_per_node=4))
    assert "--env 'SLURM_*'" in out.text and "PALS" not in out.text
