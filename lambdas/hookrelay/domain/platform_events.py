"""Platform events: what the platform tells a tenant about its own endpoints and redrives, as webhooks.

They travel the pipeline every event travels (signed, retried, logged, redrivable), with one difference in who
receives them. The type names and each type's fields are defined here once: the services build every payload
through `notice()` (which refuses a field the catalogue does not list, or a missing one), the API refuses the
reserved prefix to producers (`is_reserved`), and the table in docs/consumer-guide.md is `catalogue_table()`,
held to it by tests/unit/test_platform_events.py.

**Who receives them.** An endpoint of the tenant with a filter that names them: one that starts with
`hookrelay.` and matches the type (`hookrelay.*`, `hookrelay.endpoint.*`, `hookrelay.endpoint.failing`). A
catch-all `*` does not: a consumer that never asked for platform events must not start getting payloads it
was not written for. And **never the endpoint the event is about**: it is the one failing (or being
redriven), so a notice that waited on it would never arrive, and one about its recovery tells it nothing.

**Exactly one per transition.** Each event's id is derived from the transition it reports (`PlatformNotice.key`:
the notice id of a failing spell's notice, the circuit's opening time, the redrive id), and its deliveries' ids
from the event's: an emitter that runs again after a crash finds what it wrote and creates only what is missing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from hookrelay.domain.clock import to_rfc3339
from hookrelay.domain.matching import filter_matches
from hookrelay.domain.models import Endpoint
from hookrelay.domain.redrive import Redrive

PREFIX = "hookrelay."  # reserved: producers may not publish types that start with it


class PlatformEventType(StrEnum):
    ENDPOINT_FAILING = "hookrelay.endpoint.failing"
    ENDPOINT_DISABLED = "hookrelay.endpoint.disabled"
    ENDPOINT_RECOVERED = "hookrelay.endpoint.recovered"
    CIRCUIT_OPENED = "hookrelay.endpoint.circuit_opened"
    CIRCUIT_CLOSED = "hookrelay.endpoint.circuit_closed"
    REDRIVE_COMPLETED = "hookrelay.redrive.completed"


@dataclass(frozen=True)
class PlatformEventSpec:
    when: str  # what transition sends it
    fields: Mapping[str, str]  # each field of `data`, and what it holds


_ENDPOINT = {
    "endpoint_id": "the endpoint the event is about (never the one it is delivered to)",
    "url": "that endpoint's URL (never its secrets)",
    "reason": "why, in a sentence",
}
_SPELL = {
    "failing_since": "the first failed attempt of the failing spell (RFC 3339)",
    "failing_for_seconds": "how long the spell had lasted when the event was sent",
    "notice_id": "the id of the notice (the same as the platform team's SNS notice)",
    "last_failure": "the newest failed attempt: `at`, `delivery_id`, `status_code`, `error` (or null)",
}

CATALOGUE: Mapping[PlatformEventType, PlatformEventSpec] = {
    PlatformEventType.ENDPOINT_FAILING: PlatformEventSpec(
        "every delivery to the endpoint has failed for a day, and again at three days (one event each)",
        {**_ENDPOINT, **_SPELL, "notice": "`failing_1d` or `failing_3d`", "disable_at": "when it will be disabled"},
    ),
    PlatformEventType.ENDPOINT_DISABLED: PlatformEventSpec(
        "the platform disabled the endpoint after failing for the whole auto-disable period",
        {**_ENDPOINT, **_SPELL, "disabled_at": "when it was disabled"},
    ),
    PlatformEventType.ENDPOINT_RECOVERED: PlatformEventSpec(
        "a delivery to an endpoint that was sent `failing` got through: the spell is over",
        {**_ENDPOINT, "failing_since": _SPELL["failing_since"], "recovered_at": "the successful attempt's time"},
    ),
    PlatformEventType.CIRCUIT_OPENED: PlatformEventSpec(
        "failures in a row opened the endpoint's circuit: its deliveries are parked while one probe retries "
        "(sent as the first probe is made, one schedule gap after the opening)",
        {
            **_ENDPOINT,
            "circuit": "`open`",
            "opened_at": "when the circuit opened",
            "consecutive_failures": "the failures in a row that opened it",
            "next_probe_at": "when the first probe is due (about when this event is sent)",
        },
    ),
    PlatformEventType.CIRCUIT_CLOSED: PlatformEventSpec(
        "the probe got through and every parked delivery was released: the circuit is closed",
        {
            **_ENDPOINT,
            "circuit": "`closed`",
            "opened_at": "when the circuit opened",
            "closed_at": "when it closed",
            "probes_made": "failed probes during the outage",
        },
    ),
    PlatformEventType.REDRIVE_COMPLETED: PlatformEventSpec(
        "a redrive re-queued every delivery in its window",
        {
            "redrive_id": "the redrive (`GET /v1/redrives/{id}`)",
            "endpoint_id": "the endpoint redriven (never the one this is delivered to)",
            "status": "which deliveries it replayed: `dead` or `cancelled`",
            "since": "its window's start",
            "until": "its window's end",
            "total": "deliveries in the window",
            "replayed": "replays queued",
            "skipped": "deliveries whose event had expired",
            "completed_at": "when it completed",
        },
    ),
}


@dataclass(frozen=True)
class PlatformNotice:
    """One platform event to emit: to `tenant_id`'s subscribed endpoints, except `about`."""

    tenant_id: str
    type: PlatformEventType
    about: str  # the endpoint the event is about: never a recipient
    key: str  # the transition it reports: the event's id is derived from it (one event per transition)
    data: dict[str, Any]

    @property
    def ordering_key(self) -> str:
        """Events about one endpoint share an ordering key: each gets a `sequence`, so a consumer can drop a stale
        `failing` that arrives after `recovered`."""
        return f"{PREFIX}{self.about}"

    @property
    def request_key(self) -> str:
        """What the event id is derived from: the tenant, the type and the transition."""
        return "\x00".join(("platform", self.tenant_id, self.type.value, self.key))


