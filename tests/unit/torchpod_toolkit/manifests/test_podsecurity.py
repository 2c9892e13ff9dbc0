"""torchpod_toolkit.manifests.podsecurity: each Pod Security Standards check fires on a pod
that violates it and not on torchpod's restricted pod; the level every rendered manifest's
header states is the checker's, on the YAML as written; what cannot meet a requested level
is one line naming the checks (kubernetes/pod-security-admission policy/, 8f84a87)."""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs, podsecurity, podtemplate
from torchpod_toolkit.manifests import render as render_mod
from torchpod_toolkit.manifests.spec import JobSpec, check

from manifest_cases import IMAGE


def documents(text: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(text) if d]


# torchpod's pod for --rdma none, as kube renders it: every check passes
RESTRICTED = podtemplate.pod_spec(check(JobSpec("volcano", 2, IMAGE, ("t.py",))))


def _with(change) -> dict:
    pod = copy.deepcopy(RESTRICTED)
    change(pod)
    return pod


def _container(pod) -> dict:
    return pod["containers"][0]


def _sc(pod) -> dict:
    return _container(pod)["securityContext"]


# (check ID, level, a change that violates exactly that check)
VIOLATIONS = [
    ("hostNamespaces", "baseline", lambda p: p.update(hostPID=True)),
    ("privileged", "baseline", lambda p: _sc(p).update(privileged=True)),
    ("capabilities_baseline", "baseline", lambda p: _sc(p)["capabilities"].update(add=["SYS_ADMIN"])),
    ("hostPathVolumes", "baseline", lambda p: p["volumes"].append({"name": "h", "hostPath": {"path": "/x"}})),
    ("hostPorts", "baseline", lambda p: _container(p)["ports"][0].update(hostPort=29400)),
    ("appArmorProfile", "baseline", lambda p: _sc(p).update(appArmorProfile={"type": "Unconfined"})),
    ("seLinuxOptions", "baseline", lambda p: _sc(p).update(seLinuxOptions={"type": "spc_t"})),
    ("procMount_baseline", "baseline", lambda p: _sc(p).update(procMount="Unmasked")),
    ("seccompProfile_baseline", "baseline",
     lambda p: p["securityContext"].update(seccompProfile={"type": "Unconfined"})),
    ("sysctls", "baseline", lambda p: p["securityContext"].update(sysctls=[{"name": "kernel.msgmax", "value": "1"}])),
    ("hostProbesAndHostLifecycle", "baseline",
     lambda p: _container(p).update(livenessProbe={"tcpSocket": {"host": "10.0.0.1", "port": 1}})),
    ("restrictedVolumes", "restricted", lambda p: p["volumes"].append({"name": "n", "nfs": {"server": "s"}})),
    ("allowPrivilegeEscalation", "restricted", lambda p: _sc(p).pop("allowPrivilegeEscalation")),
    ("runAsNonRoot", "restricted", lambda p: (_sc(p).pop("runAsNonRoot"), p["securityContext"].pop("runAsNonRoot"))),
    ("runAsUser", "restricted", lambda p: p["securityContext"].update(runAsUser=0)),
    ("seccompProfile_restricted", "restricted", lambda p: p["securityContext"].pop("seccompProfile")),
    ("capabilities_restricted", "restricted", lambda p: _sc(p)["capabilities"].update(drop=["NET_RAW"])),
]


def test_torchpods_restricted_pod_passes_every_check():
    assert podsecurity.check_pod(RESTRICTED) == []
    assert {c for c, _, _ in podsecurity.CHECKS} == {c for c, _, _ in VIOLATIONS}  # every check has its case


