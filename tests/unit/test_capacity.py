"""The capacity model (bench/capacity.py) and its check by simulation (bench/simulation.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from bench.capacity import DOCS_PATH, Workload, assess, docs, load_profile
from bench.quotas import all_quotas
from bench.simulation import compare


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
        if a.quota.key == "lambda_concurrency":  # all functions': the authorizer's part is the same at both rates
            authorizer = one.concurrency["authorizer"]
            assert b.demand - authorizer == pytest.approx(10 * (a.demand - authorizer), rel=1e-9)
            continue
        assert b.demand == pytest.approx(10 * a.demand, rel=1e-9), a.quota.key
    assert one.saturates_at(one.first) == pytest.approx(ten.saturates_at(ten.first))


def test_a_larger_tenant_share_heats_its_partitions_and_nothing_else(profile: dict) -> None:
    small = assess(Workload(1_000, largest_tenant_share=0.1), profile)
    large = assess(Workload(1_000, largest_tenant_share=0.5), profile)
    hot = {where: units for where, _, units in small.hot_partitions}
    hotter = {where: units for where, _, units in large.hot_partitions}
    assert hotter["Deliveries/by_tenant"] == pytest.approx(5 * hot["Deliveries/by_tenant"])
    by_key = {d.quota.key: d.demand for d in small.demands}
    for d in large.demands:
        if d.quota.key not in ("api_key_rate", "endpoint_groups", "dynamodb_partition_wcu"):
            assert d.demand == pytest.approx(by_key[d.quota.key]), d.quota.key


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
