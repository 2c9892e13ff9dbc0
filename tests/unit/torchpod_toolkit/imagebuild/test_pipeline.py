"""torchpod_toolkit.imagebuild.pipeline, checked without an engine: the phase table; the build is a
one-way chain of stages, each a function of the one before it."""

from __future__ import annotations

import dataclasses
import inspect
import re
import typing

from torchpod.arch import ARCHES
from torchpod_toolkit import timing
from torchpod_toolkit.imagebuild import pipeline
from torchpod_toolkit.imagebuild.definitions import load_definitions

from paths import ROOT

DEFN = load_definitions(ROOT / "images")["pytorch"]
ARM, X86 = ARCHES["aarch64"], ARCHES["x86_64"]


def test_the_phase_table_has_a_column_per_phase_and_a_row_per_build():
    result = pipeline.BuildResult(DEFN, X86, "t", 1, {}, 12.5, {"wheels": 1.0, "payload": 9.25})
    lines = pipeline.phase_table([result, pipeline.BuildResult(DEFN, ARM, "t", 1, {}, 3.0, {})]).splitlines()
    assert lines[0].split() == ["image", "arch", *timing.PHASES, "total"]
    assert lines[2].split() == ["pytorch", "x86_64", "1.0", "0.0", "0.0", "9.2", "0.0", "0.0", "0.0", "0.0", "12.5"]
    assert lines[3].split()[:2] == ["pytorch", "aarch64"] and lines[3].split()[-1] == "3.0"


# the stages in the order a build runs them
STAGES = (pipeline.read_sources, pipeline.connect, pipeline.prepare, pipeline.build_payload, pipeline.build_layers,
          pipeline.probe_staging, pipeline.label, pipeline.finish)


def test_each_stage_takes_the_result_of_the_one_before_and_keeps_it():
    hints = [typing.get_type_hints(stage) for stage in STAGES]
    assert next(iter(hints[0].values())) is pipeline.Request  # the definition enters here, once
    for before, after in zip(hints, hints[1:]):
        taken = next(iter(after.values()))  # the first parameter
        assert taken is before["return"], (before, after)
        assert dataclasses.is_dataclass(taken) and taken.__dataclass_params__.frozen
        # a stage's result keeps the one before it as its first field: the chain runs one way
        first = dataclasses.fields(taken)[0]
        assert typing.get_type_hints(taken)[first.name] in (pipeline.Request, *(h["return"] for h in hints)), taken
    assert hints[-1]["return"] is pipeline.BuildResult
    assert all(h["return"] is not pipeline.Request for h in hints)  # no stage goes back to the definition


def test_the_final_tag_is_the_definitions_unless_the_request_names_another():
    assert pipeline.Request(DEFN, X86, ROOT).final == DEFN.ref(X86)
    assert pipeline.Request(DEFN, X86, ROOT, tag="torchpod-test/agree:x86_64").final == "torchpod-test/agree:x86_64"


# the results a stage keeps, by the name it keeps them under
KEPT = ("request", "sources", "connected", "prepared", "payload", "layers", "probed")


def test_no_stage_reaches_past_the_result_it_takes_and_the_ones_that_names():
    """A chain of two kept results (``built.prepared.connected``) couples a stage to the whole
    pipeline's shape; what a later stage needs is exposed one result back instead."""
    chain = re.compile(rf"\.(?:{'|'.join(KEPT)})\.(?:{'|'.join(KEPT)})\b")
    for function in (*STAGES, pipeline._command, pipeline._remove_scratch):
        source = inspect.getsource(function)
        assert not chain.search(source), (function.__name__, chain.findall(source))


def test_every_result_after_connect_gives_the_request_the_engine_and_the_builder():
    client, builder = object(), object()
    request = pipeline.Request(DEFN, X86, ROOT)
    connected = pipeline.Connected(pipeline.Sources(request, "plugin.tar.gz", None, None), client, builder)
    prepared = pipeline.Prepared(connected, "inputs", "base", "build-base", ("id0", "id1"), wheels_staged=False)
    built = pipeline.PayloadBuilt(prepared, "payload", 1.0, 0, "staging", None)
    layers = pipeline.LayersBuilt(built, 2.0)
    probed = pipeline.Probed(layers, {"torch": "2"})
    labelled = pipeline.Labelled(probed, {})
    for result in (connected, prepared, built, layers, probed, labelled):
        assert (result.request, result.client, result.builder) == (request, client, builder), result
    assert prepared.netplugin_tarball == connected.netplugin_tarball == "plugin.tar.gz"
    assert (built.inputs, built.base_id) == ("inputs", "id0")
    assert probed.payload is labelled.payload is built and labelled.layers is layers
