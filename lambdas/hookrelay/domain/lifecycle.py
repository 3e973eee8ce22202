"""The lifecycle of events and deliveries: how each is made, and how long each is kept.

Every service that creates an event or a delivery (ingest, replay, redrive, the test event) and every one
that ends a delivery goes through these rules, so that an event can never expire before a delivery of it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from hookrelay.domain import ids
from hookrelay.domain.circuit import CircuitState, Via, park_order, parks_new_deliveries
from hookrelay.domain.clock import RETENTION_DAYS, epoch_seconds, truncate_to_milliseconds
from hookrelay.domain.envelope import envelope_body, message_group_id
from hookrelay.domain.errors import Conflict
from hookrelay.domain.models import Delivery, Endpoint, EndpointState, Event
from hookrelay.domain.status import CLAIMABLE_STATUSES, DeliveryStatus
from hookrelay.domain.trace_context import TraceContext


def retention_expiry(ended_at: datetime) -> int:
    """When a record that ended (a delivery delivered, dead or cancelled) leaves the redrive window."""
    return epoch_seconds(ended_at + timedelta(days=RETENTION_DAYS))


def event_expiry(now: datetime, horizon_seconds: float) -> int:
    """How long an event must live for a delivery of it started now: its whole retry horizon, then retention.

    Set when the event is stored and pushed on by every later delivery of it (replays, redrives); a
    delivery that ends pushes it to that delivery's own `retention_expiry`.
    """
    return retention_expiry(now + timedelta(seconds=horizon_seconds))


def is_expired(expires_at: int | None, now: datetime) -> bool:
    """Expired records are gone as far as readers are concerned, even before TTL deletes them."""
    return expires_at is not None and expires_at <= epoch_seconds(now)


def new_event(
    *,
    tenant_id: str,
    event_type: str,
    data: dict[str, Any],
    now: datetime,
    horizon_seconds: float,
    ordering_key: str | None = None,
    sequence: int | None = None,
    event_id: str | None = None,
    trace: TraceContext | None = None,
) -> Event:
    """An event with its envelope serialised once: those exact bytes are signed and sent on every attempt.

    `event_id` when the request names it (derived from its `Idempotency-Key`): a retry converges on it. `trace`: the
    W3C trace context it is sent in (domain/trace_context.py)."""
    event_id = event_id or ids.id_at("evt", now)  # timed at the event's own millisecond: the event log's key
    body = envelope_body(
        event_id=event_id,
        event_type=event_type,
        timestamp=now,
        data=data,
        ordering_key=ordering_key,
        sequence=sequence,
    )
    return Event(
        id=event_id,
        tenant_id=tenant_id,
        type=event_type,
        timestamp=now,
        ordering_key=ordering_key,
        sequence=sequence,
        body=body,
        expires_at=event_expiry(now, horizon_seconds),
        traceparent=trace.traceparent if trace else None,
        tracestate=trace.tracestate if trace else None,
    )


def queued_delivery(
    event: Event, endpoint: Endpoint, now: datetime, *, delivery_id: str | None = None, replay_of: str | None = None
) -> Delivery:
    """A new delivery of the event to the endpoint, in the endpoint's message group; replays name their original."""
    return Delivery(
        id=delivery_id or ids.delivery_id(),
        tenant_id=event.tenant_id,
        endpoint_id=endpoint.id,
        event_id=event.id,
        event_type=event.type,
        status=DeliveryStatus.QUEUED,
        message_group_id=message_group_id(endpoint.id, endpoint.max_in_flight, event.ordering_key, event.id),
        created_at=now,
        updated_at=now,
        replay_of=replay_of,
        event_order=park_order(event.timestamp, event.id),
        queue_shard=endpoint.queue_shard,
        trace_id=event.trace.trace_id if event.traceparent else None,  # derived from the event id otherwise
    )


_FAN_OUT = "fan-out"


def fan_out_id(event: Event, endpoint: Endpoint) -> str:
    """The id of the event's (first) delivery to the endpoint: derived, so that re-running the fan-out of an
    event (a producer's retry under its `Idempotency-Key`) finds the deliveries the first run wrote, and so that
    the delivery log finds an event's fan-out from the event and the tenant's endpoints, with no index."""
    return fan_out_delivery_id(event.timestamp, event.id, endpoint.id)


def fan_out_delivery_id(event_timestamp: datetime, event_id: str, endpoint_id: str) -> str:
    """`fan_out_id` from the ids alone (the event log lists an event's fan-out by its endpoints' ids)."""
    return ids.derived_delivery_id(event_timestamp, _FAN_OUT, event_id, endpoint_id)


