"""bench/layers.py: its options are refused in one line before anything starts, the
defaults pass, and the folder a run would create is the outermost one missing. What it reads
and computes (bench/layer_figures.py) has tests of its own: test_layer_figures.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from paths import bench_script

TEXT = st.text(st.characters(codec=None), max_size=60)  # all of Unicode, control characters and surrogates


@pytest.fixture(scope="module")
def bench():
    return bench_script("layers")


def _refusal(bench, capsys, argv: list[str]) -> str:
    parser = bench.build_parser()
    with pytest.raises(SystemExit) as info:
        bench.checked(parser, parser.parse_args(argv))
    assert info.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("layers.py: error: ") and err[-1].isprintable(), err
    return err[-1]


@pytest.mark.parametrize("argv, needle", [
    (["--repeats", "0"], "--repeats=0: expected 1 to 20"),
    (["--repeats", "-3"], "--repeats=-3: expected 1 to 20"),
    (["--repeats", "21"], "--repeats=21: expected 1 to 20"),
    (["--image", ""], "--image='': expected an image reference by tag"),
    (["--image", "a b:1"], "--image='a b:1': expected"),
    (["--image", "torchpod/PyTorch:1"], "--image='torchpod/PyTorch:1': expected"),
    (["--image", "torchpod/pytorch:1\n"], "--image='torchpod/pytorch:1\\n': expected"),
    (["--image", "torchpod/pytorch@sha256:" + "0" * 64], "expected an image reference by tag (name:tag)"),
    (["--image", "a" * 300 + ":1"], "expected an image reference by tag"),
    (["--store-dir", "var/tmp"], "--store-dir='var/tmp': expected an existing folder, by absolute path"),
    (["--store-dir", "/no/such/folder"], "--store-dir='/no/such/folder': expected an existing folder"),
    (["--registry-dir", "/tmp\n/x"], "--registry-dir='/tmp\\n/x': expected an existing folder"),
    (["--storage-driver", "btrfs"], "--storage-driver='btrfs': expected overlay or vfs"),
])
def test_a_bad_option_is_one_line_naming_it_before_anything_starts(bench, capsys, argv, needle):
    assert needle in _refusal(bench, capsys, argv)


def test_a_file_is_not_a_folder(bench, capsys, tmp_path):
    (tmp_path / "f").write_text("")
    assert "expected an existing folder" in _refusal(bench, capsys, ["--store-dir", str(tmp_path / "f")])


def test_a_repeats_that_is_not_a_number_is_argparses_one_line(bench, capsys):
    parser = bench.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["--repeats", "three"])
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "layers.py: error: argument --repeats: invalid int value: 'three'"


def test_the_defaults_pass_and_name_the_default_image(bench):
    parser = bench.build_parser()
    args = parser.parse_args([])
    bench.checked(parser, args)
    assert args.image.startswith("torchpod/pytorch:") and args.image.endswith("-x86_64")
    assert args.repeats == 3 and args.storage_driver == "overlay"


@settings(deadline=None, max_examples=200)
@given(TEXT)
def test_any_image_text_is_taken_or_refused_in_one_line(bench, image):
    parser = bench.build_parser()
    args = parser.parse_args(["--registry-dir", "/", "--store-dir", "/"])
    args.image = image
    try:
        bench.checked(parser, args)
    except SystemExit as exc:
        assert exc.code == 2
        return
    assert image.isprintable() and " " not in image and "@" not in image


def test_the_outermost_missing_folder_is_what_a_run_would_create(bench, tmp_path):
    assert bench.outermost_missing(tmp_path / "a" / "b" / "c") == tmp_path / "a"
    assert bench.outermost_missing(tmp_path) is None


def test_the_script_loaded_by_path_reaches_its_figures(bench):
    # bench/ is not on sys.path under pytest: the script appends it, and finds its sibling
    assert bench.figures.__file__.endswith("bench/layer_figures.py")
    assert bench.figures.alternated(0) == ("gzip", "zstd")
