"""torchpod_toolkit.kube.podargs: the docker command lines of a pod's sandbox and
containers, as lists of words: Docker's name grammar, the pod's DNS names, securityContext,
limits and mounts, and Kubernetes' command/args meaning; hostile names and values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from torchpod_toolkit.kube import podargs
from torchpod_toolkit.kube.podenv import ConfigError

POD = {"metadata": {"name": "pair-0-abcde", "namespace": "ns", "uid": "1234"},
       "spec": {"hostname": "pair-0", "subdomain": "peers", "containers": [{"name": "main", "image": "img:1"}]}}


def argv(container, **extra):
    options = {"name": "k8s_main", "sandbox": "k8s_POD", "env": {}, "command": [], "args": [], "sources": {},
               "labels": {"l": "v"}} | extra
    return podargs.container_argv(POD, {"name": "main", "image": "img:1"} | container, **options)


def test_names_follow_the_dockershim_and_docker_grammar():
    assert podargs.container_name("ns", "p", "u", "main", 2) == "k8s_main_p_ns_u_2"
    with pytest.raises(ValueError, match="Docker container name"):
        podargs.container_name("ns", "p o d", "u", "main", 0)


def test_the_sandbox_name_fits_one_dns_label_and_is_the_pods_own():
    uid = "c75f7eb7-20da-4a2a-ab6d-baf2760f1452"  # a pod UID as the API server writes it
    name = podargs.sandbox_name(uid)
    assert name == f"k8s_POD_{uid}" and len(name) <= podargs.DNS_LABEL_MAX
    # the dockershim's own form for the same pod would not fit: Docker's DNS could not answer for it
    assert len(podargs.container_name("fs-kubeflow-2-0", "fs-kubeflow-2-0-worker-0", uid, "POD", 0)) > 63
    assert podargs.sandbox_name(uid.replace("c", "d")) != name
    for bad in ("u" * 56, "a b", "/"):  # longer than a label, or not a Docker name
        with pytest.raises(ValueError, match="at most 63 characters"):
            podargs.sandbox_name(bad)


@given(st.text(min_size=1, max_size=80))
def test_any_name_is_either_a_docker_name_or_refused(name):
    try:
        made = podargs.container_name("ns", name, "u", "c", 0)
    except ValueError:
        return
    assert podargs.DOCKER_NAME.fullmatch(made)


def test_the_sandbox_carries_the_hostname_the_headless_names_and_the_search_path():
    words = podargs.sandbox_argv(POD, "k8s_POD", "img:1", "net", {"a": "b"})
    assert words[:2] == ["docker", "create"]
    pairs = list(zip(words, words[1:]))
    assert ("--hostname", "pair-0") in pairs and ("--domainname", "peers.ns.svc.cluster.local") in pairs
    aliases = [b for a, b in pairs if a == "--network-alias"]
    assert aliases == ["pair-0.peers", "pair-0.peers.ns", "pair-0.peers.ns.svc", "pair-0.peers.ns.svc.cluster.local"]
    assert ("--dns-search", "ns.svc.cluster.local") in pairs and words[-2:] == ["img:1", "infinity"]
    held = podargs.sandbox_argv(POD, "k8s_POD", "img:1", "net", {}, holds=["k8s_shm_p_ns_u_0"])
    assert "--mount=type=volume,source=k8s_shm_p_ns_u_0,target=/run/pod-volumes/0" in held
    plain = {"metadata": {"name": "x" * 70, "namespace": "ns"}, "spec": {}}
    assert podargs.hostname(plain) == "x" * 63 and podargs.dns_names(plain) == []


ETCD_POD = {"metadata": {"name": "etcd", "namespace": "ns", "labels": {"app": "etcd", "tier": "rdzv"}},
            "spec": {"containers": [{"name": "etcd", "image": "e:1",
                                     "ports": [{"name": "client", "containerPort": 2379}]}]}}


def _service(name="rdzv", namespace="ns", selector=None, ports=({"port": 2379},), headless=False):
    spec = {"selector": {"app": "etcd"} if selector is None else selector, "ports": list(ports)}
    if headless:
        spec["clusterIP"] = "None"
    return {"metadata": {"name": name, "namespace": namespace}, "spec": spec}


NAMES = ["rdzv", "rdzv.ns", "rdzv.ns.svc", "rdzv.ns.svc.cluster.local"]


@pytest.mark.parametrize("service, names", [
    (_service(), NAMES),
    (_service(ports=({"port": 2379, "targetPort": 2379},)), NAMES),
    (_service(ports=({"port": 2379, "targetPort": "client"},)), NAMES),  # a named port of the same number
    (_service(ports=({"port": 80, "targetPort": 2379},)), []),  # kube-proxy would map it; the stand-in cannot
    (_service(ports=({"port": 80, "targetPort": "client"},)), []),
    (_service(ports=({"port": 80, "targetPort": 2379},), headless=True), NAMES),  # DNS answers the pods alone
    (_service(selector={"app": "other"}), []),
    (_service(selector={"app": "etcd", "tier": "rdzv"}), NAMES),
    (_service(selector={}), []),  # no selector: endpoints someone else keeps
    (_service(namespace="elsewhere"), []),
])
def test_a_service_that_selects_the_pod_names_it_where_its_ports_reach_it(service, names):
    assert podargs.service_names(ETCD_POD, [service]) == names
    words = podargs.sandbox_argv(ETCD_POD, "k8s_POD", "e:1", "net", {}, services=[service])
    aliases = [b for a, b in zip(words, words[1:]) if a == "--network-alias"]
    assert aliases == names


def test_command_replaces_the_entrypoint_and_args_alone_replace_only_the_arguments():
    words = argv({}, command=["python3", "-c", "x"], args=["a"])
    assert words[-5:] == ["--entrypoint=python3", "img:1", "-c", "x", "a"]
    words = argv({}, args=["--help"])
    assert words[-2:] == ["img:1", "--help"] and not [w for w in words if w.startswith("--entrypoint")]


def test_environment_and_labels_are_single_words_whatever_they_hold():
    words = argv({}, env={"A": "x y; $(rm -rf /)\n'\"", "B": ""})
    assert "--env=A=x y; $(rm -rf /)\n'\"" in words and "--env=B=" in words and "--label=l=v" in words


@pytest.mark.parametrize("env", [{"A=B": "x"}, {"": "x"}, {"A": "nul\0"}])
def test_a_variable_docker_cannot_carry_is_refused(env):
    with pytest.raises(ConfigError, match="environment variable"):
        argv({}, env=env)


def test_a_word_over_the_kernels_limit_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="exceeds the 131072-byte limit"):
        argv({}, env={"HUGE": "x" * (podargs.MAX_WORD + 1)})


@pytest.mark.parametrize("image", ["", "--privileged"])
def test_an_image_that_is_not_a_reference_is_refused(image):
    with pytest.raises(ConfigError, match="image"):
        argv({"image": image})


def test_security_context_container_over_pod():
    pod = {"spec": {"securityContext": {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 2000,
                                        "supplementalGroups": [3000]}}}
    container = {"securityContext": {"runAsUser": 1001, "readOnlyRootFilesystem": True, "privileged": True,
                                     "allowPrivilegeEscalation": False,
                                     "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]}}}
    words = podargs.security_args(pod, container, "")
    assert words == ["--user", "1001:1000", "--group-add", "2000", "--group-add", "3000", "--read-only",
                     "--privileged", "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
                     "--cap-add", "NET_ADMIN"]


@pytest.mark.parametrize("sec, image_user, refused", [
    ({"runAsNonRoot": True}, "", True), ({"runAsNonRoot": True}, "root", True), ({"runAsNonRoot": True}, "1000", False),
    ({"runAsNonRoot": True, "runAsUser": 0}, "1000", True), ({"runAsGroup": 5}, "", True),
    ({"capabilities": {"add": ["NET_ADMIN; rm"]}}, "", True),
])
def test_security_context_the_kubelet_refuses(sec, image_user, refused):
    if refused:
        with pytest.raises(ConfigError):
            podargs.security_args({}, {"securityContext": sec}, image_user)
    else:
        podargs.security_args({}, {"securityContext": sec}, image_user)


def test_limits_become_cpus_and_memory():
    assert podargs.resource_args({"resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}}}) == \
        ["--cpus", "1.5", "--memory", f"{2**30}b"]
    assert podargs.resource_args({"resources": {"requests": {"cpu": "1"}}}) == []
    with pytest.raises(ConfigError):
        podargs.resource_args({"resources": {"limits": {"memory": "lots"}}})


def test_a_cpu_limit_above_the_hosts_cpus_is_cut_to_them_as_docker_takes_no_more():
    four = {"resources": {"limits": {"cpu": "4"}}}
    assert podargs.resource_args(four, host_cpus=2) == ["--cpus", "2"]
    assert podargs.resource_args(four, host_cpus=8) == ["--cpus", "4"]
    assert podargs.resource_args(four) == ["--cpus", "4"]  # no host count: the limit as written
    assert podargs.resource_args({"resources": {"limits": {"cpu": "500m"}}}, host_cpus=2) == ["--cpus", "0.5"]


def test_mounts_are_csv_records_and_paths_stay_inside_their_volume():
    sources = {"data": podargs.Source("bind", "/host/data"), "cfg": podargs.Source("bind", "/host/cfg", True),
               "shm": podargs.Source("volume", "k8s_shm")}
    mounts = [{"name": "data", "mountPath": "/a,b", "subPath": "x"}, {"name": "cfg", "mountPath": "/etc/cfg"},
              {"name": "shm", "mountPath": "/dev/shm", "readOnly": True}]
    words = podargs.mount_args({"volumeMounts": mounts}, sources)
    assert words == ['--mount=type=bind,source=/host/data/x,"target=/a,b"',
                     "--mount=type=bind,source=/host/cfg,target=/etc/cfg,readonly",
                     "--mount=type=volume,source=k8s_shm,target=/dev/shm,readonly"]
    for bad in ({"name": "data", "mountPath": "/x", "subPath": "../up"}, {"name": "data", "mountPath": "rel"},
                {"name": "absent", "mountPath": "/x"}, {"name": "shm", "mountPath": "/x", "subPath": "y"}):
        with pytest.raises(ConfigError):
            podargs.mount_args({"name": "c", "volumeMounts": [bad]}, sources)


def test_the_termination_message_file_is_bound_at_the_containers_path():
    bound = argv({}, message_file="/pod/t/k8s_main")
    assert "--mount=type=bind,source=/pod/t/k8s_main,target=/dev/termination-log" in bound
    custom = argv({"terminationMessagePath": "/var/run/msg,x"}, message_file="/pod/t/m")
    assert '--mount=type=bind,source=/pod/t/m,"target=/var/run/msg,x"' in custom  # one CSV field, comma and all
    with pytest.raises(ConfigError, match="terminationMessagePath 'msg' is not absolute"):
        argv({"terminationMessagePath": "msg"}, message_file="/pod/t/m")
    assert not any("termination" in w for w in argv({}))
