"""torchpod.fabric.slingshot: the settings CSCS, NERSC and Isambard-AI use with aws-ofi-nccl
on Slingshot, written once in the record, and the hpe-slingshot-gh200 preset taking them
from there."""

from __future__ import annotations

import json
from pathlib import Path

from torchpod.fabric import by_name, presets, slingshot


def test_slingshot_settings_are_written_once_and_the_preset_takes_them_from_the_record():
    shipped = json.loads((Path(presets.__file__).with_name("presets.json")).read_text())
    written = json.dumps(shipped)
    assert not [s.var for s in slingshot.SETTINGS if s.var in written], "a Slingshot setting is written twice"
    preset = presets.shipped()["hpe-slingshot-gh200"]
    record = by_name("slingshot")
    assert [(v, x) for v, x, _ in preset.env][:len(record.plugin_env)] == [(s.var, s.value) for s in record.plugin_env]
    assert preset.source == slingshot.SETTINGS_SOURCE
