"""`invoke push` to a repository a site names, against a real registry as a site runs one:
Debian's docker-registry (distribution 2.8) serving TLS with a certificate from a CA this
test makes, and basic auth from an htpasswd file (distribution's auth/htpasswd: bcrypt
hashes only). The engine trusts the CA the way a site's nodes do, through
/etc/docker/certs.d/HOST:PORT/ca.crt (read per registry, no restart); the registry listens
on the docker0 bridge address, since the engine treats loopback registries as insecure and
would not check the certificate there. Credentials come only from the Docker config the
user's `docker login` wrote ($DOCKER_CONFIG here).

The images pushed are two of a few bytes (``FROM scratch``, one per platform) tagged as a
definition's local images: the push path is the same for any size, and the 5 GB image's
own push runs in test_registry.py."""

from __future__ import annotations

import base64
import json
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from torchpod.errors import InputError, RuntimeFailure
from torchpod_toolkit.grammars import is_reference
from torchpod_toolkit.imagebuild import registry
from torchpod_toolkit.imagebuild.definitions import ImageDef, load_definitions

from paths import ROOT
from tasks_cli import load_tasks

pytestmark = [pytest.mark.docker, pytest.mark.registry]
USER, PASSWORD = "ml-team", "s3cret-push"
CERTS_D = Path("/etc/docker/certs.d")
INDEX = "application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json"
IMAGE = "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"


@dataclass
class Registry:
    address: str  # HOST:PORT
    ca: Path
    log: Path

    def get(self, path: str, accept: str) -> tuple[dict, str]:
        """GET https://ADDRESS/v2/PATH with the basic auth, checked against the test's CA."""
        request = urllib.request.Request(f"https://{self.address}/v2/{path}", headers={
            "Accept": accept, "Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()})
        with urllib.request.urlopen(request, timeout=30, context=ssl.create_default_context(cafile=str(self.ca))) as r:
            return json.loads(r.read()), r.headers["Docker-Content-Digest"]


def _bridge_address(docker_client) -> str:
    (config,) = docker_client.networks.get("bridge").attrs["IPAM"]["Config"]
    return config["Gateway"]


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _certificates(folder: Path, host: str) -> tuple[Path, Path, Path]:
    """A CA, and the registry's key and certificate for ``host`` (an IP SAN) signed by it."""
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=torchpod test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "registry.key", "-out", "registry.csr",
            "-subj", f"/CN={host}")
    (folder / "san.ext").write_text(f"subjectAltName=IP:{host}\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "registry.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "registry.crt", "-days", "2", "-extfile", "san.ext")
    return folder / "ca.crt", folder / "registry.key", folder / "registry.crt"


@pytest.fixture(scope="module")
def site_registry(require_tool, docker_client, tmp_path_factory) -> Iterator[Registry]:
    import bcrypt

    binary = require_tool("docker-registry", "docker-registry")
    require_tool("openssl", "openssl")
    folder = tmp_path_factory.mktemp("site-registry")
    host = _bridge_address(docker_client)
    address = f"{host}:{_free_port(host)}"
    ca, key, cert = _certificates(folder, host)
    (folder / "htpasswd").write_bytes(USER.encode() + b":" + bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)))
    (folder / "config.yml").write_text(json.dumps({  # YAML is a superset of JSON
        "version": 0.1, "log": {"level": "warn"},
        "storage": {"filesystem": {"rootdirectory": str(folder / "data")}},
        "http": {"addr": address, "tls": {"certificate": str(cert), "key": str(key)}},
        "auth": {"htpasswd": {"realm": "torchpod-test", "path": str(folder / "htpasswd")}},
    }))
    trust = CERTS_D / address
    trust.mkdir(parents=True, exist_ok=True)
    shutil.copy(ca, trust / "ca.crt")
    log = folder / "registry.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([binary, "serve", str(folder / "config.yml")], stdout=out, stderr=subprocess.STDOUT)
    try:
        context = ssl.create_default_context(cafile=str(ca))
        for _ in range(100):
            try:
                urllib.request.urlopen(f"https://{address}/v2/", timeout=1, context=context)
            except urllib.error.HTTPError as exc:  # 401: up, and asking for credentials
                if exc.code == 401:
                    break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
        if proc.poll() is not None:
            pytest.fail(f"docker-registry exited ({proc.returncode}); its log:\n{log.read_text()[-2000:]}")
        yield Registry(address, ca, log)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(trust, ignore_errors=True)


@pytest.fixture(scope="module")
def tiny(docker_client, tmp_path_factory) -> Iterator[ImageDef]:
    """A definition (the default's content under another name) whose local images are two
    of a few bytes, one per platform, each recorded as its arch."""
    folder = tmp_path_factory.mktemp("tiny")
    shutil.copy(ROOT / "images" / "pytorch.yaml", folder / "tinypush.yaml")
    defn = load_definitions(folder)["tinypush"]
    context = folder / "context"
    context.mkdir()
    (context / "Dockerfile").write_text("FROM scratch\nCOPY arch /arch\n")
    for arch in defn.arches:
        (context / "arch").write_text(arch.name)
        subprocess.run(["docker", "build", "-q", "--platform", arch.docker, "-t", defn.ref(arch), str(context)],
                       check=True, capture_output=True)
    yield defn
    for arch in defn.arches:
        docker_client.images.remove(defn.ref(arch), force=True)


