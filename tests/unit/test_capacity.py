"""The capacity model (bench/capacity.py) and its check by simulation (bench/simulation.py)."""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import pytest

from bench.capacity import (
    BATCH_SLOWEST,
    CALL_MS,
    COMPUTE_MS,
    DEPLOYMENT,
    DOCS_PATH,
    ENDPOINT,
    HEADROOM,
    RATE_COUNTERS,
    SLOW_TAIL_WRITES_PER_MESSAGE,
    Deployment,
    Workload,
    assess,
    code_deployment,
    counted_limit,
    delivery_calls_per_message,
    docs,
    drifted,
    endpoint_read_units,
    endpoint_reads_per_message,
    lanes,
    list_reads,
    load_profile,
    size,
    standard_workloads,
    tail_marks_bytes,
)
from bench.quotas import all_quotas, stage_context
from bench.simulation import compare
from hookrelay.domain.lanes import MAX_IN_FLIGHT
from hookrelay.domain.queues import MAX_DELIVERY_SHARDS
from hookrelay.domain.rate_limit import REQUESTS_PER_COUNTER, counter_shards
from hookrelay.services.endpoint_lists import ENDPOINT_LIST_SECONDS


@pytest.fixture(scope="module")
def profile() -> dict:
    return load_profile()


def test_docs_capacity_is_generated_from_the_model_and_current(profile: dict) -> None:
    assert DOCS_PATH.read_text() == docs(profile), "docs/capacity.md is stale: make capacity ARGS=--write-docs"


def test_utilisation_is_linear_in_the_event_rate(profile: dict) -> None:
    one = assess(Workload(1_000, fanout=3, failing_share=0.01), profile)
    ten = assess(Workload(10_000, fanout=3, failing_share=0.01), profile)
    for a, b in zip(one.demands, ten.demands, strict=True):
        if a.quota.key.startswith("sfn_") or a.quota.key == "authorizer_reserved":
            # outages' workflows: per endpoint in an outage; the authorizer: per key and cache TTL; not per event
            assert b.demand == pytest.approx(a.demand), a.quota.key
            continue
        if a.key in ("delivery_max_concurrency", "sqs_fifo_ht_tps"):  # the busiest shard's: its busiest endpoint's
            # part is bounded by that endpoint's message groups
            assert a.demand < b.demand <= 10 * a.demand * (1 + 1e-9)
            continue
        if a.key == "dynamodb_key_wcu":  # the key's counter: writes linear in the rate, over one item per 1,000
            # requests a second of the per-key limit that admits them, which grows with the rate
            shards = [
                counter_shards(counted_limit(x.demand("api_key_rate").demand, x.demand("api_key_rate").quota.limit))
                for x in (one, ten)
            ]
            assert b.demand * shards[1] == pytest.approx(10 * a.demand * shards[0], rel=1e-9)
            continue
        if a.quota.key == "lambda_concurrency":  # all functions': the authorizer's part is the same at both rates
            authorizer = one.concurrency["authorizer"]
            assert b.demand - authorizer == pytest.approx(10 * (a.demand - authorizer), rel=1e-9)
            continue
        assert b.demand == pytest.approx(10 * a.demand, rel=1e-9), a.quota.key
    assert one.saturates_at(one.first) == pytest.approx(ten.saturates_at(ten.first))


def test_a_producer_key_s_rate_limit_counter_is_spread_over_the_shards_of_its_limit(profile: dict) -> None:
    """The issue's tenant: its producer key at 50,000 requests a second. Its counter's writes go over one item per
    1,000 requests a second of a per-key limit that admits them: the deployment's, or the limit sized for them."""
    workload = Workload(100_000, largest_tenant_share=0.5, busiest_endpoint_share=0.02)
    deployment = replace(code_deployment(), log_shards=64)
    key_rps = assess(workload, profile, deployment=deployment).demand("api_key_rate").demand
    assert key_rps == pytest.approx(50_000)
    quotas = all_quotas()
    for limit, shards in ((quotas["api_key_rate"].limit, 63), (62_500, 63), (100_000, 100)):  # refused: sized
        lifted = {**quotas, "api_key_rate": replace(quotas["api_key_rate"], limit=limit)}
        hot = {where: units for where, _, units in assess(workload, profile, lifted, deployment).hot_partitions}
        assert counter_shards(counted_limit(key_rps, limit)) == shards
        assert hot[RATE_COUNTERS] == pytest.approx(key_rps / shards)  # a write a request, as measured
    sized = size(workload, profile).assessment
    assert sized.demand("dynamodb_key_wcu").demand <= REQUESTS_PER_COUNTER / HEADROOM