def notice(tenant_id: str, kind: PlatformEventType, *, about: str, key: str, **data: Any) -> PlatformNotice:
    """A platform event whose `data` has exactly the catalogue's fields for its type."""
    expected = set(CATALOGUE[kind].fields)
    if set(data) != expected:
        raise ValueError(f"{kind.value}: fields {sorted(set(data) ^ expected)} disagree with the catalogue")
    return PlatformNotice(tenant_id, kind, about, key, data)


# --- The transitions' events, each keyed by what identifies its transition ---


def _about_endpoint(endpoint: Endpoint, kind: PlatformEventType, *, key: str, **data: Any) -> PlatformNotice:
    """An event about one endpoint: keyed by the endpoint and its transition's `key`, naming the endpoint."""
    return notice(
        endpoint.tenant_id,
        kind,
        about=endpoint.id,
        key=f"{endpoint.id}:{key}",
        endpoint_id=endpoint.id,
        url=endpoint.url,
        **data,
    )


def circuit_opened(
    endpoint: Endpoint, *, opened_at: datetime, failures: int, next_probe_at: datetime | None
) -> PlatformNotice:
    """Keyed by the opening's time: the same outage's event however often (and by whom) it is emitted."""
    opened = to_rfc3339(opened_at)
    return _about_endpoint(
        endpoint,
        PlatformEventType.CIRCUIT_OPENED,
        key=opened,
        reason=f"{failures} failed attempts in a row: deliveries wait while one probe retries on the schedule",
        circuit="open",
        opened_at=opened,
        consecutive_failures=failures,
        next_probe_at=to_rfc3339(next_probe_at) if next_probe_at else None,
    )


def circuit_closed(endpoint: Endpoint, *, closed_at: datetime) -> PlatformNotice:
    """Keyed by the outage's opening time (kept on the endpoint until it opens again)."""
    opened = to_rfc3339(endpoint.circuit_opened_at) if endpoint.circuit_opened_at else ""
    return _about_endpoint(
        endpoint,
        PlatformEventType.CIRCUIT_CLOSED,
        key=opened,
        reason="a probe got through and every parked delivery was released",
        circuit="closed",
        opened_at=opened or None,
        closed_at=to_rfc3339(closed_at),
        probes_made=endpoint.probes_made,
    )


def recovered(endpoint: Endpoint, *, at: datetime) -> PlatformNotice:
    """Keyed by the failing spell (its start): the spell ends once."""
    assert endpoint.failing_since is not None
    since = to_rfc3339(endpoint.failing_since)
    return _about_endpoint(
        endpoint,
        PlatformEventType.ENDPOINT_RECOVERED,
        key=since,
        reason=f"a delivery got through after failing since {since}",
        failing_since=since,
        recovered_at=to_rfc3339(at),
    )


def redrive_completed(redrive: Redrive, *, total: int, replayed: int, skipped: int, at: datetime) -> PlatformNotice:
    """Keyed by the redrive: it completes once."""
    return notice(
        redrive.tenant_id,
        PlatformEventType.REDRIVE_COMPLETED,
        about=redrive.endpoint_id,
        key=redrive.id,
        redrive_id=redrive.id,
        endpoint_id=redrive.endpoint_id,
        status=redrive.status_filter.value,
        since=to_rfc3339(redrive.since),
        until=to_rfc3339(redrive.until),
        total=total,
        replayed=replayed,
        skipped=skipped,
        completed_at=to_rfc3339(at),
    )


def is_reserved(event_type: str) -> bool:
    """Whether the type is the platform's own (producers may not publish it)."""
    return event_type.startswith(PREFIX)


def names_platform_events(pattern: str) -> bool:
    """Whether an event-type filter asks for platform events explicitly (`*` alone does not)."""
    return pattern.startswith(PREFIX)


def subscribes(filters: Iterable[str], event_type: PlatformEventType) -> bool:
    """Whether an endpoint with these filters receives the platform event type."""
    return any(names_platform_events(p) and filter_matches(p, event_type.value) for p in filters)


def catalogue_table() -> str:
    """The consumer guide's table of platform events (Markdown), from the catalogue."""
    lines = ["| type | sent when | `data` fields |", "|---|---|---|"]
    for kind, spec in CATALOGUE.items():
        fields = "<br>".join(f"`{name}`: {meaning}" for name, meaning in spec.fields.items())
        lines.append(f"| `{kind.value}` | {spec.when} | {fields} |")
    return "\n".join(lines)
