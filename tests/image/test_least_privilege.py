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

import image_runs

pytestmark = [pytest.mark.docker, pytest.mark.image]


def test_any_user_trains_plans_and_checks_on_a_read_only_root(built, docker_client, image_test_label):
    # Under QEMU each run costs minutes of emulated imports: an emulated arch runs the group-0
    # user, and the own-group user (which differs only in the group) runs natively.
    for user in image_runs.USERS if built.native else image_runs.USERS[:1]:
        _check_user(built, docker_client, image_test_label, user)


def _check_user(built, docker_client, image_test_label, user: str) -> None:
    text = image_runs.run_as(built, docker_client, image_test_label, user)
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
