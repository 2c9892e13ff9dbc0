"""torchpod.watch.straggle: the rank that enters collectives last, by enough and often enough,
is named with its share and median lateness; a clean job's jitter names nobody; what every
rank has not yet sent waits, bounded; a message out of its form is refused with a reason
(the thread on real gloo ranks: tests/integration/torchpod/watch/test_worker.py)."""

from __future__ import annotations

import json

import pytest

from torchpod.watch import straggle
from torchpod.watch.straggle import Arrivals, Stragglers

JOB = "run-1.0"
MS = 1_000_000


def sent(rank, stamps, host=None):
    return Arrivals(rank, host or f"node-{rank}", JOB, tuple(stamps))


def job(world, late_rank, late_ms, n=24, start=1, jitter=lambda seq, rank: 0):
    """Every rank's message for collectives start..start+n-1, one a second; ``late_rank``
    enters each ``late_ms`` after the others."""
    return [sent(r, [(s, s * 1000 * MS + jitter(s, r) + (late_ms * MS if r == late_rank else 0))
                     for s in range(start, start + n)]) for r in range(world)]


def test_a_rank_entering_last_by_300_ms_is_named_with_its_share_and_median():
    found = Stragglers(4).feed(job(4, 2, 300))
    assert [s.line() for s in found] == [
        "torchpod: straggler: rank 2 on node-2 entered 24 of 24 collectives last (100 %), a median 300 ms "
        "after the first rank; the others wait for it"]


def test_the_run_summary_adds_the_stretches_a_rank_was_named_in_and_names_nobody_in_a_clean_run():
    watch = Stragglers(2)
    watch.feed(job(2, 1, 120, n=20))
    watch.feed(job(2, 1, 0, n=20, start=21, jitter=lambda seq, rank: seq % 2 * rank * 3 * MS))  # caught up
    watch.feed(job(2, 1, 80, n=20, start=41))
    assert watch.summary() == [
        "torchpod: straggler over the run (named in 2 of 3 stretches): rank 1 on node-1 entered 40 of 40 "
        "collectives last (100 %), a median 100 ms after the first rank; the others waited for it"]
    assert Stragglers(2).summary() == []


@pytest.mark.parametrize("world, late_ms, jitter", [
    (8, 0, lambda seq, rank: (seq * 7 + rank * 13) % 8 * 5 * MS),  # whoever is last changes, by < 40 ms
    (2, 10, lambda seq, rank: 0),  # always last, but by 10 ms: not waiting that matters
    (2, 300, lambda seq, rank: 600 * MS if rank == 0 and seq % 2 else 0),  # last in only half
])
def test_jitter_or_a_rank_rarely_or_barely_last_names_nobody(world, late_ms, jitter):
    assert Stragglers(world).feed(job(world, world - 1, late_ms, n=40, jitter=jitter)) == []


def test_collectives_wait_for_every_rank_and_a_short_stretch_for_more():
    watch = Stragglers(2)
    messages = job(2, 1, 200, n=30)
    assert watch.feed([messages[0]]) == []  # rank 1 has not sent its stamps yet
    assert len(watch.pending) == 30
    assert [s.last for s in watch.feed([messages[1]])] == [30]
    assert watch.pending == {}
    assert watch.feed(job(2, 1, 200, n=10, start=31)) == []  # 10 collectives: fewer than a stretch
    assert [s.judged for s in watch.feed(job(2, 1, 200, n=10, start=41))] == [20]


def test_what_one_rank_alone_sent_is_bounded():
    watch, starts = Stragglers(2), range(1, 40_000, straggle.ARRIVALS_CAP)
    for start in starts:
        watch.feed([sent(0, [(s, s) for s in range(start, start + straggle.ARRIVALS_CAP)])])
    newest = starts[-1] + straggle.ARRIVALS_CAP - 1
    assert sorted(watch.pending) == list(range(newest - straggle.PENDING_CAP + 1, newest + 1))


# torch 2.13's _dump_fr_trace_json for a gloo group (entries trimmed to the fields read)
def entry(seq, ns, group=("0", "default_pg"), p2p=False):
    return {"collective_seq_id": seq, "time_created_ns": ns, "process_group": list(group), "is_p2p": p2p}


def test_arrivals_are_the_default_groups_collectives_after_the_last_sent_newest_kept():
    dump = {"entries": [entry(1, 10), entry(2, 20), entry(3, 30, group=("1", "sub")), entry(4, 40, p2p=True),
                        entry(5, 50), None, entry(True, 1), entry(6, -1), entry(7, "70")]}
    assert straggle.arrivals(dump, 1) == ((2, 20), (5, 50))
    many = {"entries": [entry(s, s) for s in range(1, 2001)]}
    got = straggle.arrivals(many, 0)
    assert len(got) == straggle.ARRIVALS_CAP and got[-1] == (2000, 2000) and got[0] == (1489, 1489)
    assert straggle.arrivals({}, 0) == ()


def encoded(**fields):
    base = {"rank": 1, "host": "node-1", "job": JOB, "at": [[1, 10], [2, 20]]}
    return json.dumps({**base, **fields}).encode()


def test_a_message_as_a_rank_sends_it_reads_back():
    message = sent(1, [(1, 10), (2, 20)])
    assert straggle.parse_arrivals(message.encode(), JOB, 2) == (message, "")


@pytest.mark.parametrize("raw, why", [
    (b"x" * (straggle.ARRIVALS_BYTES + 1), "an arrivals message of 65537 bytes, over its 65536"),
    (b"\xff\xfe{}", "an arrivals message that is not UTF-8 JSON"),
    (b'{"rank": 1', "an arrivals message that is not UTF-8 JSON"),
    (b"[1, 2]", "an arrivals message that is not a JSON object"),
    (encoded(rank=-1), "an arrivals message whose fields are not whole numbers and printable text"),
    (encoded(host="a\nb"), "an arrivals message whose fields are not whole numbers and printable text"),
    (encoded(at=[[1, 10, 3]]), "an arrivals message whose fields are not whole numbers and printable text"),
    (encoded(at=[[1, True]]), "an arrivals message whose fields are not whole numbers and printable text"),
    (encoded(at=[[1, 1]] * (straggle.ARRIVALS_CAP + 1)),
     "an arrivals message whose fields are not whole numbers and printable text"),
    (encoded(at="1,10"), "an arrivals message whose fields are not whole numbers and printable text"),
    (encoded(rank=2), "an arrivals message of rank 2, outside a world of 2"),
    (encoded(job="run-0.3"), "an arrivals message of job 'run-0.3', not 'run-1.0'"),
], ids=lambda value: "" if isinstance(value, str) else None)
def test_a_message_out_of_its_form_is_refused_with_why(raw, why):
    assert straggle.parse_arrivals(raw, JOB, 2) == (None, why)