@pytest.mark.parametrize("check_id, lvl, change", VIOLATIONS, ids=[v[0] for v in VIOLATIONS])
def test_each_check_fires_on_the_pod_that_violates_it_and_sets_the_level(check_id, lvl, change):
    failures = podsecurity.check_pod(_with(change))
    assert {f.check for f in failures} >= {check_id}
    assert all(f.level == "restricted" for f in failures) if lvl == "restricted" else True
    found, _ = podsecurity.level([{"kind": "Pod", "metadata": {"name": "p"}, "spec": _with(change)}])
    assert found == ("privileged" if lvl == "baseline" else "baseline")


def test_a_container_may_restate_what_the_pod_allows_but_not_contradict_it():
    ok = _with(lambda p: _sc(p).update(seccompProfile={"type": "RuntimeDefault"}))
    assert podsecurity.check_pod(ok) == []
    bad = _with(lambda p: _sc(p).update(runAsNonRoot=False))
    assert [f.check for f in podsecurity.check_pod(bad)] == ["runAsNonRoot"]


KUBE_KINDS = list(jobs.KUBE)


def _header_level(text: str) -> str:
    m = re.search(r"^# Pod Security: namespace level '(\w+)'", text, re.M)
    assert m, text[:400]
    return m.group(1)


@pytest.mark.parametrize("kind", KUBE_KINDS)
@pytest.mark.parametrize("extra, expected", [
    ({}, "restricted"),
    ({"rdma": "device-plugin", "rdma_resource": "rdma/rdma_shared_device_a"}, "privileged"),
    ({"privileged": True}, "privileged"),
    ({"run_as_user": 0}, "baseline"),
])
def test_the_header_states_the_checkers_level_of_the_yaml_as_written(kind, extra, expected):
    if kind == "trainer" and extra.get("rdma") == "hostnetwork":
        pytest.skip("a TrainJob cannot set hostNetwork (spec.check refuses it)")
    (out, *_) = [o for o in render_mod.render(JobSpec(kind, 2, IMAGE, ("t.py",), **extra)) if o.name.endswith(".yaml")]
    found, _ = podsecurity.level(documents(out.text))
    if expected == "restricted" and kind in MASTER_AND_WORKERS:  # the operator's init container: below
        expected = "baseline"
    assert found == _header_level(out.text) == expected


# PyTorchJobs with a Master replica, whose Worker pods training-operator gives its init container
MASTER_AND_WORKERS = ("kubeflow", "runai")


@pytest.mark.parametrize("kind", MASTER_AND_WORKERS)
def test_a_pytorchjobs_worker_is_judged_with_the_init_container_the_operator_adds(kind):
    """training-operator v1.8.1 adds init-pytorch, with no securityContext, to the Worker pods
    of a job with a Master (pkg/controller.v1/pytorch/initcontainer.go); a namespace enforcing
    'restricted' refuses them, so the header says 'baseline' and puts it down to the operator."""
    (out, *_) = [o for o in render_mod.render(JobSpec(kind, 2, IMAGE, ("t.py",))) if o.name.endswith(".yaml")]
    pods = dict(podsecurity.pod_specs(documents(out.text)[0]))
    worker = next(pod for where, pod in pods.items() if where.endswith(" Worker"))
    assert [c["name"] for c in worker["initContainers"]] == ["init-pytorch"]
    assert "initContainers" not in next(pod for where, pod in pods.items() if where.endswith(" Master"))
    assert _header_level(out.text) == "baseline"
    assert "allowPrivilegeEscalation: the init container training-operator adds to Worker pods" in out.text
    # one node: a Master alone, no Worker, nothing added
    (one, *_) = [o for o in render_mod.render(JobSpec(kind, 1, IMAGE, ("t.py",))) if o.name.endswith(".yaml")]
    assert _header_level(one.text) == "restricted"
    with pytest.raises(InputError, match="init container training-operator adds"):
        render_mod.render(JobSpec(kind, 2, IMAGE, ("t.py",), pod_security="restricted"))


def test_every_worked_example_states_the_level_of_its_own_pods():
    from paths import ROOT

    for path in sorted((ROOT / "manifests").rglob("*.yaml")):
        text = path.read_text()
        if "# Pod Security:" in text:
            assert _header_level(text) == podsecurity.level(documents(text))[0], path