def test_the_busiest_endpoint_takes_no_more_of_its_shard_than_its_message_groups_let_through(profile: dict) -> None:
    """One endpoint taking half of 100,000 events a second: its groups (max_in_flight) bound what it holds of its
    shard's event source, so the queue shards are sized, not over a cap (that endpoint's own deliveries wait)."""
    half = Workload(100_000, largest_tenant_share=0.5)
    sizing = size(half, profile)
    assert not sizing.over_caps
    assert sizing.assessment.demand("endpoint_groups").utilisation > 1  # reported: that endpoint lags
    capped = lanes(profile, half, sizing.deployment, max_in_flight=50)
    uncapped = lanes(profile, half, sizing.deployment)
    assert capped.busiest_source < uncapped.busiest_source


def test_a_larger_tenant_share_heats_its_partitions_and_nothing_else(profile: dict) -> None:
    small = assess(Workload(1_000, largest_tenant_share=0.1), profile)
    large = assess(Workload(1_000, largest_tenant_share=0.5), profile)
    hot = {where: units for where, _, units in small.hot_partitions}
    hotter = {where: units for where, _, units in large.hot_partitions}
    assert hotter["EventLog/-"] == pytest.approx(5 * hot["EventLog/-"])  # the tenant's log
    by_key = {d.key: d.demand for d in small.demands}
    # the tenant's own key and endpoint; the log's partitions; the queue shard its busiest endpoint is on
    heated = ("api_key_rate", "endpoint_groups", "dynamodb_partition_wcu", "dynamodb_key_wcu", "dynamodb_partition_rcu")
    for d in large.demands:
        if d.key in (*heated, "delivery_max_concurrency", "sqs_fifo_ht_tps"):
            assert d.demand >= by_key[d.key], d.key
        else:
            assert d.demand == pytest.approx(by_key[d.key]), d.key


def test_the_stack_limits_are_read_from_the_code_that_sets_them() -> None:
    from hookrelay.handlers.schemas import CreateEndpoint
    from stacks.constructs.api import Api

    quotas = all_quotas()
    assert quotas["stage_throttle"].limit == Api.THROTTLE.rate_limit
    assert quotas["stage_throttle"].burst == Api.THROTTLE.burst_limit
    # What the API tells a client the field accepts (its OpenAPI schema), not the same introspection quotas.py does.
    field = CreateEndpoint.model_json_schema()["properties"]["max_in_flight"]
    [bound] = [choice["maximum"] for choice in field["anyOf"] if "maximum" in choice]
    assert quotas["endpoint_groups"].limit == bound
    assert all(q.source for q in quotas.values())


def test_nothing_is_lost_when_quotas_throttle() -> None:
    for name, workload, _, _, _, _, outcome in compare():
        assert outcome.first, f"{name}: the ramp passed the model's first saturation, yet nothing throttled"
        assert outcome.accepted > 0
        # every accepted event delivered to each of its endpoints, once, after the outage and the drain
        assert outcome.delivered == outcome.accepted * workload.fanout, name


def test_the_simulation_throttles_first_where_the_model_saturates_first() -> None:
    rows = compare()
    agree = [row for row in rows if row[2] == row[4]]
    print("\n" + "\n".join(f"{r[0]}: model {r[2]} at {r[3]:,.0f}/s, simulation {r[4]} at {r[5]:,.0f}/s" for r in rows))
    assert len(agree) >= 3
    for _, _, _, model_rate, _, sim_rate, _ in agree:
        assert math.isfinite(sim_rate) and 0.5 * model_rate <= sim_rate <= 2 * model_rate


def test_raising_the_first_bottleneck_moves_the_first_elsewhere(profile: dict) -> None:
    quotas = all_quotas()
    before = assess(Workload(1_000), profile, quotas)
    lifted = {**quotas, before.first.quota.key: replace(before.first.quota, limit=before.first.quota.limit * 1e6)}
    after = assess(Workload(1_000), profile, lifted)
    assert after.first.quota.key != before.first.quota.key


