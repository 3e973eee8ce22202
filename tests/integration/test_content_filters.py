"""Content filters on moto, through the API and ingest functions as deployed (issue 29 item 4): an event a filter
excludes records nothing for that endpoint while another endpoint gets it; a bad filter is a 422 naming its pointer;
the filter is shown, changed and cleared through the API, the client and the CLI."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import boto3
import jsonschema
import pytest
import yaml
from hookrelay_client import HookrelayClient, HookrelayError
from hookrelay_client.cli import main
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from hookrelay.adapters.dynamodb import DeliveryTable, EndpointTable
from hookrelay.domain.clock import utcnow
from hookrelay.domain.limits import MAX_FILTER_DEPTH, MAX_FILTER_IN_VALUES
from hookrelay.domain.models import Delivery
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import DeliveryFilter
from tests.support.consumer import ScriptedConsumer
from tests.support.gateway_adapter import GATEWAY_URL, gateway_session
from tests.support.platform import Platform

DOCUMENT = Path(__file__).resolve().parents[2] / "openapi" / "openapi.yaml"
_REGISTRY = Registry().with_resource("urn:openapi", DRAFT202012.create_resource(yaml.safe_load(DOCUMENT.read_text())))


def conforms(body: Any, path: str, method: str, status: int) -> None:
    """The response body matches what openapi.yaml says this operation answers."""
    pointer = "/paths/" + path.replace("/", "~1") + f"/{method}/responses/{status}/content/application~1json/schema"
    jsonschema.Draft202012Validator({"$ref": f"urn:openapi#{pointer}"}, registry=_REGISTRY).validate(body)


BIG_ORDERS = {"data.amount": {"$gte": 100}, "data.currency": {"$in": ["EUR", "USD"]}}


def deliveries_of(tenant_id: str, endpoint_id: str) -> list[Delivery]:
    """The endpoint's deliveries, as its log reads them (a queued one may have no record yet)."""
    resource = boto3.resource("dynamodb")
    log = DeliveryTable(resource.Table(os.environ["DELIVERIES_TABLE"]), resource.Table(os.environ["EVENT_LOG_TABLE"]))
    return log.find(DeliveryFilter(tenant_id=tenant_id, endpoint_id=endpoint_id), 100, None, utcnow()).deliveries


def create(platform: Platform, token: str, body: dict[str, Any]) -> Any:
    return platform.call("POST", "/v1/endpoints", token, {"url": "http://127.0.0.1:9/hook", **body})


def problem_pointer(answer: Any) -> str:
    assert answer.status == 422, answer.body
    assert answer.headers["content-type"] == "application/problem+json"
    (error,) = answer.json()["errors"]
    pointer: str = error["pointer"]
    return pointer


@pytest.fixture
def tenant(platform: Platform) -> tuple[str, str, str]:
    tenant_id, token = platform.new_tenant()
    return tenant_id, token, platform.new_key("producer")


def test_an_excluded_event_records_nothing_for_the_filtered_endpoint_while_another_gets_it(
    platform: Platform, tenant: tuple[str, str, str], consumer: ScriptedConsumer
) -> None:
    tenant_id, token, producer = tenant
    filtered = create(platform, token, {"url": consumer.url, "event_types": ["order.*"], "filter": BIG_ORDERS}).json()
    everything = platform.new_endpoint(token, consumer.url, ["*"])

    small = {"tenant_id": tenant_id, "type": "order.paid", "data": {"amount": 5, "currency": "EUR"}}
    big = {"tenant_id": tenant_id, "type": "order.paid", "data": {"amount": 500, "currency": "EUR"}}
    excluded = platform.call("POST", "/v1/events", producer, small)
    passed = platform.call("POST", "/v1/events", producer, big)

    assert excluded.status == 202 and passed.status == 202
    deliveries = DeliveryTable(
        boto3.resource("dynamodb").Table(os.environ["DELIVERIES_TABLE"]),
        boto3.resource("dynamodb").Table(os.environ["EVENT_LOG_TABLE"]),
    )
    excluded_to = [deliveries.get(d, tenant_id).endpoint_id for d in excluded.json()["delivery_ids"]]
    passed_to = sorted(deliveries.get(d, tenant_id).endpoint_id for d in passed.json()["delivery_ids"])
    assert excluded_to == [everything["id"]]  # the answer lists no delivery for the filtered endpoint
    assert passed_to == sorted([filtered["id"], everything["id"]])
    # Nothing recorded for the excluded event at that endpoint, not even a cancelled delivery.
    recorded = deliveries_of(tenant_id, filtered["id"])
    assert [delivery.event_id for delivery in recorded] == [passed.json()["event_id"]]
    listed = platform.call("GET", f"/v1/deliveries?endpoint_id={filtered['id']}", token).json()["data"]
    assert [d["event_id"] for d in listed] == [passed.json()["event_id"]]

    platform.pump()
    sent = [json.loads(request.body)["id"] for request in consumer.wait_for(3)]
    assert sorted(sent) == sorted([excluded.json()["event_id"], *[passed.json()["event_id"]] * 2])


