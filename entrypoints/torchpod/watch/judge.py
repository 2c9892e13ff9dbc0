"""The hang verdict, from what every rank says of itself: pure, no torch, no store, no clock.

Each rank's watch thread (torchpod.watch.worker) beats into the job's store: the highest
collective sequence number of the default process group it has entered (torch's flight
recorder: ``collective_seq_id``), that collective's op and sizes, and a counter that moves
with every beat. One rank's thread judges (rank 0; rank 1 while rank 0 is silent), feeding
the beats it reads to ``Judge.feed`` with its own monotonic clock, so the nodes' clocks
never meet. A collective on gloo is recorded when it is entered and never marked done
(torch 2.13's ProcessGroupGloo records no completion), so the judge reads only what holds
on every backend:

- **behind**: some ranks entered collective S a whole stall window ago and no rank has
  entered a later one since, while other ranks are still before S. Those others keep the
  job waiting: a straggler catches up within the window, a hang does not.
- **silent**: a rank's beat has not moved for a whole stall window and SILENT_GRACE_S more
  (its process is frozen, its node paused or cut off from the store); the grace keeps a
  rank whose thread was starved of CPU for a while, on an overloaded node, from being named.
- **mismatch**: every rank entered collective S a window ago, nobody went further, and the
  ranks disagree on its op or sizes: the ranks outside the largest agreeing group called
  something else (on a tie, the groups without the lowest rank). A rank whose op is not
  known yet takes no side: cut off just after it entered S, it is named frozen once its own
  beat has been still for a window, never a mismatch of "no op".

A job whose ranks all sit in the same collective, or all compute between the same two,
is not judged: on gloo that is indistinguishable from a long step, and a false verdict
would end a healthy job.

``verdict`` joins the suspicion with the reports the ranks sent once asked (their
innermost frame outside the interpreter and its packages), and ``lines`` words it: what
`torchpod run` prints and the pod's termination message holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from ..words import plural

BEAT_CAP = 4096  # bytes of one beat; longer is not a beat
REPORT_CAP = 64 * 1024  # bytes of one report (its stack is cut to STACK_CAP first)
STACK_CAP = 16 * 1024
TEXT_CAP = 300  # one field's characters (an op, sizes, a frame, a host)
WINDOW_MIN_S, WINDOW_MAX_S = 10, 86_400
SILENT_GRACE_S = 30


def text_field(value: object, cap: int = TEXT_CAP) -> str | None:
    """A printable string of at most ``cap`` characters, else None."""
    if not isinstance(value, str) or len(value) > cap or not all(ch.isprintable() for ch in value):
        return None
    return value


def whole_number(value: object) -> int | None:
    """A whole number from 0 to 2**62 (never a bool, which JSON's true would be), else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**62:
        return None
    return value


def json_object(raw: bytes, cap: int, what: str) -> tuple[dict | None, str]:
    """A JSON object from a message another rank sent (``what``: its name in the reason), or
    None and why: over ``cap`` bytes, not UTF-8 JSON, nested past the parser's depth, or not
    an object. Every message the watch reads from the store comes through here."""
    if len(raw) > cap:
        return None, f"{what} of {plural(len(raw), 'byte')}, over its {cap}"
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None, f"{what} that is not UTF-8 JSON"
    if not isinstance(value, dict):
        return None, f"{what} that is not a JSON object"
    return value, ""


def answered(raw: bytes, world: int) -> list[int]:
    """The ranks a verdict message says answered the claim (its "answered" list), each a
    rank inside the world, at most ``world`` of them; [] for a message out of its form."""
    value, _ = json_object(raw, REPORT_CAP, "a verdict")
    ranks = value.get("answered") if value is not None else None
    if not isinstance(ranks, list) or len(ranks) > world:
        return []
    return sorted({r for r in map(whole_number, ranks) if r is not None and r < world})


@dataclass(frozen=True)
class Beat:
    """One rank's beat: where it is in the default group's collectives."""

    rank: int
    host: str
    n: int  # moves with every beat
    seq: int  # the highest collective entered; 0: none yet
    op: str = ""
    sizes: str = ""
    job: str = ""  # the rendezvous id and restart the rank belongs to

    def encode(self) -> bytes:
        return json.dumps({"rank": self.rank, "host": self.host, "n": self.n, "seq": self.seq, "op": self.op,
                           "sizes": self.sizes, "job": self.job}, separators=(",", ":")).encode()


def parse_beat(raw: bytes, job: str, world: int) -> tuple[Beat | None, str]:
    """The beat in ``raw``, or None and why: too long, not JSON, a field out of its form, a
    rank outside the world, or another job's (a key left by an earlier attempt)."""
    value, problem = json_object(raw, BEAT_CAP, "a beat")
    if value is None:
        return None, problem
    rank, n, seq = whole_number(value.get("rank")), whole_number(value.get("n")), whole_number(value.get("seq"))
    host, op, sizes, their = (text_field(value.get(k)) for k in ("host", "op", "sizes", "job"))
    if rank is None or n is None or seq is None or None in (host, op, sizes, their):
        return None, "a beat whose fields are not whole numbers and printable text"
    if rank >= world:
        return None, f"a beat of rank {rank}, outside a world of {world}"
    if their != job:
        return None, f"a beat of job {their!r}, not {job!r}"
    return Beat(rank, host or "", n, seq, op or "", sizes or "", job), ""


@dataclass(frozen=True)
class Culprit:
    rank: int
    host: str
    why: str  # behind, silent, mismatch, or frozen (entered the front collective and stopped at once)
    seq: int  # the collective it last entered
    op: str = ""
    sizes: str = ""
    beat: bool = True  # False: the judge never read a beat of it (no host, no collective known)
    quiet: bool = False  # its beat has not moved for a whole window either


@dataclass(frozen=True)
class Suspicion:
    """What the judge saw: the collective the others wait in and who keeps them there."""

    seq: int
    op: str
    sizes: str
    waiting: tuple[int, ...]
    culprits: tuple[Culprit, ...]
    window_s: int
    earlier: tuple[int, ...] = ()  # alive ranks in an earlier collective, waiting on a frozen one

    def encode(self) -> bytes:
        return json.dumps({"seq": self.seq, "op": self.op, "sizes": self.sizes, "waiting": list(self.waiting),
                           "window_s": self.window_s, "earlier": list(self.earlier),
                           "culprits": [c.__dict__ for c in self.culprits]}, separators=(",", ":")).encode()


def parse_suspicion(raw: bytes) -> tuple[Suspicion | None, str]:
    value, problem = json_object(raw, REPORT_CAP, "a suspicion")
    if value is None:
        return None, problem
    try:
        culprits = tuple(Culprit(**{k: c[k] for k in ("rank", "host", "why", "seq", "op", "sizes")},
                                 beat=c.get("beat", True) is not False, quiet=c.get("quiet") is True)
                         for c in value["culprits"])
        found = Suspicion(int(value["seq"]), str(value["op"]), str(value["sizes"]),
                          tuple(int(r) for r in value["waiting"]), culprits, int(value["window_s"]),
                          tuple(int(r) for r in value.get("earlier") or ()))
    except (KeyError, TypeError, ValueError):
        return None, "a suspicion whose fields are not what the judge writes"
    return found, ""


@dataclass
class Judge:
    """The judging rank's memory of the beats, on its own monotonic clock."""

    world: int
    window_s: int
    started: float
    _moved: dict[int, tuple[int, float]] = field(default_factory=dict)  # rank -> (its n, when it last moved)
    _front: tuple[int, float] = (0, 0.0)  # the highest seq any rank entered, and when it was first seen
    last: dict[int, Beat] = field(default_factory=dict)

    def feed(self, now: float, beats: Mapping[int, Beat]) -> Suspicion | None:
        for rank, beat in beats.items():
            seen = self._moved.get(rank)
            if seen is None or seen[0] != beat.n:
                self._moved[rank] = (beat.n, now)
            self.last[rank] = beat
        front = max((b.seq for b in self.last.values()), default=0)
        if front != self._front[0]:
            self._front = (front, now)
        return self._suspect(now)

    def silent(self, now: float) -> list[int]:
        """Ranks whose beat has not moved for a window and the grace (never beat: since the
        judge started)."""
        quiet = self.window_s + SILENT_GRACE_S
        if now - self.started < quiet:
            return []
        return [r for r in range(self.world) if now - self._moved.get(r, (0, self.started))[1] >= quiet]

    def _quiet(self, rank: int, now: float) -> bool:
        """Whether the rank's own beat has not moved for a whole window (or never came)."""
        return rank not in self.last or now - self._moved.get(rank, (0, self.started))[1] >= self.window_s

    def _culprit(self, rank: int, why: str, now: float) -> Culprit:
        beat = self.last.get(rank)
        if beat is None:
            return Culprit(rank, "", why, 0, beat=False, quiet=True)
        return Culprit(rank, beat.host, why, beat.seq, beat.op, beat.sizes, quiet=self._quiet(rank, now))

    def _suspect(self, now: float) -> Suspicion | None:
        front, since = self._front
        at_front = sorted(r for r, b in self.last.items() if b.seq == front)
        lead = self.last[at_front[0]] if at_front else None
        silent = self.silent(now)
        stuck = front > 0 and now - since >= self.window_s
        if stuck:  # every rank passed init_process_group (some entered a collective): a rank
            # with no beat since then for a whole window is as silent as one whose beat stopped
            silent = sorted({*silent, *(r for r in range(self.world) if r not in self.last)})
        behind = [r for r in range(self.world) if r not in at_front and r not in silent] if stuck else []
        # a rank that entered the front collective and froze at once: its own thread stopped
        # before it could tell which collective it is (op and sizes are learned between two
        # beats), so it neither mismatches nor waits with the others; it is the culprit
        frozen = [r for r in at_front if r not in silent and not self.last[r].op and self._quiet(r, now)] \
            if stuck else []
        earlier: list[int] = []
        if any(self._quiet(r, now) for r in (*silent, *behind, *frozen)):
            # a frozen rank (its thread silent too) stops every collective it is in: the live
            # ranks still in an earlier one (its ring neighbours, in the middle of the last
            # exchange) wait on it, and are not named beside it
            earlier = [r for r in behind if not self._quiet(r, now)]
            behind = [r for r in behind if self._quiet(r, now)]
        # a rank whose op is not known yet (its number has not stood still between two beats)
        # disagrees with nobody: it is judged once known, or once its own beat has stopped
        known = [self.last[r] for r in at_front if r not in frozen and self.last[r].op]
        mismatch = _minority(known) if stuck and len(at_front) == self.world else []
        if not (silent or behind or mismatch or frozen):
            return None
        culprits = ([self._culprit(r, "silent", now) for r in silent]
                    + [self._culprit(r, "behind", now) for r in behind]
                    + [self._culprit(r, "mismatch", now) for r in mismatch]
                    + [self._culprit(r, "frozen", now) for r in frozen])
        blamed = {c.rank for c in culprits}
        if mismatch:  # the collective the others agree on
            lead = self.last[min(r for r in at_front if r not in blamed)]
        waiting = tuple(r for r in at_front if r not in blamed)
        return Suspicion(front, lead.op if lead else "", lead.sizes if lead else "", waiting,
                         tuple(sorted(culprits, key=lambda c: c.rank)), self.window_s, tuple(earlier))


def _minority(beats: list[Beat]) -> list[int]:
    """The ranks outside the largest group agreeing on (op, sizes); on a tie, outside the
    group holding the lowest rank. None when all agree."""
    groups: dict[tuple[str, str], list[int]] = {}
    for b in beats:
        groups.setdefault((b.op, b.sizes), []).append(b.rank)
    if len(groups) < 2:
        return []
    keep = max(groups.values(), key=lambda ranks: (len(ranks), -min(ranks)))
    return sorted(r for ranks in groups.values() if ranks is not keep for r in ranks)


@dataclass(frozen=True)
class Report:
    """What a rank says once asked: where its main thread is."""

    rank: int
    host: str
    pid: int
    frame: str  # innermost frame outside the interpreter and its packages: file:line in function
    stack: str  # the main thread's stack, as traceback prints it, cut to STACK_CAP

    def encode(self) -> bytes:
        return json.dumps(self.__dict__, separators=(",", ":")).encode()


def parse_report(raw: bytes, world: int) -> tuple[Report | None, str]:
    value, problem = json_object(raw, REPORT_CAP, "a report")
    if value is None:
        return None, problem
    rank, pid = whole_number(value.get("rank")), whole_number(value.get("pid"))
    host, frame = text_field(value.get("host")), text_field(value.get("frame"), 2 * TEXT_CAP)
    stack = value.get("stack")
    if rank is None or pid is None or host is None or frame is None or not isinstance(stack, str):
        return None, "a report whose fields are not whole numbers and printable text"
    if rank >= world:
        return None, f"a report of rank {rank}, outside a world of {world}"
    return Report(rank, host, pid, frame, stack[:STACK_CAP]), ""


def _ranks(ranks: tuple[int, ...] | list[int]) -> str:
    """0-3,5 for 0,1,2,3,5."""
    spans: list[list[int]] = []
    for r in sorted(ranks):
        if spans and r == spans[-1][-1] + 1:
            spans[-1].append(r)
        else:
            spans.append([r])
    return ",".join(f"{s[0]}-{s[-1]}" if len(s) > 2 else ",".join(map(str, s)) for s in spans) or "none"


def _collective(seq: int, op: str, sizes: str) -> str:
    if not seq:
        return "no collective yet"
    # op and sizes are known once a rank's number stood still between two beats
    return f"collective {seq} ({op}, sizes {sizes or 'none'})" if op else f"collective {seq}"


def lines(found: Suspicion, reports: Mapping[int, Report], world: int) -> list[str]:
    """The verdict, a line each: the collective and who waits in it, then each culprit with
    its host and what it is doing (its report's frame) or that it did not answer."""
    out = [f"torchpod: hang: no rank went past {_collective(found.seq, found.op, found.sizes)} for "
           f"{found.window_s} s; {len(found.waiting) + len(found.earlier)} of {plural(world, 'rank')} wait in it"
           f"{' or an earlier one' if found.earlier else ''} (ranks {_ranks((*found.waiting, *found.earlier))})"]
    for c in found.culprits:
        report = reports.get(c.rank)
        host = (report.host if report else c.host) or "an unknown host"
        if c.why == "silent" and not c.beat:
            said = "did not answer: no beat came from it (frozen, or cut off from the store)"
        elif c.why == "silent":
            said = "did not answer: its beat stopped (frozen, or cut off from the store)"
        elif c.why == "behind":
            said = "never entered it"
        elif c.why == "frozen":
            said = "entered it"
        else:
            said = f"entered it as {c.op or 'no op'}, sizes {c.sizes or 'none'}"
        last = f"last in {_collective(c.seq, c.op, c.sizes)}" if c.why in ("silent", "behind") and c.beat else ""
        if report is not None:
            doing = f"now in {report.frame}"
        elif c.why == "silent":
            doing = ""
        elif c.quiet:  # behind, and its own thread silent as long: the whole process is stuck
            doing = "did not answer: its beat stopped too (frozen, or cut off from the store)"
        else:
            doing = "did not answer"
        out.append(f"torchpod: hang: culprit rank {c.rank} on {host}: "
                   + "; ".join(part for part in (said, last, doing) if part))
    out.append(f"torchpod: hang: {len(reports)} of {plural(world, 'rank')} reported their stacks")
    return out


def window(text: str) -> int | None:
    """A stall window: None for off, else whole seconds in [WINDOW_MIN_S, WINDOW_MAX_S];
    ValueError otherwise (the caller words it)."""
    if text == "off":
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 6 or not WINDOW_MIN_S <= int(text) <= WINDOW_MAX_S:
        raise ValueError(text)
    return int(text)
