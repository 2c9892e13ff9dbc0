"""Stragglers named while the job runs: pure, no torch, no store, no clock.

torch's flight recorder stamps every collective a rank enters with the wall clock
(``time_created_ns``, torch/csrc/distributed/c10d/FlightRecorder.hpp, torch 2.13). Every
rank's watch thread (torchpod.watch.worker) sends the stamps of the collectives it entered
since its last message (``Arrivals``); rank 0's thread feeds them to ``Stragglers``, which
judges each collective every rank has entered: the rank that entered it last, and how long
after the first. The others sat in that collective waiting for it.

A rank is named a straggler for a stretch of at least MIN_COLLECTIVES collectives when it
entered at least LAST_SHARE of them last, a median MIN_LATE_MS or more after the first rank.
Both bounds keep a clean job's noise from naming anyone: with no straggler, the last rank
changes from collective to collective, and jitter of a few milliseconds is not waiting that
matters. The stamps are each node's wall clock: nodes whose clocks disagree by more than
MIN_LATE_MS (no NTP) can make a punctual rank look late, which docs/launcher.md says.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ..words import plural
from .judge import TEXT_CAP, json_object, text_field, whole_number

ARRIVALS_CAP = 512  # collectives in one rank's message
ARRIVALS_BYTES = 64 * 1024
PENDING_CAP = 8 * ARRIVALS_CAP  # collectives kept waiting for the ranks that have not sent theirs
MIN_COLLECTIVES = 20
LAST_SHARE = 0.75
MIN_LATE_MS = 50.0


@dataclass(frozen=True)
class Arrivals:
    """One rank's message: when it entered each collective, (seq, wall-clock ns)."""

    rank: int
    host: str
    job: str
    at: tuple[tuple[int, int], ...]

    def encode(self) -> bytes:
        return json.dumps({"rank": self.rank, "host": self.host, "job": self.job, "at": [list(a) for a in self.at]},
                          separators=(",", ":")).encode()


def default_group(dump: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The flight-recorder dump's entries of the default group's collectives (its
    point-to-point sends and other groups' entries left out); nothing from a dump whose
    entries are not a list."""
    entries = dump.get("entries")
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, dict) or entry.get("is_p2p"):
            continue
        group = entry.get("process_group")
        if isinstance(group, list) and len(group) == 2 and group[1] == "default_pg":
            yield entry


def arrivals(dump: dict[str, Any], after: int) -> tuple[tuple[int, int], ...]:
    """The default group's collectives after ``after`` in a flight-recorder dump, as (seq, ns),
    the newest ARRIVALS_CAP of them."""
    found = {}
    for entry in default_group(dump):
        seq, ns = whole_number(entry.get("collective_seq_id")), whole_number(entry.get("time_created_ns"))
        if seq is not None and ns is not None and seq > after:
            found[seq] = ns
    return tuple(sorted(found.items()))[-ARRIVALS_CAP:]


def parse_arrivals(raw: bytes, job: str, world: int) -> tuple[Arrivals | None, str]:
    """The message in ``raw``, or None and why (as judge.parse_beat)."""
    value, problem = json_object(raw, ARRIVALS_BYTES, "an arrivals message")
    if value is None:
        return None, problem
    rank, host, their = whole_number(value.get("rank")), text_field(value.get("host")), text_field(value.get("job"))
    at = value.get("at")
    pairs = [(whole_number(a[0]), whole_number(a[1])) if isinstance(a, list) and len(a) == 2 else (None, None)
             for a in at] if isinstance(at, list) and len(at) <= ARRIVALS_CAP else [(None, None)]
    if rank is None or host is None or their is None or any(None in p for p in pairs):
        return None, "an arrivals message whose fields are not whole numbers and printable text"
    if rank >= world:
        return None, f"an arrivals message of rank {rank}, outside a world of {world}"
    if their != job:
        return None, f"an arrivals message of job {their!r}, not {job!r}"
    return Arrivals(rank, host, their, tuple(pairs)), ""  # type: ignore[arg-type]


@dataclass(frozen=True)
class Straggler:
    rank: int
    host: str
    last: int  # collectives it entered last
    judged: int  # collectives judged
    median_ms: float  # its median lateness behind the first rank, where it was last

    stretches: tuple[int, int] = (1, 1)  # over the run: stretches it was named in, of those judged

    def line(self, run: bool = False) -> str:
        named, judged = self.stretches
        over, wait = (f" over the run (named in {named} of {plural(judged, 'stretch', 'stretches')})",
                      "waited") if run else ("", "wait")
        return (f"torchpod: straggler{over}: rank {self.rank} on {self.host or 'an unknown host'} entered "
                f"{self.last} of {plural(self.judged, 'collective')} last ({round(100 * self.last / self.judged)} %), "
                f"a median {self.median_ms:.0f} ms after the first rank; the others {wait} for it")


@dataclass
class Tally:
    judged: int = 0
    late_ms: dict[int, list[float]] = field(default_factory=dict)  # rank -> its lateness where last

    def add(self, rank: int, late_ms: float) -> None:
        self.judged += 1
        self.late_ms.setdefault(rank, []).append(late_ms)

    def named(self, hosts: dict[int, str]) -> list[Straggler]:
        if self.judged < MIN_COLLECTIVES:
            return []
        out = []
        for rank, late in sorted(self.late_ms.items()):
            median = statistics.median(late)
            if len(late) >= LAST_SHARE * self.judged and median >= MIN_LATE_MS:
                out.append(Straggler(rank, hosts.get(rank, "")[:TEXT_CAP], len(late), self.judged, median))
        return out


@dataclass
class Stragglers:
    """Rank 0's memory of the arrivals: the stretch being judged and the whole run."""

    world: int
    pending: dict[int, dict[int, int]] = field(default_factory=dict)  # seq -> rank -> ns
    hosts: dict[int, str] = field(default_factory=dict)
    stretch: Tally = field(default_factory=Tally)
    judged_upto: int = 0
    stretches: int = 0  # stretches judged
    named: dict[int, list[Straggler]] = field(default_factory=dict)  # rank -> each stretch it was named in

    def feed(self, messages: Iterable[Arrivals]) -> list[Straggler]:
        """The stragglers of the stretch these messages close, if they close one."""
        for m in messages:
            self.hosts[m.rank] = m.host
            for seq, ns in m.at:
                if seq > self.judged_upto:
                    self.pending.setdefault(seq, {})[m.rank] = ns
        for seq in sorted(s for s, ranks in self.pending.items() if len(ranks) == self.world):
            ranks = self.pending.pop(seq)
            first = min(ranks.values())
            last = max(ranks, key=lambda r: (ranks[r], -r))
            self.stretch.add(last, (ranks[last] - first) / 1e6)
            self.judged_upto = max(self.judged_upto, seq)
        for seq in sorted(self.pending)[:-PENDING_CAP] + [s for s in self.pending if s <= self.judged_upto]:
            self.pending.pop(seq, None)
        if self.stretch.judged < MIN_COLLECTIVES:
            return []
        named, self.stretch = self.stretch.named(self.hosts), Tally()
        self.stretches += 1
        for s in named:
            self.named.setdefault(s.rank, []).append(s)
        return named

    def summary(self) -> list[str]:
        """Each rank named in any stretch, a line each, over the stretches it was named in
        (its median: the median of theirs); nothing for a run that named nobody."""
        out = []
        for rank, found in sorted(self.named.items()):
            merged = Straggler(rank, found[-1].host, sum(s.last for s in found), sum(s.judged for s in found),
                               statistics.median(s.median_ms for s in found), (len(found), self.stretches))
            out.append(merged.line(run=True))
        return out
