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


GOOD_FLOOR = {"busbw_gbps": 185, "bytes": 8589934592, "nodes": 2, "algo": "Ring", "basis": "b", "source": "s"}


@pytest.mark.parametrize("change", [
    {"busbw_gbps": 0}, {"busbw_gbps": -1}, {"busbw_gbps": "185"}, {"busbw_gbps": True}, {"busbw_gbps": 1e999},
    {"bytes": 2}, {"bytes": 8.5}, {"bytes": "8G"}, {"nodes": 1}, {"algo": "Tree"}, {"algo": "ring"},
    {"basis": " "}, {"source": None}, {"colour": 1},
])
def test_a_bad_preflight_floor_is_one_error_naming_it(tmp_path, change):
    import json

    from torchpod.errors import InputError
    from torchpod.fabric import presets

    floor = {**GOOD_FLOOR, **change}
    text = json.dumps({"x": {"fabric": "roce", "gpus_per_node": 8, "source": "s", "preflight_floor": floor}})
    path = tmp_path / "presets.json"
    path.write_text(text.replace("Infinity", "1e999"))
    with pytest.raises(InputError, match=r"x\.preflight_floor=.*; expected \{"):
        presets.load(path)


def test_every_shape_preset_has_a_cited_floor_preflight_can_reach():
    from torchpod.fabric import presets

    for preset in presets.shipped().values():
        floor = preset.floor
        assert floor is not None and floor.source and floor.basis, preset.name
        assert floor.bytes % 4 == 0 and floor.nodes == 2 and floor.algo in (presets.RING, presets.NCCLS_CHOICE)