def is_fan_out(delivery: Delivery) -> bool:
    """Whether the delivery is its event's fan-out to its endpoint (the one `fan_out_id` names), rather than a
    replay or any other delivery of the event made later."""
    return ids.is_derived_delivery_id(delivery.id, _FAN_OUT, delivery.event_id, delivery.endpoint_id)


def unstored_fan_out(event: Event, endpoint_id: str, message_group_id: str, queue_shard: int) -> Delivery:
    """The event's fan-out delivery to the endpoint as ingest made it and, for a logged event (one published without
    an idempotency key), left unstored: queued, created at the event's time, in the message group it was sent in.
    Such a delivery's record is written by the first write that changes it (adapters/event_log.py says why); until
    then it is read as this, from its event and what the event's log entry (or its first message) says of it."""
    trace_id = event.trace.trace_id if event.traceparent else None
    return _queued_fan_out(
        event.tenant_id, event.id, event.type, event.timestamp, trace_id, endpoint_id, message_group_id, queue_shard
    )


def may_stay_unstored(delivery: Delivery) -> bool:
    """Whether the delivery is exactly what `unstored_fan_out` reads back of it from its logged event: its event's
    fan-out, queued, never attempted, parked, posted or claimed, created in its event's millisecond (the one its
    id is timed at, which the log stores). Only such a delivery may be left unstored."""
    at = delivery.created_at
    return ids.moment_of(delivery.event_id) == truncate_to_milliseconds(at) and delivery == _queued_fan_out(
        delivery.tenant_id,
        delivery.event_id,
        delivery.event_type,
        at,
        delivery.trace_id,
        delivery.endpoint_id,
        delivery.message_group_id,
        delivery.queue_shard,
    )


def _queued_fan_out(
    tenant_id: str,
    event_id: str,
    event_type: str,
    at: datetime,
    trace_id: str | None,
    endpoint_id: str,
    message_group_id: str,
    queue_shard: int,
) -> Delivery:
    return Delivery(
        id=fan_out_delivery_id(at, event_id, endpoint_id),
        tenant_id=tenant_id,
        endpoint_id=endpoint_id,
        event_id=event_id,
        event_type=event_type,
        status=DeliveryStatus.QUEUED,
        message_group_id=message_group_id,
        created_at=at,
        updated_at=at,
        event_order=park_order(at, event_id),
        queue_shard=queue_shard,
        trace_id=trace_id,
    )


def new_delivery(event: Event, endpoint: Endpoint, now: datetime) -> Delivery:
    """`queued` for an enabled endpoint. For a disabled one, recorded `cancelled` and never sent: the tenant
    sees what it missed while the endpoint was off, and redrives `status=cancelled` after re-enabling it."""
    delivery = queued_delivery(event, endpoint, now, delivery_id=fan_out_id(event, endpoint))
    if endpoint.state is EndpointState.ENABLED:
        return delivery
    return replace(delivery, status=DeliveryStatus.CANCELLED, completed_at=now, expires_at=retention_expiry(now))


def parked_on_arrival(delivery: Delivery, endpoint: Endpoint, now: datetime) -> Delivery:
    """A new delivery as ingest writes it: parked from the start when its endpoint's circuit stands (open or
    draining), so that an outage costs no message, no invocation and no endpoint read per event; the drain releases
    it in event order with the others. Otherwise as it came."""
    if (
        delivery.status is DeliveryStatus.QUEUED
        and endpoint.state is EndpointState.ENABLED
        and parks_new_deliveries(endpoint.circuit)
    ):
        return replace(delivery, parked_at=now)
    return delivery


def parkable(delivery: Delivery, tenant_id: str, endpoint_id: str, attempt_number: int | None) -> bool:
    """Whether the delivery may be parked behind the tenant's endpoint while it waits for attempt `attempt_number`
    (None: whichever it waits for): not parked, claimable, with the attempts before it made."""
    made = attempt_number is None or delivery.attempt_count == attempt_number - 1
    free = delivery.parked_at is None and delivery.status in CLAIMABLE_STATUSES
    return made and free and (delivery.tenant_id, delivery.endpoint_id) == (tenant_id, endpoint_id)


def parked(delivery: Delivery, at: datetime) -> Delivery:
    """The delivery parked behind its endpoint's circuit at `at`. A record made before the circuit existed has no
    event order: it sorts by when it parked."""
    return replace(delivery, parked_at=at, event_order=delivery.event_order or park_order(at, delivery.id))


def _never_attempted(delivery: Delivery) -> bool:
    return delivery.status is DeliveryStatus.QUEUED and delivery.attempt_count == 0


def awaits_first_message(delivery: Delivery) -> bool:
    """A delivery whose first message may never have been sent (a crash between recording it and enqueueing it):
    queued, never attempted, not parked. Sending it (again) is harmless: the claim admits one first attempt."""
    return _never_attempted(delivery) and delivery.parked_at is None and delivery.posted_at is None


