"""W3C Trace Context level 1, as the platform reads, starts and passes on a trace (domain/trace_context.py)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from hookrelay.adapters.aws_destinations import MAX_MESSAGE_ATTRIBUTES, _attributes
from hookrelay.domain import custom_headers, trace_context
from hookrelay.domain.schedule import DEFAULT_SCHEDULE
from hookrelay.domain.trace_context import MAX_TRACESTATE_CHARS, MAX_TRACESTATE_MEMBERS, TraceContext
from hookrelay.services.ingest import BatchAccepted, BatchItem, IngestService
from tests.support.builders import T0, TENANT, an_endpoint
from tests.support.fakes import FakeDeliveries, FakeEndpoints, FakeEvents, KnownTenants, RecordingQueue

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
VALID = f"00-{TRACE_ID}-{PARENT_ID}-01"


def test_a_valid_traceparent_is_read_field_by_field() -> None:
    trace = trace_context.parse(VALID, "congo=t61rcWkgMzE")
    assert trace == TraceContext(TRACE_ID, PARENT_ID, 1, "congo=t61rcWkgMzE")
    assert trace.sampled and trace.traceparent == VALID
    assert trace.headers() == {"traceparent": VALID, "tracestate": "congo=t61rcWkgMzE"}


def test_the_unsampled_flag_is_kept_and_unknown_flags_are_not_passed_on() -> None:
    assert trace_context.parse(f"00-{TRACE_ID}-{PARENT_ID}-00") == TraceContext(TRACE_ID, PARENT_ID, 0)
    unknown = trace_context.parse(f"00-{TRACE_ID}-{PARENT_ID}-ff")
    assert unknown is not None and unknown.traceparent == VALID  # only `sampled` is defined in level 1


@pytest.mark.parametrize(
    "malformed",
    [
        "",
        "garbage",
        f"00-{'0' * 32}-{PARENT_ID}-01",  # an all-zero trace id
        f"00-{TRACE_ID}-{'0' * 16}-01",  # an all-zero parent id
        f"ff-{TRACE_ID}-{PARENT_ID}-01",  # version ff is invalid
        f"00-{TRACE_ID.upper()}-{PARENT_ID}-01",  # uppercase hex
        f"00-{TRACE_ID[:-1]}-{PARENT_ID}-01",  # a short trace id
        f"00-{TRACE_ID}-{PARENT_ID}0-01",  # a long parent id
        f"00-{TRACE_ID}-{PARENT_ID}-1",  # one-digit flags
        f"00-{TRACE_ID}-{PARENT_ID}-01-extra",  # version 00 is exactly 55 characters
        f"01-{TRACE_ID}-{PARENT_ID}-01x",  # a later version's extra fields follow a dash
        f"00_{TRACE_ID}_{PARENT_ID}_01",
        f"0-{TRACE_ID}-{PARENT_ID}-01",
    ],
)
def test_a_malformed_traceparent_is_ignored_with_its_tracestate(malformed: str) -> None:
    assert trace_context.parse(malformed, "congo=t61rcWkgMzE") is None


def test_a_later_version_is_read_by_its_first_four_fields_and_sent_as_version_00() -> None:
    trace = trace_context.parse(f"cc-{TRACE_ID}-{PARENT_ID}-01-what-the-future-holds")
    assert trace is not None and trace.traceparent == VALID


def test_no_traceparent_is_no_trace() -> None:
    assert trace_context.parse(None, "congo=t61rcWkgMzE") is None


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (None, None),
        ("", None),
        ("rojo=00f067aa0ba902b7, congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
        ("rojo=1,,congo=2", "rojo=1,congo=2"),  # empty members are allowed, and dropped
        ("tenant@vendor=x", "tenant@vendor=x"),
        ("rojo", None),  # no value
        ("Rojo=1", None),  # keys are lowercase
        ("rojo=1,rojo=2", None),  # a key twice
        ("rojo=a,b", None),  # a comma inside a value makes a member with no `=`
        ("rojo=trailing ", "rojo=trailing"),  # surrounding spaces are the list's, not the value's
    ],
)
def test_a_tracestate_is_passed_on_only_when_well_formed(given: str | None, kept: str | None) -> None:
    assert trace_context.clean_tracestate(given) == kept


def test_a_tracestate_of_too_many_members_is_dropped_and_a_long_one_cut_by_members() -> None:
    too_many = ",".join(f"k{i}=v" for i in range(MAX_TRACESTATE_MEMBERS + 1))
    assert trace_context.clean_tracestate(too_many) is None
    long = ",".join(f"k{i}={'v' * 60}" for i in range(12))  # 12 members of 64 characters: over 512
    kept = trace_context.clean_tracestate(long)
    assert kept is not None and len(kept) <= MAX_TRACESTATE_CHARS
    assert long.startswith(kept) and kept.count(",") == 7  # the first 8 members, whole


def test_a_started_trace_is_random_valid_and_sampled_as_the_platform_says() -> None:
    first, second = trace_context.start(sampled=False), trace_context.start(sampled=True)
    assert first.trace_id != second.trace_id and first.parent_id != second.parent_id
    assert not first.sampled and second.sampled and first.tracestate is None
    for trace in (first, second):
        assert trace_context.parse(trace.traceparent) == trace  # what it sends reads back as itself


def test_a_child_keeps_the_trace_flags_and_state_with_a_new_span_each_time() -> None:
    parent = TraceContext(TRACE_ID, PARENT_ID, 1, "congo=t61rcWkgMzE")
    children = [trace_context.child(parent) for _ in range(3)]
    assert {(c.trace_id, c.flags, c.tracestate) for c in children} == {(TRACE_ID, 1, "congo=t61rcWkgMzE")}
    assert len({c.parent_id for c in children} | {PARENT_ID}) == 4
    assert all(trace_context.parse(c.traceparent, c.tracestate) == c for c in children)


def test_an_endpoint_cannot_set_the_trace_headers_the_platform_sends() -> None:
    for name in ("traceparent", "TraceState"):
        assert custom_headers.refusal(name, has_auth=False) is not None


def test_an_aws_destination_carries_the_trace_only_where_there_is_room() -> None:
    trace = {"traceparent": VALID, "tracestate": "congo=1"}
    signed = {"webhook-id": "evt_1", "webhook-timestamp": "1", "webhook-signature": "v1,x", "content-type": "j"}
    assert dict(_attributes(signed | trace)) == signed | trace
    custom = {f"x-{n}": "v" for n in range(MAX_MESSAGE_ATTRIBUTES - len(signed) - 1)}  # room for one more
    assert dict(_attributes(custom | signed | trace)) == custom | signed | {"traceparent": VALID}
    full = {f"x-{n}": "v" for n in range(MAX_MESSAGE_ATTRIBUTES - len(signed))}
    assert dict(_attributes(full | signed | trace)) == full | signed


def ingest(*, sampled: bool) -> IngestService:
    return IngestService(
        tenants=KnownTenants(TENANT, created_at=T0),
        endpoints=FakeEndpoints(an_endpoint("ep_1")),
        events=FakeEvents(),
        deliveries=FakeDeliveries(),  # type: ignore[arg-type]  # the delivery-log reads are not used here
        queue=RecordingQueue(),
        schedule=DEFAULT_SCHEDULE,
        writer_window=timedelta(minutes=1),
        new_traces_sampled=sampled,
        clock=lambda: T0,
    )


def stored_trace(service: IngestService, event_id: str) -> TraceContext:
    event = service.events.get(TENANT, event_id)
    assert event is not None and event.trace is not None
    return event.trace


@pytest.mark.parametrize("sampled", [False, True])
def test_ingest_starts_a_trace_per_event_sampled_as_the_platform_is_set(sampled: bool) -> None:
    service = ingest(sampled=sampled)
    single = service.publish(tenant_id=TENANT, event_type="a.b", data={}).event_id
    outcomes = service.publish_batch(tenant_id=TENANT, items=[BatchItem("a.b", {})] * 2)
    batch = [outcome.event_id for outcome in outcomes if isinstance(outcome, BatchAccepted)]
    traces = [stored_trace(service, event_id) for event_id in (single, *batch)]
    assert len({t.trace_id for t in traces}) == 3 and {t.sampled for t in traces} == {sampled}


def test_ingest_keeps_the_producers_trace_and_its_deliveries_name_it() -> None:
    service = ingest(sampled=False)
    given = TraceContext(TRACE_ID, PARENT_ID, 1, "congo=1")
    accepted = service.publish(tenant_id=TENANT, event_type="a.b", data={}, trace=given)
    assert stored_trace(service, accepted.event_id) == given
    [delivery_id] = accepted.delivery_ids
    delivery = service.deliveries.get(delivery_id)
    assert delivery is not None and delivery.trace_id == TRACE_ID


def test_a_keyed_retry_keeps_the_trace_its_first_request_stored() -> None:
    service = ingest(sampled=False)
    first = TraceContext(TRACE_ID, PARENT_ID, 1)
    retried = trace_context.child(first)  # a producer's retry: its own new span
    event_id = service.publish(tenant_id=TENANT, event_type="a.b", data={}, request_key="k", trace=first).event_id
    again = service.publish(tenant_id=TENANT, event_type="a.b", data={}, request_key="k", trace=retried).event_id
    assert again == event_id and stored_trace(service, event_id) == first


def test_the_consumer_guide_and_openapi_state_the_rules_the_code_keeps() -> None:
    root = Path(__file__).resolve().parents[2]
    guide = (root / "docs" / "consumer-guide.md").read_text()
    section = guide[guide.index("### Trace context") :]
    section = section[: section.index("\n### ", 1)]
    assert f"at most {MAX_TRACESTATE_CHARS} characters" in section
    assert "`traceparent`" in section and "`span_id`" in section and "`trace_id`" in section
    parameters = yaml.safe_load((root / "openapi" / "openapi.yaml").read_text())["components"]["parameters"]
    assert parameters["Traceparent"]["name"] == trace_context.TRACEPARENT_HEADER
    assert parameters["Tracestate"]["name"] == trace_context.TRACESTATE_HEADER
    assert f"cut to {MAX_TRACESTATE_CHARS}" in parameters["Tracestate"]["description"]


def test_an_unsampled_platform_trace_is_derived_from_the_event_and_stored_nowhere() -> None:
    service = ingest(sampled=False)
    accepted = service.publish(tenant_id=TENANT, event_type="a.b", data={})
    event = service.events.get(TENANT, accepted.event_id)
    assert event is not None and event.traceparent is None and event.tracestate is None
    assert event.trace == trace_context.derived(accepted.event_id) and not event.trace.sampled
    [delivery_id] = accepted.delivery_ids
    delivery = service.deliveries.get(delivery_id)
    assert delivery is not None and delivery.trace_id is None
    assert delivery.event_trace_id == event.trace.trace_id


def test_a_derived_trace_and_an_attempts_span_are_valid_stable_and_distinct() -> None:
    trace = trace_context.derived("evt_1")
    assert trace_context.parse(trace.traceparent) == trace  # a valid traceparent, as any other
    assert trace == trace_context.derived("evt_1") and trace.trace_id != trace_context.derived("evt_2").trace_id
    spans = {trace_context.attempt_span_id("dlv_1", number) for number in (1, 2, 3)}
    spans.add(trace_context.attempt_span_id("dlv_2", 1))
    assert len(spans) == 4 and all(len(span) == 16 and span.strip("0") for span in spans)
    assert trace_context.attempt_span_id("dlv_1", 2) == trace_context.attempt_span_id("dlv_1", 2)