@pytest.mark.parametrize("workload", [Workload(100_000, fanout=1), Workload(10_000, fanout=10)])
def test_sized_the_first_limit_for_every_tenant_is_an_aws_quota_raised_on_request(
    profile: dict, workload: Workload
) -> None:
    """The issue's two workloads: with the settings the model gives, nothing is over a cap, and what saturates
    first is an account quota AWS raises on request (the increase named with the settings)."""
    sizing = size(workload, profile)
    first = sizing.first
    assert first.quota.service != "hookrelay" and "not adjustable" not in first.quota.adjustable, first.key
    assert first.utilisation > 1  # one to raise, at AWS's default
    assert first.key in sizing.requests
    assert not sizing.over_caps
    for d in sizing.assessment.demands:
        if d.scope == DEPLOYMENT and (d.quota.service == "hookrelay" or "not adjustable" in d.quota.adjustable):
            assert d.utilisation <= 1 / HEADROOM + 1e-9, d.key  # ours and the fixed ones, a quarter to spare


def test_log_shards_keep_every_log_partition_under_its_limit_when_one_tenant_sends_half(profile: dict) -> None:
    workload = Workload(100_000, largest_tenant_share=0.5)
    sizing = size(workload, profile)
    assert sizing.deployment.log_shards >= 50 * HEADROOM  # 50,000 entries a second on the tenant's index
    log = next(d for d in sizing.assessment.demands if d.key == "dynamodb_partition_wcu")
    assert log.demand <= 1_000 / HEADROOM
    halved = assess(
        workload, profile, deployment=replace(sizing.deployment, log_shards=sizing.deployment.log_shards * 2)
    )
    assert halved.demand("dynamodb_partition_wcu").demand == pytest.approx(log.demand / 2)


def test_batches_cut_the_fast_lane_s_gb_seconds_and_the_slow_lane_pays_its_latency(profile: dict) -> None:
    fast = Workload(10_000, endpoint_latency_ms=20)
    one = lanes(profile, fast, Deployment(2, 1000, 4, 1))
    ten = lanes(profile, fast, Deployment(2, 1000, 4, 10))
    assert ten.gb_seconds_per_delivery < one.gb_seconds_per_delivery / 5
    # a tenth of the endpoints timing out: a tenth of the messages, one at a time, for the timeout each
    slow = lanes(profile, replace(fast, slow_share=0.1, slow_latency_ms=8_000), Deployment(2, 1000, 4, 10))
    assert slow.slow_messages == pytest.approx(0.1 * (one.fast_messages + one.slow_messages))
    assert slow.slow_seconds > 8.0 and slow.slow_concurrency > 50 * ten.fast_concurrency / 10


def test_queue_shards_divide_each_event_source_s_concurrency_but_the_busiest_endpoint_s(profile: dict) -> None:
    spread = Workload(10_000, fanout=10, busiest_endpoint_share=0.0)
    two, four = (lanes(profile, spread, Deployment(n, 1000, 4, 10)) for n in (2, 4))
    assert four.busiest_source == pytest.approx(two.busiest_source / 2)
    hot = Workload(10_000, largest_tenant_share=0.5)  # one endpoint takes half: its shard carries it whatever N
    assert (
        lanes(profile, hot, Deployment(64, 1000, 4, 10)).busiest_source
        > lanes(profile, hot, Deployment(64, 1000, 4, 10)).fast_concurrency / 2
    )


def test_the_deployment_is_the_stage_file_s_and_the_code_s() -> None:
    from hookrelay.functions import DELIVERY, queue_trigger

    context = stage_context()
    deployment = code_deployment()
    assert deployment.log_shards == context["log_shards"]
    assert deployment.source_max_concurrency == context["delivery_max_concurrency"]
    batch = queue_trigger(DELIVERY).batch_size
    assert deployment.fast_batch == batch or batch == 1  # the design's batch until the code batches


def _with_delivery_invocations(profile: dict, scenario: str, per_event: float) -> dict:
    """The profile as if the scenario's delivery function had run `per_event` invocations an event, each one receive
    and one delete (the event source's), with the same calls in all."""
    changed = copy.deepcopy(profile)
    measured = changed["scenarios"][scenario]
    calls = measured["invocations"]["delivery"] * measured["calls_per_invocation"]["delivery"]
    measured["invocations"]["delivery"] = per_event
    measured["calls_per_invocation"]["delivery"] = round(calls / per_event, 3)
    for key in ("sqs:ReceiveMessage:fifo", "sqs:DeleteMessageBatch:fifo"):
        measured["calls"][key] = per_event
    return changed