@pytest.mark.parametrize("extra, needles", [
    ({"rdma": "hostnetwork", "pod_security": "restricted"}, ["hostNamespaces (hostNetwork=true", "runAsNonRoot"]),
    ({"rdma": "hostnetwork", "pod_security": "baseline"}, ["hostNamespaces", "capabilities_baseline"]),
    ({"run_as_user": 0, "pod_security": "restricted"}, ["runAsUser (runAsUser 0: --run-as-user 0)"]),
    ({"privileged": True, "pod_security": "baseline"}, ["privileged (privileged: true"]),
])
def test_a_level_the_job_cannot_meet_is_one_line_naming_the_checks(extra, needles):
    with pytest.raises(InputError) as err:
        render_mod.render(JobSpec("kubeflow", 2, IMAGE, ("t.py",), **extra))
    text = str(err.value)
    assert "\n" not in text and text.startswith(f"--pod-security={extra['pod_security']} cannot be met")
    assert all(n in text for n in needles), text


@pytest.mark.parametrize("extra, needle", [
    ({"pod_security": "Restricted"}, "--pod-security='Restricted' is unknown"),
    ({"run_as_user": "abc"}, "--run-as-user='abc'; expected a whole number"),
    ({"run_as_user": "１０００"}, "ASCII digits only"),
    ({"fs_group": "-1"}, "--fs-group='-1'"),
    ({"run_as_user": 5, "rdma": "device-plugin", "rdma_resource": "rdma/x"}, "--run-as-user=5 applies to pods that"),
    ({"run_as_group": 5, "privileged": True}, "--privileged runs as root"),
])
def test_bad_security_options_are_one_line(extra, needle):
    with pytest.raises(InputError, match=re.escape(needle)):
        check(JobSpec("volcano", 2, IMAGE, ("t.py",), **extra))


def test_a_requested_level_that_is_met_renders_and_the_ids_reach_the_pod():
    (out,) = render_mod.render(JobSpec("lws", 2, IMAGE, ("t.py",), pod_security="restricted", run_as_user=4242,
                                       run_as_group=0, fs_group=4242))
    pod = documents(out.text)[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 4242, "runAsGroup": 0, "fsGroup": 4242,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "tmp", "mountPath": "/tmp"} in pod["containers"][0]["volumeMounts"]


@settings(deadline=None, max_examples=40)
@given(kind=st.sampled_from(KUBE_KINDS), rdma=st.sampled_from(["none", "device-plugin"]), priv=st.booleans(),
       uid=st.integers(0, 3), etcd=st.booleans())
def test_any_request_states_the_level_its_pods_meet(kind, rdma, priv, uid, etcd):
    extra = {"rdma": rdma, "privileged": priv}
    if rdma == "device-plugin":
        extra["rdma_resource"] = "rdma/x"
    if rdma == "none" and not priv:
        extra["run_as_user"] = uid
    if etcd and kind != "trainer":
        extra.update(rdzv="etcd", etcd_server=True)
    outs = [o for o in render_mod.render(JobSpec(kind, 2, IMAGE, ("t.py",), **extra)) if o.name.endswith(".yaml")]
    assert _header_level(outs[0].text) == podsecurity.level(documents(outs[0].text))[0]


@pytest.mark.parametrize("extra, reason, not_reason", [
    ({"volume": ("hostpath:/data/ckpt:/ckpt",)}, "hostPathVolumes: --volume hostpath:", "/dev/infiniband"),
    ({"rdma": "hostnetwork"}, "hostPathVolumes: the host's /dev/infiniband (--rdma hostnetwork)", "--volume"),
])
def test_the_header_puts_a_host_path_down_to_the_option_that_asked_for_it(extra, reason, not_reason):
    (out, *_) = [o for o in render_mod.render(JobSpec("jobset", 2, IMAGE, ("t.py",), **extra))
                 if o.name.endswith(".yaml")]
    header = next(line for line in out.text.splitlines() if line.startswith("# Pod Security"))
    assert _header_level(out.text) == "privileged" and reason in header and not_reason not in header


