"""torchpod.schedulers.markers: the catalogue of multi-node markers.

Walks the catalogue: each marker alone, with values a platform could set and values no
platform would, gives a detection or a one-line refusal, never a one-node plan; a
hypothesis property does the same for any set of markers with any values. Runs `torchpod
plan` in-process with the machine isolated (fixed hostname, empty sysfs, no helper tools).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import torchpod.cli as cli
from torchpod.schedulers import SCHEDULERS, markers, runai

CATALOGUE = markers.catalogue(SCHEDULERS)
_EMPTY = Path(tempfile.mkdtemp(prefix="torchpod-markers-"))
ISOLATED = {"TORCHPOD_HOSTNAME": "n1", "TORCHPOD_SYSFS_ROOT": str(_EMPTY), "CUDA_VISIBLE_DEVICES": ""}


def plan(env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.dict(os.environ, {"PATH": str(_EMPTY)}):
        code = cli.main(["plan"], {**env, **ISOLATED})
    return code, out.getvalue(), err.getvalue()


def assert_never_one_node_alone(env: dict[str, str]) -> str:
    """A detection by a platform, or one line; never standalone. Returns the outcome."""
    code, out, err = plan(env)
    if code == 0:
        scheduler = json.loads(out)["scheduler"]
        assert scheduler != "standalone", (env, out)
        return scheduler
    assert code == 2 and out == "", (code, out, err)
    (line,) = err.strip().splitlines()
    assert line.startswith("torchpod: error: ") and "expected" in line, line
    return "refused"


def test_the_catalogue_is_every_detectors_markers_and_the_unplanned_ones():
    names = [m.name for m in CATALOGUE]
    assert len(names) == len(set(names)), "a marker is listed twice"
    for detector in SCHEDULERS:
        for name in markers.multi_node_markers(detector):
            assert markers.Marker(name, detector.NAME, detector.NAME) in CATALOGUE
    for m in markers.UNPLANNED:
        assert m.detector is None and m.source, m  # each unplanned platform cites its documentation
    assert len(CATALOGUE) >= 20


@pytest.mark.parametrize("value", ["0", "2", "/nonexistent/hosts", "n1,n2"])
@pytest.mark.parametrize("marker", CATALOGUE, ids=[m.name for m in CATALOGUE])
def test_each_marker_alone_is_a_detection_or_one_line(marker, value):
    assert_never_one_node_alone({marker.name: value})


@pytest.mark.parametrize("marker", markers.UNPLANNED, ids=[m.name for m in markers.UNPLANNED])
def test_an_unplanned_platform_is_named_with_what_torchpod_needs(marker):
    code, _, err = plan({marker.name: "4"})
    assert code == 2
    assert f"{marker.name}='4' ({marker.platform})" in err
    assert "TORCHPOD_SCHEDULER=env" in err and "--rdzv-endpoint" in err


def test_an_unplanned_marker_with_the_job_described_explicitly_plans():
    env = {"PE_HOSTFILE": "/tmp/pe", "TORCHPOD_SCHEDULER": "env", "MASTER_ADDR": "n0", "WORLD_SIZE": "2",
           "RANK": "1"}
    code, out, err = plan(env)
    assert code == 0, err
    assert json.loads(out)["nnodes"] == "2"


def test_standalone_asked_for_stays_one_node_even_with_a_marker():
    code, out, _ = plan({"HOROVOD_RANK": "0", "TORCHPOD_SCHEDULER": "standalone"})
    assert code == 0 and json.loads(out)["scheduler"] == "standalone"


def test_a_single_pod_runai_workload_is_one_node():
    # RUNAI_* are set in every Run:ai workload, a single pod too: they name the platform only
    assert markers.multi_node_markers(runai) == ()
    code, out, _ = plan({"RUNAI_PROJECT": "team-a", "RUNAI_JOB_NAME": "j"})
    assert code == 0 and json.loads(out)["scheduler"] == "standalone"


def test_nothing_set_is_one_node():
    code, out, _ = plan({})
    assert code == 0 and json.loads(out)["scheduler"] == "standalone"


def test_the_refusal_lists_at_most_three_markers_and_counts_the_rest():
    env = {m.name: "1" for m in markers.UNPLANNED[:5]}
    line = markers.refusal(markers.set_markers(env, markers.UNPLANNED), env)
    assert line.count("=") == 3 + line.count("TORCHPOD_SCHEDULER=")  # three shown
    assert "and 2 more are set" in line and "\n" not in line


@settings(deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from([m.name for m in CATALOGUE]),
                       st.one_of(st.text(min_size=1, max_size=12), st.sampled_from(["0", "1", "2", "n1"])),
                       min_size=1, max_size=4))
def test_any_set_of_markers_with_any_values_is_never_one_node_alone(env):
    if not any(v.strip() for v in env.values()):
        return  # all blank: no marker is set
    assert_never_one_node_alone(env)


@pytest.mark.parametrize("env", [{"AZUREML_RUN_ID": "r1"}, {"AZUREML_RUN_ID": "r1", "AZUREML_NODE_COUNT": "1"}])
def test_a_single_node_azureml_job_is_one_node(env):
    # AzureML sets its run id in every job; one node is a legitimate job there
    code, out, err = plan(env)
    assert code == 0 and json.loads(out)["scheduler"] == "standalone", err


def test_an_azureml_job_of_two_nodes_is_never_one_node():
    assert assert_never_one_node_alone({"AZUREML_RUN_ID": "r1", "AZUREML_NODE_COUNT": "2"}) != "standalone"
