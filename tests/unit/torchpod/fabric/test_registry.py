"""torchpod.fabric.registry: FABRICS, one record per fabric in detection order, the names
presets may use, and a fabric name that is not one refused in one line."""

from __future__ import annotations

import pytest

from torchpod.fabric import FABRICS, by_name, presets
from torchpod.fabric.registry import NAMES


def test_one_record_per_fabric_and_presets_name_only_those():
    assert NAMES == ("slingshot", "efa", "infiniband", "roce") and len(set(NAMES)) == len(FABRICS)
    assert {p.fabric for p in presets.shipped().values()} <= set(NAMES)
    assert [f.name for f in FABRICS if f.needs_plugin] == ["slingshot", "efa"]
    assert by_name(None) is None and by_name("efa").binds == (("/opt/amazon", "/opt/amazon"),)


def test_bad_fabric_name_is_one_line():
    from torchpod.errors import InputError

    with pytest.raises(InputError, match="fabric 'ib' is not known; expected one of slingshot, efa"):
        by_name("ib")