def test_the_outage_s_delivery_invocations_ride_on_its_workflow_loop_not_checked_for_drift(profile: dict) -> None:
    assert drifted(_with_delivery_invocations(profile, "outage", 1.85), profile) == []


def test_the_happy_path_s_delivery_invocations_are_checked_for_drift(profile: dict) -> None:
    found = drifted(_with_delivery_invocations(profile, "happy", 1.85), profile)
    assert "/scenarios/happy/invocations/delivery: measured 1.85, committed" in "\n".join(found)


def test_the_outage_s_storage_writes_are_still_checked_for_drift(profile: dict) -> None:
    changed = copy.deepcopy(profile)
    changed["scenarios"]["outage"]["calls"]["dynamodb:UpdateItem"] *= 2
    assert any(line.startswith("/scenarios/outage/calls/dynamodb:UpdateItem") for line in drifted(changed, profile))


def _with_swaps(profile: dict, scenario: str, puts: int, updates: int) -> dict:
    """The profile as if the scenario had made `puts` more PutItem and `updates` more UpdateItem calls in all."""
    changed = copy.deepcopy(profile)
    measured = changed["scenarios"][scenario]
    for key, more in (("dynamodb:PutItem", puts), ("dynamodb:UpdateItem", updates)):
        measured["calls"][key] = measured["calls"].get(key, 0) + more / measured["events"]
    return changed


def test_late_claims_a_loaded_machine_makes_are_not_a_drift(profile: dict) -> None:
    """Two first attempts claimed late in the fan-out: two settles' puts become two claims and two settles."""
    assert drifted(_with_swaps(profile, "fanout", -2, 4), profile) == []


@pytest.mark.parametrize(("puts", "updates"), [(0, 4), (-2, 2), (-1, 4)])
def test_writes_that_are_not_whole_late_claims_are_a_drift(profile: dict, puts: int, updates: int) -> None:
    found = drifted(_with_swaps(profile, "fanout", puts, updates), profile)
    assert any(line.startswith("/scenarios/fanout/calls/dynamodb:") for line in found), found


def test_a_tenants_list_reads_are_bounded_by_ingests_containers_not_its_requests() -> None:
    assert list_reads(0, 100) == 0
    # a container sees the tenant once a minute: nearly every request finds its list expired, and reads it
    assert list_reads(100, 6_000) == pytest.approx(100, rel=ENDPOINT_LIST_SECONDS / 60)
    # 50,000 requests a second over 4,500 containers: each reads about once per lifetime, not 11 times a second
    busy = list_reads(50_000, 4_500)
    assert 4_500 / ENDPOINT_LIST_SECONDS * 0.9 < busy < 4_500 / ENDPOINT_LIST_SECONDS


def test_a_slow_busiest_endpoint_s_messages_write_their_groups_tails_not_its_item(profile: dict) -> None:
    """With slow endpoints in the workload, the busiest is counted among them: each of its messages is named in its
    group's tail and deleted from it, the writes spread over its groups; its item, read by every message, carries
    every group's mark. None of it without (tests/integration/test_delivery_lanes.py meters a forward on moto)."""
    fast = assess(Workload(100_000, largest_tenant_share=0.5, busiest_endpoint_share=0.02), profile)
    slow = assess(Workload(100_000, largest_tenant_share=0.5, busiest_endpoint_share=0.02, slow_share=0.01), profile)
    assert fast.demand("endpoint_slow_tails").demand == 0
    in_flight = slow.demand("endpoint_groups").demand
    groups = math.ceil(in_flight)
    tails = slow.demand("endpoint_slow_tails")
    assert tails.demand == pytest.approx(1_000 * SLOW_TAIL_WRITES_PER_MESSAGE / groups)  # 1,000 deliveries a second
    assert tails.scope == ENDPOINT and tails.utilisation < 0.01
    # its item's reads: the fast lane's (every group's mark still within a unit), and the slow lane's, one a message
    extra = slow.demand("dynamodb_partition_rcu").demand - fast.demand("dynamodb_partition_rcu").demand
    assert endpoint_read_units(groups) == endpoint_read_units(0) == 1
    assert extra == pytest.approx(1_000, rel=0.05)


