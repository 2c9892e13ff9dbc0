"""torchpod.options: the user's own torchrun options, from the command line or torchrun's
PET_<OPTION> spelling, parsed once into values that remember their source; any text in
them ends as a value or one line naming the flag or variable."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.errors import InputError
from torchpod.options import (
    Given,
    parse_conf,
    parse_nproc,
    parse_signals,
    read_user_options,
    split_master_addr,
)
from torchpod.torchrun_flags import split_command_line
from torchpod.values import Endpoint, NodeCount


def options(*argv, env=None):
    return read_user_options(env or {}, split_command_line([*argv, "train.py"]))


def test_the_flag_beats_the_pet_variable_and_each_value_names_its_source():
    got = options("--nnodes=2:3", env={"PET_NNODES": "4", "PET_MAX_RESTARTS": " 3 ", "PET_RDZV_BACKEND": " "})
    assert got.nnodes == Given(NodeCount(2, 3), "--nnodes") and got.nnodes.on_command_line
    assert got.max_restarts == Given(3, "PET_MAX_RESTARTS") and not got.max_restarts.on_command_line
    assert got.rdzv_backend is None  # an empty variable is unset, as torchrun's env defaults read it
    assert options("--nproc_per_node", "gpu").nproc_per_node == Given("gpu", "--nproc-per-node")


def test_an_empty_flag_value_is_refused_by_its_name():
    with pytest.raises(InputError, match=r"^--rdzv-conf is empty; expected a value, e.g. --rdzv-conf=VALUE$"):
        options("--rdzv-conf=")


def test_rdzv_id_none_is_remembered_as_torchruns_default_not_an_id():
    got = options(env={"PET_RDZV_ID": "None"})
    assert got.rdzv_id is None and got.rdzv_id_none == "PET_RDZV_ID"
    assert options("--rdzv-id", "job-7").rdzv_id == Given("job-7", "--rdzv-id")


@pytest.mark.parametrize("value, endpoint", [("node0", Endpoint("node0")), ("node0:1234", Endpoint("node0", 1234)),
                                             ("[fe80::1]:29500", Endpoint("fe80::1", 29500)),
                                             ("[fe80::1]", Endpoint("fe80::1")), ("fe80::1", Endpoint("fe80::1"))])
def test_a_master_address_splits_off_its_port(value, endpoint):
    assert split_master_addr("MASTER_ADDR", value) == endpoint


@pytest.mark.parametrize("value, needle", [("[fe80::1", "is not an address"), ("node0:x", "is not a valid number"),
                                           ("node0:70000", "is not a TCP port"), ("no de", "has host 'no de'")])
def test_a_bad_master_address_is_one_line_naming_it(value, needle):
    with pytest.raises(InputError, match="^--master-addr") as info:
        options("--master-addr", value)
    assert needle in str(info.value)


def test_rendezvous_conf_signals_and_nproc_parse_to_their_forms():
    assert parse_conf("C", "join_timeout=900, is_host = true,,join_timeout=60") == (
        ("join_timeout", "60"), ("is_host", "true"))
    assert parse_signals("S", "SIGTERM, SIGUSR1") == ("SIGTERM", "SIGUSR1")
    assert parse_nproc("N", "gpu") == "gpu" and parse_nproc("N", "+4") == "4"
    with pytest.raises(InputError, match="C='is_host' is not a rendezvous config"):
        parse_conf("C", "is_host")
    with pytest.raises(InputError, match="names no known signal \\('SIGNOPE'\\)"):
        parse_signals("S", "SIGTERM,SIGNOPE")
    with pytest.raises(InputError, match="N='0' is not a valid number; expected an integer >= 1; or one of auto"):
        parse_nproc("N", "0")


VARIABLES = ("PET_NNODES", "PET_NODE_RANK", "PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_CONF",
             "PET_MAX_RESTARTS", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_LOCAL_ADDR", "PET_NPROC_PER_NODE",
             "PET_SIGNALS_TO_HANDLE")


@settings(deadline=None, max_examples=300)
@given(st.sampled_from(VARIABLES), st.text())
def test_any_text_in_a_pet_variable_is_a_value_or_one_line_naming_it(name, text):
    try:
        got = read_user_options({name: text}, split_command_line(["train.py"]))
    except InputError as exc:
        message = str(exc)
        assert message.startswith(name) and "\n" not in message  # values are shown by repr()
    else:
        given_ = getattr(got, name.removeprefix("PET_").lower())
        assert (given_ is None) == (text.strip() == "") and (given_ is None or given_.source == name)


@pytest.mark.parametrize("argv, env, source", [
    ((), {"PET_RDZV_CONF": "join_timeout=30\nis_host=true"}, "PET_RDZV_CONF"),
    (("--rdzv-conf", "join_timeout=30,\x1b[2Jis_host=true"), {}, "--rdzv-conf"),
    ((), {"PET_RDZV_ID": "job\r42"}, "PET_RDZV_ID"),
    (("--rdzv-id=job\u202e42",), {}, "--rdzv-id"),  # a format character: turns the text around
    ((), {"PET_RDZV_CONF": "timeout=1\u2028x=y"}, "PET_RDZV_CONF"),  # a line separator
])
def test_a_control_character_in_any_option_is_refused_in_one_line(argv, env, source):
    with pytest.raises(InputError) as err:
        options(*argv, env=env)
    message = str(err.value)
    assert message.startswith(f"{source}=") and "control character" in message and message.isprintable()


def test_a_conf_on_one_line_still_reads_and_blanks_around_it_are_dropped():
    got = options(env={"PET_RDZV_CONF": "join_timeout=30,is_host=true\n", "PET_RDZV_ID": " job-42 "})
    assert got.rdzv_conf.value == (("join_timeout", "30"), ("is_host", "true")) and got.rdzv_id.value == "job-42"


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=20).filter(lambda t: not t.strip().isprintable()))
def test_any_conf_or_id_with_a_control_character_inside_is_refused(value):
    for name in ("PET_RDZV_CONF", "PET_RDZV_ID"):
        with pytest.raises(InputError, match=f"^{name}="):
            options(env={name: value})
