"""torchpod.fabric.presets: a broken presets file is one line naming the preset and key;
every shipped value cites its source."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("text, needle", [
    ('{"x": {"fabric": "roce", "gpus_per_node": 8, "source": "s", "env": {}, "colour": 1}}', "x: unknown key 'colour'"),
    ('{"x": {"fabric": "ib", "gpus_per_node": 8, "source": "s"}}', "x.fabric='ib'"),
    ('{"x": {"fabric": "roce", "gpus_per_node": 8, "source": ""}}', "x.source is missing"),
    ('{"x": {"fabric": "roce", "gpus_per_node": 8, "source": "s", "env": {"NCCL_IB_TC": {"value": 41}}}}',
     "x.env.NCCL_IB_TC="),
    ("{not json", "cannot be read as JSON"),
    ('{"x": {"fabric": "slingshot", "gpus_per_node": 4, "fabric_settings": "yes"}}', "x.fabric_settings='yes'"),
    ('{"x": {"fabric": "roce", "gpus_per_node": 8, "fabric_settings": true}}', "fabric 'roce' has no settings"),
    ('{"x": {"fabric": "slingshot", "gpus_per_node": 4, "fabric_settings": true, "env": {"NCCL_CROSS_NIC": '
     '{"value": "0"}}}}', "x.env.NCCL_CROSS_NIC is also one of fabric slingshot's settings"),
    ('{"x": {"fabric": "slingshot", "gpus_per_node": 4}}', "x.source is missing"),
])
def test_bad_presets_file_names_the_preset_and_key(tmp_path, text, needle):
    from torchpod.errors import InputError
    from torchpod.fabric import presets

    path = tmp_path / "presets.json"
    path.write_text(text)
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace("[", r"\[")):
        presets.load(path)


def test_every_shipped_preset_value_is_sourced():
    from torchpod.fabric import presets

    for preset in presets.shipped().values():
        assert preset.source and all(source for _, _, source in preset.env), preset.name