def test_a_fast_batch_reads_an_endpoint_once_for_its_groups_first_messages() -> None:
    assert endpoint_reads_per_message(10, 50) == pytest.approx(0.1)  # ten messages over many groups: one read
    assert endpoint_reads_per_message(10, 4) == pytest.approx(0.7)  # four groups: their later six read again
    assert endpoint_reads_per_message(0.2, 50) == 1  # batches of other endpoints' messages: a read each


def test_a_busy_endpoint_s_item_reads_fall_with_the_batch_s_shared_read(profile: dict) -> None:
    """10,000 deliveries a second to one endpoint: a read a message would be 11,086 RCU/s with ingest's; its batches
    share it, the more of them the more of its shard's messages it has (the sized deployment's shards)."""
    w = Workload(100_000, largest_tenant_share=0.5, busiest_endpoint_share=0.2)
    assert assess(w, profile).demand("dynamodb_partition_rcu").demand < 10_000 * 0.7
    assert size(w, profile).assessment.demand("dynamodb_partition_rcu").utilisation < 1


def test_an_endpoint_s_marks_at_its_most_groups_keep_its_item_within_one_read_unit() -> None:
    assert tail_marks_bytes(MAX_IN_FLIGHT) == 2_890  # slots 0 to 999
    assert endpoint_read_units(MAX_IN_FLIGHT) == endpoint_read_units(0) == 1


def test_the_sizer_gives_no_more_queue_shards_than_the_stack_takes_and_says_when_a_workload_needs_more(
    profile: dict,
) -> None:
    """domain/queues.py refuses more than MAX_DELIVERY_SHARDS: a setting past it is no setting to give."""
    for w in standard_workloads():
        sizing = size(w, profile)
        assert sizing.deployment.queue_shards <= MAX_DELIVERY_SHARDS, w
        busiest = sizing.assessment.lanes.busiest_source  # type: ignore[union-attr]
        if "delivery_shards" not in sizing.over_caps:
            assert (
                busiest
                <= sizing.settings["delivery_max_concurrency"]
                <= all_quotas()["sqs_event_source_concurrency"].limit
            )
    for w in (Workload(100_000, fanout=1), Workload(10_000, fanout=10)):  # the two: within the cap
        assert not size(w, profile).over_caps
    assert "delivery_shards" in size(Workload(100_000, fanout=10), profile).over_caps  # a million deliveries a second


def test_a_fast_batch_lasts_its_slowest_answer_and_one_message_s_calls_not_the_whole_batch_s(profile: dict) -> None:
    """The batch's groups are handled at once, each on a thread with its own calls: the happy scenario's delivery
    invocations make 30 calls for their 10 messages, 3 a message, and a batch waits on one message's."""
    happy = profile["scenarios"]["happy"]
    per_message = delivery_calls_per_message(profile)
    invocation = happy["calls_per_invocation"]["delivery"]
    messages = happy["deliveries"] / happy["events"] / happy["invocations"]["delivery"]
    assert messages > 1 and per_message < invocation
    assert per_message == pytest.approx(invocation / messages)
    w = Workload(10_000, endpoint_latency_ms=200)
    fast = lanes(profile, w, code_deployment())
    assert fast.fast_seconds == pytest.approx(0.2 * BATCH_SLOWEST + (per_message * CALL_MS + COMPUTE_MS) / 1000)


def test_the_outage_s_calls_parked_in_flight_are_timing_but_a_call_more_per_event_is_drift(profile: dict) -> None:
    """A few PutItem calls more or fewer in the outage's 40 events (first attempts in flight when the circuit opens,
    parked by the delivery function) are timing; the event's own put coming back (a call per event) is not."""
    calls = profile["scenarios"]["outage"]["calls"]
    for moved, is_drift in ((0.1, False), (-0.1, False), (1.0, True)):
        changed = copy.deepcopy(profile)
        changed["scenarios"]["outage"]["calls"]["dynamodb:PutItem"] = calls["dynamodb:PutItem"] + moved
        found = [
            line for line in drifted(changed, profile) if line.startswith("/scenarios/outage/calls/dynamodb:PutItem")
        ]
        assert bool(found) is is_drift, (moved, found)