@pytest.fixture
def logged_in(site_registry, tmp_path, monkeypatch) -> Path:
    """A Docker config that `docker login` wrote for the registry, as the user's own."""
    config = tmp_path / "docker-config"
    config.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    subprocess.run(["docker", "login", site_registry.address, "-u", USER, "--password-stdin"], input=PASSWORD,
                   text=True, check=True, capture_output=True)
    return config


def test_a_nested_path_gets_every_arch_and_a_list_of_exactly_them(site_registry, tiny, logged_in):
    where = f"{site_registry.address}/team/ml/vision/pytorch:exp-1"
    result = registry.push(tiny, where)
    assert result.repository == f"{site_registry.address}/team/ml/vision/pytorch" and result.skipped == []
    assert [(a, ref) for a, ref, _ in result.images] == [(a.name, f"{where}-{a.name}") for a in tiny.arches]
    index, digest = site_registry.get("team/ml/vision/pytorch/manifests/exp-1", INDEX)
    assert digest == result.manifest_digest and result.is_list
    listed = {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]}
    assert listed == {a.docker.split("/")[1]: d for (name, _, d) in result.images for a in [tiny.arch(name)]}
    for _, _, pushed in result.images:  # each per-arch tag holds what the list names
        assert pushed in listed.values()


def test_one_arch_is_pushed_as_the_image_itself_and_the_others_are_named(site_registry, tiny, logged_in):
    result = registry.push(tiny, f"{site_registry.address}/team/solo", arch="aarch64")
    (only,) = result.images
    manifest, digest = site_registry.get(f"team/solo/manifests/{tiny.version_tag}", f"{IMAGE}, {INDEX}")
    assert "manifests" not in manifest and "config" in manifest  # an image, not a list of one
    assert not result.is_list and digest == result.manifest_digest == only[2]


def test_the_task_prints_each_digest_as_image_takes_it(site_registry, tiny, logged_in, monkeypatch, capsys):
    from invoke import Context

    tasks = load_tasks("tasks_push_under_test")
    monkeypatch.setattr(tasks, "_defs", lambda: {tiny.name: tiny})  # the task body, on the tiny images
    where = f"{site_registry.address}/team/cli/pytorch"
    tasks.push.body(Context(), registry=where, image="tinypush")
    out, err = capsys.readouterr()
    use = [line for line in out.splitlines() if line.startswith("use: --image ")]
    assert len(use) == 1 and use[0].startswith(f"use: --image {where}@sha256:"), out
    assert is_reference(use[0].removeprefix("use: --image ")), use
    digests = [line.split()[1] for line in out.splitlines() if line.split()[:1] in (["x86_64"], ["aarch64"])]
    assert len(digests) == 2 and all(d.startswith(f"{where}@sha256:") for d in digests), out
    assert err == "", err  # both arches built: nothing left out


def test_a_declared_arch_not_built_is_said_and_left_out(site_registry, tiny, logged_in, docker_client, monkeypatch,
                                                         capsys):
    from invoke import Context

    arm = tiny.arch("aarch64")
    docker_client.images.get(tiny.ref(arm)).tag("torchpod/tinypush-kept", "arm")
    docker_client.images.remove(tiny.ref(arm))
    try:
        tasks = load_tasks("tasks_push_under_test_2")
        monkeypatch.setattr(tasks, "_defs", lambda: {tiny.name: tiny})
        tasks.push.body(Context(), registry=f"{site_registry.address}/team/half", image="tinypush")
        out, err = capsys.readouterr()
        assert err.startswith("torchpod: not pushed: aarch64 (no local image") and err.count("\n") == 1, err
        assert "aarch64" not in out and "the image above" in out, out
    finally:
        docker_client.images.get("torchpod/tinypush-kept:arm").tag(tiny.ref(arm))
        docker_client.images.remove("torchpod/tinypush-kept:arm")


def test_a_refused_login_is_one_line_naming_docker_login(site_registry, tiny, tmp_path, monkeypatch):
    config = tmp_path / "wrong"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"auths": {site_registry.address: {
        "auth": base64.b64encode(f"{USER}:not-the-password".encode()).decode()}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    with pytest.raises(RuntimeFailure) as err:
        registry.push(tiny, f"{site_registry.address}/team/denied", arch="x86_64")
    message = str(err.value)
    assert "\n" not in message and f"docker login {site_registry.address}" in message, message


def test_a_registry_nobody_serves_is_one_line(tiny, docker_client):
    host = _bridge_address(docker_client)
    with pytest.raises(RuntimeFailure) as err:
        registry.push(tiny, f"{host}:{_free_port(host)}/team/nowhere", arch="x86_64")
    assert "\n" not in str(err.value) and "push of " in str(err.value)


def test_a_name_without_a_registry_never_goes_to_docker_hub(tiny):
    with pytest.raises(InputError, match="names no registry"):
        registry.push(tiny, "myorg/pytorch")
