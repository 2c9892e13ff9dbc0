"""manifests/kinds/runai.py: a PyTorchJob with Run:ai's scheduler and project, and the CLI line beside it."""

from __future__ import annotations

import pytest

from torchpod.errors import InputError
from torchpod_toolkit.manifests import jobs
from torchpod_toolkit.manifests.kinds import runai

from manifest_cases import job_file, job_object


def test_it_renders_the_pytorchjob_labelled_with_its_project():
    assert jobs.kind("runai") is runai.KIND and runai.KIND.marker == "RUNAI_JOB_NAME"
    job = job_object("runai", 2, project="team-b")
    assert job["metadata"]["labels"] == {"project": "team-b"}


@pytest.mark.parametrize("fields", [{"service_account": "trainer"}, {"node_selector": ("a=b",)}])
def test_the_cli_line_has_no_pod_fields(fields):
    with pytest.raises(InputError, match="a runai job has no place for it"):
        job_file("runai", 2, **fields)
