"""torchpod.schedulers.azureml: AzureML's PyTorch distribution (an AZUREML_* marker with
MASTER_ADDR/NODE_RANK/WORLD_SIZE). The checks every detector runs (launcher_cases.DetectorCases)
take this file's table of cases."""

from __future__ import annotations

from torchpod.schedulers import azureml

from launcher_cases import DetectorCases


class TestAzureml(DetectorCases):
    detector = azureml
    claims = [
        {'AZUREML_RUN_ID': 'r', 'MASTER_ADDR': '10.0.0.4'},
        {'AZUREML_RUN_ID': 'r', 'NODE_RANK': '0'},
        {'AZUREML_NODE_COUNT': '2'},
    ]
    not_claims = [
        {},
        {'AZUREML_RUN_ID': 'r'},  # a single-node AzureML job stays standalone
        {'AZUREML_RUN_ID': 'r', 'AZUREML_NODE_COUNT': '1'},
        {'MASTER_ADDR': 'm', 'WORLD_SIZE': '2', 'NODE_RANK': '0'},
    ]
