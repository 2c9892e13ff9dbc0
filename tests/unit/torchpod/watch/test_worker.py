"""torchpod.watch.worker's pure parts: the flight recorder's default group and a stack's own
frame are read as torch 2.13 writes them; the beat's period follows the window; a worker
without its window, folder or ranks starts no thread (the thread itself runs on real gloo
ranks in tests/integration/torchpod/watch/test_worker.py)."""

from __future__ import annotations

import json
import sys
import traceback
import types

import pytest

from torchpod.watch import worker


# torch 2.13's _dump_fr_trace_json for a gloo group (entries trimmed to the fields read)
def entry(seq, op="gloo:all_reduce", sizes=((10,),), group=("0", "default_pg"), p2p=False):
    return {"collective_seq_id": seq, "profiling_name": op, "input_sizes": [list(s) for s in sizes],
            "process_group": list(group), "is_p2p": p2p, "state": "scheduled"}


def test_the_default_groups_highest_collective_is_read_from_the_flight_recorder():
    dump = {"entries": [entry(1), entry(3, "gloo:broadcast", ((4, 2),)), entry(2),
                        entry(9, group=("1", "sub")), entry(8, p2p=True)]}
    assert worker.last_collective(dump) == (3, "gloo:broadcast", "[[4,2]]")
    assert worker.last_collective({}) == (0, "", "")
    assert worker.last_collective({"entries": [None, 5, {"collective_seq_id": True}, entry("7")]}) == (0, "", "")


def test_the_innermost_own_frame_skips_the_interpreters_and_packages_frames(tmp_path):
    frames = traceback.StackSummary.from_list([
        ("/work/train.py", 30, "<module>", None), ("/work/train.py", 12, "step", None),
        ("/venv/lib/python3.11/site-packages/torch/distributed/c10d.py", 900, "all_reduce", None),
        ("/usr/lib/python3.11/threading.py", 320, "wait", None)])
    assert worker.innermost(frames) == "/work/train.py:12 in step"
    assert worker.innermost(frames[2:]).startswith("/usr/lib/python3.11/threading.py:320")
    assert worker.innermost(traceback.StackSummary()) == "no Python frame"


@pytest.mark.parametrize("window, seconds", [(10, 1.0), (30, 3.0), (300, 5.0), (86400, 5.0)])
def test_beats_come_a_tenth_of_the_window_apart_between_one_and_five_seconds(window, seconds):
    assert worker.period(window) == seconds


@pytest.mark.parametrize("env", [{}, {"TORCHPOD_STACKS_DIR": "/x"}, {"TORCHPOD_STALL_WINDOW": "off"},
                                 {"TORCHPOD_STALL_WINDOW": "0", "TORCHPOD_STACKS_DIR": "/x"},
                                 {"TORCHPOD_STALL_WINDOW": "30", "TORCHPOD_STACKS_DIR": "/x"}])
def test_a_worker_without_a_window_a_folder_or_its_ranks_is_not_watched(env):
    assert worker.start(env) is None


class Counted(worker.Watch):
    """A Watch whose torch answers from a script: the sequence numbers its group gives, and
    a dump of the flight recorder that counts its readings."""

    def __init__(self, numbers):
        super().__init__({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"}, 30, "/x")
        self.numbers, self.dumps, self.recorded = iter(numbers), 0, 7

    def sequence(self):
        number = next(self.numbers)
        self.recorded = number or self.recorded
        return number

    def dump(self):
        self.dumps += 1
        return json.dumps({"entries": [entry(self.recorded, op="gloo:broadcast")]}).encode()


def test_a_moving_job_beats_without_reading_the_flight_recorder_and_a_still_one_reads_it_once():
    watch = Counted([1, 2, 3, 4, 4, 4, 4, 5])
    assert [watch.progress() for _ in range(4)] == [(1, "", ""), (2, "", ""), (3, "", ""), (4, "", "")]
    assert watch.dumps == 0
    assert [watch.progress() for _ in range(3)] == [(4, "gloo:broadcast", "[[10]]")] * 3 and watch.dumps == 1
    assert watch.progress() == (5, "", "")


def test_a_group_without_its_number_beats_from_the_dump_every_time():
    watch = Counted([None, None])
    assert [watch.progress() for _ in range(2)] == [(7, "gloo:broadcast", "[[10]]")] * 2 and watch.dumps == 2


@pytest.mark.parametrize("dump", [b'{"entries": [', b"\xff\xfe", b"[1, 2]", b"null", b"[" * 100_000])
def test_a_flight_recorder_dump_out_of_its_form_reads_as_recording_nothing(dump):
    watch = Counted([4, 4])
    watch.dump = lambda: dump
    assert watch.progress() == (4, "", "") and watch.progress() == (4, "", "")
    assert watch.recorder() == {}


def test_a_torch_distributed_still_being_imported_is_not_initialised(monkeypatch):
    partial = types.ModuleType("torch.distributed")  # in sys.modules before its names are defined
    partial.is_available = lambda: True
    monkeypatch.setitem(sys.modules, "torch.distributed", partial)
    watch = Counted([])
    assert watch.initialised() is False
    partial.is_initialized = lambda: True
    assert watch.initialised() is True


@pytest.mark.parametrize("dump", [b'{"entries": 5}', b'{"entries": "abc"}', b'{"entries": {"0": {}}}'])
def test_a_dump_whose_entries_are_not_a_list_records_no_collective(dump):
    watch = Counted([4, 4])
    watch.dump = lambda: dump
    assert watch.progress() == (4, "", "") and watch.progress() == (4, "", "")
    assert worker.straggle.arrivals(watch.recorder(), 0) == ()
