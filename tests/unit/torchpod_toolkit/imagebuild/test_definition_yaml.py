"""torchpod_toolkit.imagebuild.definition_yaml: one definition file read, bounded, and its keys
checked against a schema, called directly: a mapping, or one line naming the file (and its
line); any text and the files that cost a reader a hang (a FIFO, a device) are one or the
other."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod_toolkit.imagebuild import definition_yaml

SCHEMA = {"name": str, "ci": bool, "torch": {"version": str, "extra": list}}


def _read(tmp_path: Path, text: str | bytes) -> dict:
    path = tmp_path / "img.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return definition_yaml.read_yaml(path, SCHEMA)


def test_a_file_is_its_mapping_when_every_key_is_the_schemas(tmp_path):
    assert _read(tmp_path, "name: a\nci: true\ntorch: {version: '2.13.0', extra: [x]}\n") == \
        {"name": "a", "ci": True, "torch": {"version": "2.13.0", "extra": ["x"]}}


@pytest.mark.parametrize("text, says", [
    ("nme: a\n", "unknown key 'nme'; expected one of name, ci, torch"),
    ("torch: {versio: x}\n", "unknown key 'torch.versio'; expected one of torch.version, torch.extra"),
    ("torch: 2\n", "'torch' must be a mapping, got 2"),
    ("name: 3.11\n", "'name' must be a str, got 3.11 (quote version numbers"),
    ("ci: yes please\n", "'ci' must be a bool, got 'yes please'"),
    ("- a\n", "expected a mapping of keys at the top level, got list"),
    ("a: &x 1\nb: *x\n", "line 1: YAML anchors and aliases"),
    ("<<: {name: a}\n", "line 1: merge keys (<<) are not allowed"),
    ("name: a\nname: b\n", "line 2: key 'name' appears twice"),
    ("1: a\n", "line 1: key 1 is not a string"),
    ("name: [\n", "malformed YAML"),
    ("d: 2024-13-45\n", "line 1: '2024-13-45' cannot be read"),
    ("a: " + "[" * 40 + "]" * 40 + "\n", f"nested deeper than {definition_yaml.MAX_DEPTH} levels"),
])
def test_what_a_definition_never_holds_is_one_line_naming_the_file(tmp_path, text, says):
    with pytest.raises(InputError) as info:
        _read(tmp_path, text)
    assert str(info.value).startswith(str(tmp_path / "img.yaml")) and says in str(info.value)
    assert str(info.value).isprintable()


def test_more_nodes_than_a_definition_holds_are_refused(tmp_path):
    text = "".join(f"k{i}: v\n" for i in range(definition_yaml.MAX_NODES))
    with pytest.raises(InputError, match=f"more than {definition_yaml.MAX_NODES} keys and values"):
        _read(tmp_path, text)


def test_the_reader_takes_only_a_small_regular_utf8_file(tmp_path):
    path = tmp_path / "img.yaml"
    path.write_bytes(b"#" * (definition_yaml.MAX_FILE_BYTES + 1))
    with pytest.raises(InputError, match="over the 1 MiB cap"):
        definition_yaml.read_text(path)
    path.write_bytes(b"name: \xff\n")
    with pytest.raises(InputError, match="img.yaml"):
        definition_yaml.read_text(path)
    path.unlink()
    os.mkfifo(path)  # a FIFO would block an open() for reading forever
    with pytest.raises(InputError, match="is a FIFO"):
        definition_yaml.read_text(path)
    path.unlink()
    path.symlink_to("/dev/zero")
    with pytest.raises(InputError, match="is a character device"):
        definition_yaml.read_text(path, what="a lock")


def test_check_keys_walks_nested_mappings():
    definition_yaml.check_keys(Path("x.yaml"), {"torch": {"version": "1"}}, SCHEMA, "")
    with pytest.raises(InputError, match="x.yaml: 'torch.extra' must be a list"):
        definition_yaml.check_keys(Path("x.yaml"), {"torch": {"extra": "a"}}, SCHEMA, "")


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec=None), max_size=120) | st.binary(max_size=120))
def test_any_file_is_a_mapping_of_known_keys_or_one_line(tmp_path_factory, data):
    tmp_path = tmp_path_factory.mktemp("any")
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    try:
        got = _read(tmp_path, data)
    except InputError as exc:
        assert str(exc).startswith(str(tmp_path / "img.yaml")) and str(exc).isprintable()
        return
    assert isinstance(got, dict) and set(got) <= set(SCHEMA)