def test_a_batch_is_filtered_item_by_item(platform: Platform, tenant: tuple[str, str, str]) -> None:
    tenant_id, token, producer = tenant
    filtered = create(platform, token, {"filter": {"data.n": {"$in": [1, 3]}}}).json()
    events = [{"type": "tick", "data": {"n": n}} for n in range(4)]

    answer = platform.call("POST", "/v1/events/batch", producer, {"tenant_id": tenant_id, "events": events})

    assert answer.status == 200, answer.body
    assert [len(item["delivery_ids"]) for item in answer.json()["results"]] == [0, 1, 0, 1]
    assert len(deliveries_of(tenant_id, filtered["id"])) == 2


def test_a_disabled_endpoints_filter_still_decides_what_is_recorded_cancelled(
    platform: Platform, tenant: tuple[str, str, str]
) -> None:
    tenant_id, token, producer = tenant
    endpoint = create(platform, token, {"filter": {"type": "wanted"}}).json()
    assert platform.call("POST", f"/v1/endpoints/{endpoint['id']}/disable", token).status == 200

    for event_type in ("wanted", "unwanted"):
        body = {"tenant_id": tenant_id, "type": event_type, "data": {}}
        assert platform.call("POST", "/v1/events", producer, body).status == 202

    recorded = [(d.event_type, d.status) for d in deliveries_of(tenant_id, endpoint["id"])]
    assert recorded == [("wanted", DeliveryStatus.CANCELLED)]


@pytest.mark.parametrize(
    ("bad_filter", "pointer"),
    [
        ({"data.amount": {"$regex": "^1"}}, "/filter/data.amount/$regex"),
        (
            {"$or": [{"type": "a"}, {"data.x": {"$in": list(range(MAX_FILTER_IN_VALUES + 1))}}]},
            "/filter/$or/1/data.x/$in",
        ),
        (
            {"$not": {"$not": {"$not": {"$not": {"$not": {"$not": {"$not": {"$not": {"a": 1}}}}}}}}},
            "/filter" + "/$not" * MAX_FILTER_DEPTH,
        ),
        ({"data": {"amount": 1}}, "/filter/data/amount"),
    ],
)
def test_a_bad_filter_is_a_422_naming_its_pointer_on_create_and_on_change(
    platform: Platform, tenant: tuple[str, str, str], bad_filter: dict[str, Any], pointer: str
) -> None:
    _, token, _ = tenant
    assert problem_pointer(create(platform, token, {"filter": bad_filter})) == pointer
    endpoint = create(platform, token, {"filter": {"type": "kept"}}).json()

    refused = platform.call("PATCH", f"/v1/endpoints/{endpoint['id']}", token, {"filter": bad_filter})

    assert problem_pointer(refused) == pointer
    assert platform.call("GET", f"/v1/endpoints/{endpoint['id']}", token).json()["filter"] == {"type": "kept"}


def test_a_filter_that_is_no_object_is_a_422_naming_the_field(platform: Platform, tenant: tuple[str, str, str]) -> None:
    _, token, _ = tenant
    answer = create(platform, token, {"filter": ["type", "a"]})
    assert answer.status == 422 and [e["field"] for e in answer.json()["errors"]] == ["filter"]


