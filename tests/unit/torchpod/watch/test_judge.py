"""torchpod.watch.judge: beats fed on the judging rank's clock give a suspicion only for a
hang (a rank behind the others' collective for a window, a silent rank, a collective the
ranks disagree on), never for a straggler that catches up, a long step all ranks share or
a long first step; what every rank says is parsed as hostile input; the verdict's words."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchpod.watch import judge
from torchpod.watch.judge import Beat, Judge, Report

W = 30  # the stall window of these tests
JOB = "run-1.0"
AR, SIZES = "gloo:all_reduce", "[[10]]"


def beats(seqs: dict[int, int], n: int, ops: dict[int, tuple[str, str]] | None = None) -> dict[int, Beat]:
    ops = ops or {}
    return {r: Beat(r, f"node-{r}", n, s, *ops.get(r, (AR, SIZES)), job=JOB) for r, s in seqs.items()}


def run(judging: Judge, timeline: list[tuple[float, dict[int, int]]], ops=None):
    """Feed beats every second from each point of ``timeline`` to the next; the first suspicion."""
    n = 0
    for (start, seqs), (end, _) in zip(timeline, timeline[1:] + [(timeline[-1][0] + 1, {})]):
        t = start
        while t < end:
            n += 1
            found = judging.feed(t, beats(seqs, n, ops))
            if found is not None:
                return t, found
            t += 1
    return None


def test_a_rank_behind_the_others_collective_for_a_window_is_named():
    judging = Judge(world=4, window_s=W, started=0.0)
    at, found = run(judging, [(0, {0: 3, 1: 3, 2: 3, 3: 3}), (10, {0: 4, 1: 4, 2: 3, 3: 4}), (100, {})])
    assert at == 10 + W
    assert [(c.rank, c.why, c.seq) for c in found.culprits] == [(2, "behind", 3)]
    assert (found.seq, found.op, found.waiting) == (4, AR, (0, 1, 3))


def test_a_straggler_that_catches_up_within_the_window_is_never_named():
    judging = Judge(world=4, window_s=W, started=0.0)
    timeline = []
    for step in range(20):  # rank 2 is 20 s late at every collective: slow, not hung
        timeline += [(step * 40, {0: step + 1, 1: step + 1, 2: step, 3: step + 1}),
                     (step * 40 + 20, {r: step + 1 for r in range(4)})]
    assert run(judging, timeline) is None


def test_a_long_step_all_ranks_share_and_a_long_first_step_name_nobody():
    judging = Judge(world=4, window_s=W, started=0.0)
    # no collective for 100 s (loading data), then one long step of 200 s between collectives
    assert run(judging, [(0, {r: 0 for r in range(4)}), (100, {r: 1 for r in range(4)}),
                         (300, {r: 2 for r in range(4)})]) is None


def test_a_rank_whose_beat_stops_is_silent_after_a_window_and_the_grace_whatever_its_collective():
    judging = Judge(world=3, window_s=W, started=0.0)
    n = 0
    for t in range(0, 200):
        n += 1
        seqs = {0: 5, 1: 5} if t >= 10 else {0: 5, 1: 5, 2: 5}  # rank 2 stops beating at 10 s
        found = judging.feed(float(t), beats(seqs, n))
        if found is not None:
            break
    assert t == 10 - 1 + W + judge.SILENT_GRACE_S  # its last beat at 9 s
    assert [(c.rank, c.why, c.host) for c in found.culprits] == [(2, "silent", "node-2")]


def test_a_rank_that_never_beats_is_silent_once_the_judge_has_watched_a_window_and_the_grace():
    judging = Judge(world=2, window_s=W, started=0.0)
    quiet = W + judge.SILENT_GRACE_S
    assert judging.feed(quiet - 1, beats({0: 0}, 1)) is None
    found = judging.feed(quiet, beats({0: 0}, 2))
    assert [(c.rank, c.why, c.host, c.seq) for c in found.culprits] == [(1, "silent", "", 0)]


def test_a_rank_without_a_beat_while_the_others_sit_in_a_collective_a_window_is_silent_and_said_so():
    judging = Judge(world=3, window_s=W, started=0.0)
    assert run(judging, [(0, {0: 7, 1: 7}), (W - 1, {})]) is None  # a window not yet over
    at, found = run(judging, [(0, {0: 7, 1: 7}), (100, {})])
    assert at == W and [(c.rank, c.why, c.beat) for c in found.culprits] == [(2, "silent", False)]
    assert judge.lines(found, {}, 3)[:2] == [
        f"torchpod: hang: no rank went past collective 7 ({AR}, sizes {SIZES}) for {W} s; 2 of 3 ranks wait in it "
        "(ranks 0,1)",
        "torchpod: hang: culprit rank 2 on an unknown host: did not answer: no beat came from it (frozen, or cut "
        "off from the store)"]
    assert judge.parse_suspicion(found.encode()) == (found, "")


def test_a_rank_behind_whose_own_beat_stopped_too_is_said_frozen_at_the_window_before_its_grace():
    judging = Judge(world=3, window_s=W, started=0.0)
    at, found = run(judging, [(0, {0: 3, 1: 3, 2: 3}), (10, {0: 4, 1: 4}), (100, {})])  # rank 2 paused at 10
    assert at == 10 + W and [(c.rank, c.why, c.quiet) for c in found.culprits] == [(2, "behind", True)]
    assert judge.lines(found, {}, 3)[1] == (
        f"torchpod: hang: culprit rank 2 on node-2: never entered it; last in collective 3 ({AR}, sizes {SIZES}); "
        "did not answer: its beat stopped too (frozen, or cut off from the store)")
    assert judge.parse_suspicion(found.encode()) == (found, "")
    moving = Judge(world=3, window_s=W, started=0.0)  # behind, but its thread beats: not frozen
    _, found = run(moving, [(0, {0: 3, 1: 3, 2: 3}), (10, {0: 4, 1: 4, 2: 3}), (100, {})])
    assert [(c.rank, c.quiet) for c in found.culprits] == [(2, False)]
    assert judge.lines(found, {}, 3)[1].endswith("; did not answer")


def test_a_frozen_rank_is_named_alone_while_its_live_neighbours_wait_in_the_collective_before():
    judging = Judge(world=8, window_s=W, started=0.0)
    # rank 5 freezes mid-exchange of collective 36: ranks 4 and 6 (its ring neighbours) never
    # finish it, the others went on into 37; 4 and 6 keep beating, 5 does not
    frozen = {r: 37 for r in (0, 1, 2, 3, 7)} | {4: 36, 6: 36}
    at, found = run(judging, [(0, {r: 35 for r in range(8)}), (10, frozen), (100, {})])
    assert [(c.rank, c.why, c.quiet) for c in found.culprits] == [(5, "behind", True)]
    assert (found.waiting, found.earlier) == ((0, 1, 2, 3, 7), (4, 6))
    assert judge.lines(found, {}, 8)[0] == (
        f"torchpod: hang: no rank went past collective 37 ({AR}, sizes {SIZES}) for {W} s; 7 of 8 ranks wait in it "
        "or an earlier one (ranks 0-4,6,7)")
    assert judge.parse_suspicion(found.encode()) == (found, "")


def test_a_rank_cut_off_just_after_the_others_entered_the_front_is_frozen_once_its_beat_is_still():
    """The others enter collective 7 at 10 s; rank 3's one beat there (its op not known yet)
    comes at 12 s, and then nothing (its link cut). At 10 s + the window it takes no side,
    so nothing is judged yet; at 12 s + the window it is frozen, never a mismatch."""
    judging = Judge(world=4, window_s=W, started=0.0)
    for t in range(10):
        judging.feed(float(t), beats({r: 6 for r in range(4)}, t + 1))
    found, t = None, 10
    while found is None and t < 100:
        seqs = {0: 7, 1: 7, 2: 7} | ({3: 7} if t == 12 else {3: 6} if t < 12 else {})
        found = judging.feed(float(t), beats(seqs, t + 1, {3: ("", "")} if t == 12 else None))
        t += 1
    assert found is not None and t - 1 == 12 + W
    assert [(c.rank, c.why, c.quiet) for c in found.culprits] == [(3, "frozen", True)]
    assert judge.lines(found, {}, 4)[1] == ("torchpod: hang: culprit rank 3 on node-3: entered it; did not answer: "
                                            "its beat stopped too (frozen, or cut off from the store)")


def test_a_rank_frozen_as_it_entered_the_front_collective_is_named_frozen_not_a_mismatch():
    judging = Judge(world=4, window_s=W, started=0.0)
    for t in range(10):  # everyone in collective 6
        judging.feed(float(t), beats({r: 6 for r in range(4)}, t + 1))
    # rank 3 enters 7 and freezes at once (docker pause): its one beat there knows no op yet
    judging.feed(10.0, beats({3: 7}, 11, {3: ("", "")}))
    found, t = None, 11
    while found is None and t < 100:
        found = judging.feed(float(t), beats({0: 7, 1: 7, 2: 7}, t + 1))
        t += 1
    assert found is not None and t - 1 == 10 + W
    assert [(c.rank, c.why, c.quiet) for c in found.culprits] == [(3, "frozen", True)]
    said = judge.lines(found, {}, 4)
    assert said[0] == (f"torchpod: hang: no rank went past collective 7 ({AR}, sizes {SIZES}) for {W} s; 3 of 4 "
                       "ranks wait in it (ranks 0-2)")
    assert said[1] == ("torchpod: hang: culprit rank 3 on node-3: entered it; did not answer: its beat stopped too "
                       "(frozen, or cut off from the store)")
    assert judge.parse_suspicion(found.encode()) == (found, "")


def test_ranks_that_entered_another_op_or_size_are_named_against_the_majority():
    judging = Judge(world=4, window_s=W, started=0.0)
    ops = {3: ("gloo:broadcast", SIZES)}
    at, found = run(judging, [(0, {r: 7 for r in range(4)}), (100, {})], ops)
    assert at == W
    assert [(c.rank, c.why, c.op) for c in found.culprits] == [(3, "mismatch", "gloo:broadcast")]
    assert (found.op, found.waiting) == (AR, (0, 1, 2))


def test_a_tie_keeps_the_group_of_the_lowest_rank():
    judging = Judge(world=2, window_s=W, started=0.0)
    _, found = run(judging, [(0, {0: 7, 1: 7}), (100, {})], {1: (AR, "[[5]]")})
    assert [(c.rank, c.sizes) for c in found.culprits] == [(1, "[[5]]")]


def test_the_verdict_names_the_collective_the_culprit_its_host_and_its_frame_word_for_word():
    found = judge.Suspicion(12, AR, SIZES, (0, 1, 2, 4, 5, 6, 7), (
        judge.Culprit(3, "node-3", "behind", 11, AR, SIZES), judge.Culprit(6, "node-6", "silent", 11, AR, SIZES)), W)
    reports = {r: Report(r, f"node-{r}", 100 + r, f"/w/train.py:{40 + r} in step", "") for r in range(6)}
    assert judge.lines(found, reports, 8) == [
        "torchpod: hang: no rank went past collective 12 (gloo:all_reduce, sizes [[10]]) for 30 s; "
        "7 of 8 ranks wait in it (ranks 0-2,4-7)",
        "torchpod: hang: culprit rank 3 on node-3: never entered it; last in collective 11 (gloo:all_reduce, "
        "sizes [[10]]); now in /w/train.py:43 in step",
        "torchpod: hang: culprit rank 6 on node-6: did not answer: its beat stopped (frozen, or cut off from "
        "the store); last in collective 11 (gloo:all_reduce, sizes [[10]])",
        "torchpod: hang: 6 of 8 ranks reported their stacks",
    ]


def test_a_behind_rank_that_did_not_report_is_said_so():
    found = judge.Suspicion(2, AR, SIZES, (0,), (judge.Culprit(1, "n1", "behind", 1, AR, SIZES),), W)
    assert judge.lines(found, {}, 2)[1].endswith("never entered it; last in collective 1 (gloo:all_reduce, "
                                                 "sizes [[10]]); did not answer")


@pytest.mark.parametrize("raw, why", [
    (b"x" * (judge.BEAT_CAP + 1), "over its"),
    (b"\xff\xfe{", "not UTF-8 JSON"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"rank": -1, "host": "h", "n": 1, "seq": 1, "op": "", "sizes": "", "job": "run-1.0"}', "fields"),
    (b'{"rank": true, "host": "h", "n": 1, "seq": 1, "op": "", "sizes": "", "job": "run-1.0"}', "fields"),
    (b'{"rank": 0, "host": "h\\n", "n": 1, "seq": 1, "op": "", "sizes": "", "job": "run-1.0"}', "fields"),
    (b'{"rank": 9, "host": "h", "n": 1, "seq": 1, "op": "", "sizes": "", "job": "run-1.0"}', "outside a world"),
    (b'{"rank": 0, "host": "h", "n": 1, "seq": 1, "op": "", "sizes": "", "job": "run-0.3"}', "of job"),
    (b"[" * 100_000 + b"]" * 100_000, "over its"),
])
def test_a_beat_that_is_not_this_jobs_is_refused_with_why(raw, why):
    beat, problem = judge.parse_beat(raw, JOB, 4)
    assert beat is None and why in problem


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode)
       | st.dictionaries(st.sampled_from(["rank", "host", "n", "seq", "op", "sizes", "job", "pid", "frame",
                                          "stack"]),
                         st.none() | st.booleans() | st.integers() | st.text(max_size=20) | st.floats()
                         | st.lists(st.integers(), max_size=3)).map(lambda d: json.dumps(d).encode()))
def test_any_bytes_are_a_beat_a_report_or_a_reason_never_an_exception(raw):
    beat, problem = judge.parse_beat(raw, JOB, 8)
    assert (beat is None) == bool(problem)
    if beat is not None:
        assert 0 <= beat.rank < 8 and beat.job == JOB and beat.host.isprintable()
    report, problem = judge.parse_report(raw, 8)
    assert (report is None) == bool(problem)
    found, problem = judge.parse_suspicion(raw)
    assert (found is None) == bool(problem)


def test_beats_reports_and_suspicions_read_back_as_written():
    beat = Beat(3, "node-3", 7, 11, AR, SIZES, JOB)
    assert judge.parse_beat(beat.encode(), JOB, 4) == (beat, "")
    report = Report(1, "n", 42, "t.py:3 in f", "stack")
    assert judge.parse_report(report.encode(), 2) == (report, "")
    found = judge.Suspicion(4, AR, SIZES, (0, 1), (judge.Culprit(2, "h", "behind", 3, AR, SIZES),), W)
    assert judge.parse_suspicion(found.encode()) == (found, "")


@pytest.mark.parametrize("text", ["0", "-5", "9", "86401", "1e3", "30s", "", " 30", "٣٠", "99999999999"])
def test_a_window_out_of_its_form_is_refused(text):
    with pytest.raises(ValueError):
        judge.window(text)


@pytest.mark.parametrize("text, seconds", [("off", None), ("10", 10), ("300", 300), ("86400", 86400)])
def test_a_window_in_its_form_is_read(text, seconds):
    assert judge.window(text) == seconds


def test_a_judge_starved_of_cpu_names_no_rank_silent_for_the_beats_it_missed():
    judging = Judge(world=2, window_s=W, started=0.0)
    assert judging.feed(1.0, beats({0: 1, 1: 1}, 1)) is None
    # the judge's own thread ran again only 35 s later: every beat moved meanwhile
    assert judging.feed(36.0, beats({0: 2, 1: 2}, 9)) is None


@pytest.mark.parametrize("raw, ranks", [
    (b'{"lines": ["x"], "answered": [3, 0, 1]}', [0, 1, 3]),
    (b'{"answered": [1, 1, 2]}', [1, 2]),
    (b'{"answered": [0, 4, true, "2"]}', [0]),  # outside the world, or not a whole number
    (b'{"answered": [-1, 2.0, null, 99]}', []),
    (b'{"answered": [0, 1, 2, 3, 0]}', []),  # more entries than ranks: not this job's verdict
    (b'{"answered": "0,1"}', []), (b'{"answered": {"0": 1}}', []), (b"{}", []),
    (b"[0, 1]", []), (b"\xff\xfe", []), (b"not json", []), (b"[" * 100_000, []),
    (b'{"answered": [' + b"0," * 40_000 + b"0]}", []),  # over the message's cap
])
def test_who_answered_is_read_from_a_verdict_of_any_shape(raw, ranks):
    assert judge.answered(raw, 4) == ranks
