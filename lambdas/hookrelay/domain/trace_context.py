"""W3C Trace Context (level 1) through the platform: a producer's trace reaches its consumers' webhooks.

A producer's `traceparent` (and `tracestate`) on the ingest request is kept with the event; every attempt of every
delivery of it sends a `traceparent` in the same trace with a new parent id (the attempt's own span, as a client
span would be), and the `tracestate` as it came. Replays and redrives are deliveries of the same event: the same
trace. An event whose request carried none (or a malformed one, which the spec says to ignore, never to refuse)
gets a trace of its own, started by the platform, so that every event has one.

What is stored is only what cannot be derived. A trace the platform starts unsampled (the default: the platform's
tracing is off) takes its ids from the event's id (`derived`), and each attempt's span id comes from its delivery
and attempt number (`attempt_span_id`), so neither the event, nor its deliveries, nor their attempts store a copy:
at a fan-out of 10 that is about 650 bytes an event, kept 30 days. A producer's trace, or one the platform starts
sampled, is stored with the event (and its trace id with each delivery: the log shows it without reading the event).

Parsing follows https://www.w3.org/TR/trace-context/ section 3.2: `version-traceid-parentid-flags`, lowercase hex;
version `ff` is invalid; version `00` is exactly 55 characters; a later version is read by its first four fields (and
sent on as version 00, the one this speaks); an all-zero trace id or parent id is invalid. Only the `sampled` flag
is defined in level 1, and only it is passed on. A `tracestate` is kept only beside a valid `traceparent`, only if
every list member is well formed (else it is dropped whole, as section 3.3.1.5 allows), and cut to the 512
characters the spec asks vendors to propagate, by whole members from the right.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass, replace

VERSION = "00"
SAMPLED = 0x01
# Section 3.3.1.5: vendors should propagate at least this much of a tracestate; longer ones are cut (whole members).
MAX_TRACESTATE_CHARS = 512
MAX_TRACESTATE_MEMBERS = 32  # section 3.3.1.1

TRACEPARENT_HEADER = "traceparent"
TRACESTATE_HEADER = "tracestate"

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16
# Section 3.3.1.3: a simple key, or a multi-tenant `tenant@system` one; a value of printable ASCII but `,` and `=`,
# not ending in a space.
_KEY = re.compile(r"^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})$")
_VALUE = re.compile(r"^[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$")


@dataclass(frozen=True)
class TraceContext:
    """One span's place in a trace: what a `traceparent` says, and the `tracestate` beside it."""

    trace_id: str  # 32 lowercase hex, not all zero
    parent_id: str  # 16 lowercase hex, not all zero: the span that sent it
    flags: int = 0
    tracestate: str | None = None

    @property
    def sampled(self) -> bool:
        return bool(self.flags & SAMPLED)

    @property
    def traceparent(self) -> str:
        """As sent: version 00, the sampled flag only (level 1 defines no other)."""
        return f"{VERSION}-{self.trace_id}-{self.parent_id}-{self.flags & SAMPLED:02x}"

    def headers(self) -> dict[str, str]:
        """The request headers that carry it."""
        headers = {TRACEPARENT_HEADER: self.traceparent}
        if self.tracestate:
            headers[TRACESTATE_HEADER] = self.tracestate
        return headers


def parse(traceparent: str | None, tracestate: str | None = None) -> TraceContext | None:
    """The context a request's headers give, or None when the `traceparent` is absent or malformed (ignored)."""
    if traceparent is None:
        return None
    found = _TRACEPARENT.match(traceparent.strip(" \t"))
    if found is None:
        return None
    version, trace_id, parent_id, flags, rest = found.groups()
    if version == "ff" or (version == VERSION and rest is not None):
        return None
    if trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    return TraceContext(trace_id, parent_id, int(flags, 16) & SAMPLED, clean_tracestate(tracestate))


def clean_tracestate(tracestate: str | None) -> str | None:
    """The tracestate to pass on: None when absent, empty or malformed; cut to MAX_TRACESTATE_CHARS by members."""
    if tracestate is None:
        return None
    members = [member.strip(" \t") for member in tracestate.split(",")]
    members = [member for member in members if member]  # empty members are allowed, and dropped
    if not members or len(members) > MAX_TRACESTATE_MEMBERS:
        return None
    keys = set()
    for member in members:
        key, equals, value = member.partition("=")
        if not equals or not _KEY.match(key) or not _VALUE.match(value) or key in keys:
            return None
        keys.add(key)
    while len(",".join(members)) > MAX_TRACESTATE_CHARS:
        members.pop()  # the rightmost members are the oldest (section 3.5): dropped first
    return ",".join(members) or None


def start(*, sampled: bool) -> TraceContext:
    """A new trace, for an event whose producer sent none: random ids, the platform's sampling decision."""
    return TraceContext(_random_hex(16), new_span_id(), SAMPLED if sampled else 0)


def derived(event_id: str) -> TraceContext:
    """The unsampled trace the platform starts for an event that came without one: ids derived from the event's."""
    return TraceContext(_derived_hex(f"trace/{event_id}", 16), _derived_hex(f"span/{event_id}", 8), 0)


def attempt_span_id(delivery_id: str, attempt: int) -> str:
    """An attempt's own span id (a re-sent copy of the attempt shares it): derived, so that nothing stores it."""
    return _derived_hex(f"attempt/{delivery_id}/{attempt}", 8)


def _derived_hex(seed: str, size: int) -> str:
    digest = hashlib.sha256(seed.encode()).hexdigest()[: 2 * size]
    return digest if digest.strip("0") else digest[:-1] + "1"  # all zero is invalid (one seed in 2^64)


def child(context: TraceContext, span_id: str | None = None) -> TraceContext:
    """The context a request made within `context` sends: the same trace, its own span (new unless given)."""
    return replace(context, parent_id=span_id or new_span_id())


def new_span_id() -> str:
    return _random_hex(8)


def _random_hex(size: int) -> str:
    while True:  # all zero is invalid: vanishingly rare, but never sent
        value = secrets.token_hex(size)
        if value.strip("0"):
            return value