def test_the_filter_is_shown_changed_kept_and_cleared(platform: Platform, tenant: tuple[str, str, str]) -> None:
    tenant_id, token, _ = tenant
    created = create(platform, token, {"filter": BIG_ORDERS})
    assert created.status == 201 and created.json()["filter"] == BIG_ORDERS
    conforms(created.json(), "/v1/endpoints", "post", 201)
    path = f"/v1/endpoints/{created.json()['id']}"
    shown = platform.call("GET", path, token).json()
    assert shown["filter"] == BIG_ORDERS
    conforms(shown, "/v1/endpoints/{endpoint_id}", "get", 200)
    assert platform.call("GET", "/v1/endpoints", token).json()["data"][0]["filter"] == BIG_ORDERS
    # Stored as compact JSON text: numbers stay JSON numbers (no DynamoDB Decimal on the way back).
    stored = EndpointTable(boto3.resource("dynamodb").Table(os.environ["ENDPOINTS_TABLE"])).get(
        tenant_id, created.json()["id"]
    )
    assert stored is not None and stored.content_filter == json.dumps(BIG_ORDERS, separators=(",", ":"))

    kept = platform.call("PATCH", path, token, {"description": "orders"})
    assert kept.json()["filter"] == BIG_ORDERS
    changed = platform.call("PATCH", path, token, {"filter": {"data.amount": {"$lt": 1.5}}})
    assert changed.status == 200 and changed.json()["filter"] == {"data.amount": {"$lt": 1.5}}
    cleared = platform.call("PATCH", path, token, {"filter": None})
    assert cleared.status == 200 and cleared.json()["filter"] is None
    assert platform.call("GET", path, token).json()["filter"] is None
    conforms(cleared.json(), "/v1/endpoints/{endpoint_id}", "patch", 200)
    assert create(platform, token, {}).json()["filter"] is None


def test_the_client_and_the_cli_set_show_and_clear_the_filter(platform: Platform, tenant: tuple[str, str, str]) -> None:
    _, token, _ = tenant
    client = HookrelayClient(GATEWAY_URL, token, session=gateway_session())
    endpoint = client.create_endpoint("http://127.0.0.1:9/hook", ["order.*"], filter=BIG_ORDERS)
    assert endpoint.filter == BIG_ORDERS and client.get_endpoint(endpoint.id).filter == BIG_ORDERS
    assert client.update_endpoint(endpoint.id, description="d").filter == BIG_ORDERS  # left out: kept
    assert client.update_endpoint(endpoint.id, filter=None).filter is None
    with pytest.raises(HookrelayError) as refused:
        client.update_endpoint(endpoint.id, filter={"data.x": {"$nope": 1}})
    assert refused.value.problem.status == 422
    assert refused.value.problem.errors == [
        {"pointer": "/filter/data.x/$nope", "detail": refused.value.problem.errors[0]["detail"]}
    ]

    common = ["--api-url", GATEWAY_URL, "--token", token]
    output = io.StringIO()
    argv = [*common, "endpoints", "update", endpoint.id, "--filter", '{"data.amount": {"$gt": 9}}']
    assert main(argv, session=gateway_session(), stdout=output) == 0
    assert 'filter         {"data.amount":{"$gt":9}}' in output.getvalue()
    output = io.StringIO()
    assert main([*common, "endpoints", "show", endpoint.id], session=gateway_session(), stdout=output) == 0
    assert '{"data.amount":{"$gt":9}}' in output.getvalue()
    argv = [*common, "--json", "endpoints", "update", endpoint.id, "--clear-filter"]
    assert main(argv, session=gateway_session(), stdout=io.StringIO()) == 0
    assert client.get_endpoint(endpoint.id).filter is None


@pytest.mark.parametrize("levels", [MAX_FILTER_DEPTH + 1, 200, 900])
def test_a_filter_nested_past_the_cap_is_a_422_at_the_level_past_it_never_a_500(
    platform: Platform, tenant: tuple[str, str, str], levels: int
) -> None:
    _, token, _ = tenant
    nested: dict[str, Any] = {"data.a": 1}
    for _ in range(levels - 1):
        nested = {"$not": nested}
    assert problem_pointer(create(platform, token, {"filter": nested})) == "/filter" + "/$not" * MAX_FILTER_DEPTH


def test_a_long_in_list_is_refused_naming_it(platform: Platform, tenant: tuple[str, str, str]) -> None:
    _, token, _ = tenant
    long_in = {"$and": [{"type": "a"}, {"data.id": {"$in": list(range(20_000))}}]}
    assert problem_pointer(create(platform, token, {"filter": long_in})) == "/filter/$and/1/data.id/$in"