def test_the_docs_table_of_levels_is_the_checkers():
    """docs/manifests.md, "Against the API server's own admission": each cell is the level
    the checker computes for that kind and option set (the cluster tier holds the checker to
    the API server's admission on the same jobs)."""
    from admission_cases import CASES, KINDS, REFUSED
    from admission_cases import documents as admission_documents
    from paths import ROOT

    text = (ROOT / "docs" / "manifests.md").read_text(encoding="utf-8")
    section = text.split("### Against the API server's own admission", 1)[1].split("\n#", 1)[0]
    rows = [[c.strip().strip("`") for c in line.strip("|").split("|")]
            for line in section.splitlines() if line.startswith("|") and not line.startswith("|---")]
    assert rows[0] == ["options", *KINDS]
    table = {row[0]: dict(zip(KINDS, row[1:])) for row in rows[1:]}
    assert list(table) == list(CASES)
    for case in CASES:
        for kind in KINDS:
            docs = admission_documents(kind, case)
            assert table[case][kind] == (REFUSED if docs is None else podsecurity.level(docs)[0]), (case, kind)


def test_at_restricted_a_restricted_check_replaces_the_baseline_one_it_overrides():
    """pod-security-admission v0.37.2 (OverrideCheckIDs): a namespace enforcing 'restricted'
    runs restrictedVolumes instead of hostPathVolumes, capabilities_restricted instead of
    capabilities_baseline and seccompProfile_restricted instead of seccompProfile_baseline;
    a kube-apiserver refused such a pod naming the restricted checks alone."""
    def bad(p):
        p["volumes"] = [{"name": "h", "hostPath": {"path": "/x"}}]
        _sc(p)["capabilities"].update(add=["SYS_ADMIN"])
        _sc(p)["seccompProfile"] = {"type": "Unconfined"}
    pod = _with(bad)
    every = {f.check for f in podsecurity.check_pod(pod)}
    assert set(podsecurity.OVERRIDES) | set(podsecurity.OVERRIDES.values()) <= every
    at_restricted = {f.check for f in podsecurity.failures_at(pod, "restricted")}
    assert set(podsecurity.OVERRIDES) <= at_restricted and not set(podsecurity.OVERRIDES.values()) & at_restricted
    assert {f.check for f in podsecurity.failures_at(pod, "baseline")} == set(podsecurity.OVERRIDES.values())
    assert podsecurity.failures_at(pod, "privileged") == []
    with pytest.raises(InputError) as info:
        render_mod.render(JobSpec("jobset", 2, IMAGE, ("t.py",), volume=("hostpath:/d:/d",), pod_security="restricted"))
    assert "restrictedVolumes" in str(info.value) and "hostPathVolumes" not in str(info.value)


def test_on_the_hosts_network_a_container_port_is_a_host_port():
    """The API server defaults hostPort to containerPort under hostNetwork before admission
    (kubernetes v1.37.2, pkg/apis/core/v1/defaults.go): a kube-apiserver refused such a pod
    at baseline for "hostPort" though the render wrote none."""
    with_port = _with(lambda p: _container(p).update(ports=[{"containerPort": 29400}]))
    assert podsecurity.host_ports(with_port) == []
    on_host = _with(lambda p: (_container(p).update(ports=[{"containerPort": 29400}]), p.update(hostNetwork=True)))
    assert podsecurity.host_ports(on_host) == ["hostPort [29400]"]
    (out, *_) = [o for o in render_mod.render(JobSpec("jobset", 2, IMAGE, ("t.py",), rdma="hostnetwork"))
                 if o.name.endswith(".yaml")]
    assert "hostPorts: on the host's network each containerPort is a hostPort" in out.text