def parked_before_first_attempt(delivery: Delivery) -> bool:
    """Queued, never attempted, and parked: written parked by ingest (its endpoint's circuit open as the event
    came), or parked by the delivery function as its first message arrived. Its first message is the drain's to
    send; the reconciler looks only at whether its lot entry was left unwritten (`services/reconcile.py`)."""
    return _never_attempted(delivery) and delivery.parked_at is not None


def circuit_stands(endpoint: Endpoint | None) -> bool:
    """Whether parked deliveries stay parked behind the endpoint: it exists, is enabled and its circuit is not
    closed. Otherwise they come back out (a closed circuit is neither swept nor drained)."""
    return (
        endpoint is not None and endpoint.state is EndpointState.ENABLED and endpoint.circuit is not CircuitState.CLOSED
    )


def first_attempt_number(delivery: Delivery) -> int:
    """The attempt a new delivery's first message asks for (after a crash, the one it never got to)."""
    return delivery.attempt_count + 1


def ensure_deliverable(endpoint: Endpoint) -> Endpoint:
    """The endpoint, if new deliveries may go to it: 409 when its state forbids it (they would only be cancelled)."""
    if endpoint.state is EndpointState.DELETED:
        raise Conflict(f"endpoint {endpoint.id!r} is deleted")
    if endpoint.state is not EndpointState.ENABLED:
        raise Conflict(f"endpoint {endpoint.id!r} is {endpoint.state.value}: enable it first")
    return endpoint


def is_visible_to(tenant_id: str, record: Delivery | Event | None, now: datetime) -> bool:
    """Whether the tenant may read the record: its own and not expired. Another tenant's record, like an expired
    one, is indistinguishable from a missing one."""
    return record is not None and record.tenant_id == tenant_id and not is_expired(record.expires_at, now)


# --- The first attempt off the queue: recorded and settled by one write, claimed only when it runs long ---
#
# A first attempt from the queue (attempt 1, sent by ingest, a replay, a redrive, the test event or the reconciler)
# is never made by two workers at once: every message for it carries the delivery's own message group, SQS FIFO hands
# a group's messages one at a time, and a message comes back only after its visibility timeout (twice the delivery
# function's timeout, adapters/schema.py), when the invocation that took it has ended. Nothing else writes a queued,
# unparked delivery meanwhile: only its own message parks it (the drain and the probe take parked ones out of the lot,
# with a claim), a retry exists only once attempt 1 is recorded, and a replay or redrive is a delivery of its own. So
# such an attempt needs no claim to keep a second worker out. It reads the delivery, sends, and then one conditional
# write records the attempt and settles the delivery: still claimable with no attempt made and not parked, or
# `attempting` under its own late claim.
#
# `attempting` stays a recorded state: an attempt that has not answered within LATE_CLAIM_AFTER (domain/status.py,
# with its reason) is claimed while it waits (the claim's usual write), so any attempt long enough for anyone to read
# the delivery meanwhile (a log read, the API's `waiting_on.in_flight`) is seen as `attempting`; the settle then
# accepts that form too. Retries, probes and drains claim first, as before: a retry workflow re-sends an unanswered
# attempt, so two executions may carry one delivery for a while (services/delivery.py, `_answer`), and a drained or
# probed delivery is taken out of the parking lot by its claim.
#
# Crash rules (the worker dies ...):
# - before the send: nothing was written; the message comes back after its visibility timeout and is attempted then.
# - after the send, before the settle (no late claim): the delivery is still `queued` with no attempt; the message
#   comes back and the attempt is made again (at least once, as a crash after the send always was).
# - after the late claim, before the settle: the delivery is `attempting` at 1; the message comes back once the claim
#   is stale (older than the function's timeout) and takes it over, as any abandoned claim is, and attempts again.
# - after the settle: as after any record (the message comes back; its claim fails; `_not_claimed` hands it over).


def claims_late(via: Via, attempt_number: int, reply_to: str | None) -> bool:
    """Whether a message's attempt is made unclaimed (claimed only if it runs past LATE_CLAIM_AFTER): a first
    attempt off the queue, with no retry workflow waiting on it."""
    return via is Via.QUEUE and attempt_number == 1 and reply_to is None


def attemptable_unclaimed(delivery: Delivery, tenant_id: str, attempt_number: int) -> bool:
    """Whether the delivery, as read, awaits this attempt with nothing holding it: the tenant's, claimable with the
    attempts before it made, and not parked (the settle write's condition, checked before the send)."""
    return (
        delivery.tenant_id == tenant_id
        and delivery.status in CLAIMABLE_STATUSES
        and delivery.attempt_count == attempt_number - 1
        and delivery.parked_at is None
    )
