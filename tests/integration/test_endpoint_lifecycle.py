"""An endpoint's life after creation: PATCH, disable/enable, delete, secret rotation and health, on moto."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.domain.clock import from_rfc3339, to_rfc3339, utcnow
from hookrelay.domain.lanes import MAX_IN_FLIGHT
from hookrelay.domain.models import Endpoint
from hookrelay.domain.status import DeliveryStatus
from local.sqs_source import poll_once
from tests.support.aws import ingest_reads_endpoints_again
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform
from tests.support.records import seed

PROBLEM = "application/problem+json"


class Tenant:
    """One tenant with a producer key, driving the API the way its own code would."""

    def __init__(self, platform: Platform, name: str = "acme") -> None:
        self.platform = platform
        self.id, self.token = platform.new_tenant(name)
        self.producer = platform.new_key("producer")

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return self.platform.call(method, path, self.token, body)

    def endpoint(self, url: str, **fields: Any) -> dict[str, Any]:
        created = self.call("POST", "/v1/endpoints", {"url": url} | fields)
        assert created.status == 201, created.body
        return created.json()

    def publish(self, event_type: str = "order.updated", ordering_key: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"tenant_id": self.id, "type": event_type, "data": {"n": 1}}
        if ordering_key:
            body["ordering_key"] = ordering_key
        accepted = self.platform.call("POST", "/v1/events", self.producer, body)
        assert accepted.status == 202, accepted.body
        return accepted.json()

    def delivery(self, delivery_id: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/deliveries/{delivery_id}").json()


def stored(tenant: Tenant, endpoint_id: str) -> Endpoint:
    endpoint = wiring.endpoint_service().endpoints.get(tenant.id, endpoint_id)
    assert endpoint is not None
    return endpoint


def run_redrive_jobs(platform: Platform) -> None:
    while poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive"):
        pass


def signatures(request_headers: dict[str, str]) -> list[str]:
    return request_headers["webhook-signature"].split(" ")


# --- PATCH ---


def test_patch_changes_only_what_is_given_and_never_shows_the_secret(platform: Platform) -> None:
    tenant = Tenant(platform)
    created = tenant.endpoint("http://127.0.0.1:9/a", event_types=["order.*"], description="orders")

    changed = tenant.call(
        "PATCH", f"/v1/endpoints/{created['id']}", {"url": "http://127.0.0.1:9/b", "event_types": ["invoice.paid"]}
    )
    assert changed.status == 200, changed.body
    view = changed.json()
    assert "secret" not in view
    assert (view["url"], view["event_types"], view["description"]) == (
        "http://127.0.0.1:9/b",
        ["invoice.paid"],
        "orders",
    )
    assert view["max_in_flight"] == created["max_in_flight"] and view["updated_at"] > created["updated_at"]
    assert tenant.call("GET", f"/v1/endpoints/{created['id']}").json() == view

    cleared = tenant.call("PATCH", f"/v1/endpoints/{created['id']}", {"description": None}).json()
    assert cleared["description"] is None and cleared["url"] == "http://127.0.0.1:9/b"
    # The new filter applies to the next event: order.updated no longer matches, invoice.paid does.
    assert tenant.publish("order.updated")["delivery_ids"] == []
    assert len(tenant.publish("invoice.paid")["delivery_ids"]) == 1


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({}, 422),  # nothing to change
        ({"url": "ftp://127.0.0.1/x"}, 422),
        ({"url": "http://user:secret@127.0.0.1/x"}, 422),  # credentials in the URL
        ({"url": None}, 422),
        ({"event_types": []}, 422),
        ({"event_types": ["not a type!"]}, 422),
        ({"max_in_flight": 0}, 422),
        ({"max_in_flight": MAX_IN_FLIGHT + 1}, 422),
        ({"max_in_flight": None}, 422),
        ({"secret": "whsec_mine"}, 422),  # not a field: secrets change only by rotation
        (b"{not json", 400),
    ],
)
def test_patch_is_validated_like_create(platform: Platform, body: Any, status: int) -> None:
    tenant = Tenant(platform)
    endpoint = tenant.endpoint("http://127.0.0.1:9/a")
    response = tenant.call("PATCH", f"/v1/endpoints/{endpoint['id']}", body)
    assert response.status == status, response.body
    assert response.headers["content-type"] == PROBLEM
    assert tenant.call("GET", f"/v1/endpoints/{endpoint['id']}").json() == {
        k: v for k, v in endpoint.items() if k not in ("secret", "key_type")
    }


def test_a_new_max_in_flight_sets_the_message_groups_of_new_deliveries_only(platform: Platform) -> None:
    tenant = Tenant(platform)
    endpoint = tenant.endpoint("http://127.0.0.1:9/a", max_in_flight=1)
    [before] = tenant.publish(ordering_key="k-0")["delivery_ids"]

    patched = tenant.call("PATCH", f"/v1/endpoints/{endpoint['id']}", {"max_in_flight": MAX_IN_FLIGHT}).json()
    assert patched["max_in_flight"] == MAX_IN_FLIGHT
    ingest_reads_endpoints_again()  # the change applies to the events ingest accepts once its kept list expired
    after = [tenant.publish(ordering_key=f"k-{i}")["delivery_ids"][0] for i in range(12)]

    log = wiring.delivery_log_service().deliveries
    assert log.get(before, tenant.id).message_group_id == f"{endpoint['id']}#0"  # queued before: keeps its group
    slots = {int(log.get(d, tenant.id).message_group_id.rsplit("#", 1)[1]) for d in after}
    assert len(slots) > 1 and slots <= set(range(MAX_IN_FLIGHT))


# --- disable and enable ---


def test_a_disabled_endpoint_s_deliveries_are_cancelled_visible_and_redrivable_after_enabling(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint(consumer.url)["id"]
    disabled = tenant.call("POST", f"/v1/endpoints/{endpoint_id}/disable")
    assert disabled.status == 200 and disabled.json()["state"] == "disabled"
    again = tenant.call("POST", f"/v1/endpoints/{endpoint_id}/disable")
    assert again.status == 200 and again.json() == disabled.json()  # idempotent: nothing rewritten

    accepted = tenant.publish()
    [missed] = accepted["delivery_ids"]
    assert platform.pump() == 0 and consumer.received == []  # recorded, never enqueued
    cancelled = tenant.call("GET", "/v1/deliveries?status=cancelled").json()["data"]
    assert [(d["id"], d["event_id"], d["attempt_count"]) for d in cancelled] == [(missed, accepted["event_id"], 0)]
    assert cancelled[0]["completed_at"] is not None

    window = {"since": to_rfc3339(utcnow() - timedelta(hours=1)), "status": "cancelled"}
    for path, body in ((f"/v1/deliveries/{missed}/replay", None), (f"/v1/endpoints/{endpoint_id}/redrive", window)):
        refused = tenant.call("POST", path, body)
        assert refused.status == 409 and refused.headers["content-type"] == PROBLEM, (path, refused.body)

    enabled = tenant.call("POST", f"/v1/endpoints/{endpoint_id}/enable")
    assert enabled.status == 200 and enabled.json()["state"] == "enabled"
    redrive = tenant.call("POST", f"/v1/endpoints/{endpoint_id}/redrive", window)
    assert redrive.status == 202 and redrive.json()["status"] == "running", redrive.body
    run_redrive_jobs(platform)
    platform.pump()

    [request] = consumer.wait_for(1)
    assert request.headers["webhook-id"] == accepted["event_id"]
    replays = tenant.call("GET", f"/v1/deliveries?event_id={accepted['event_id']}").json()["data"]
    assert {(d["status"], d["replay_of"]) for d in replays} == {("cancelled", None), ("delivered", missed)}


def test_a_delivery_queued_before_the_disable_is_cancelled_when_its_attempt_comes_up(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint(consumer.url)["id"]
    [queued] = tenant.publish()["delivery_ids"]
    tenant.call("POST", f"/v1/endpoints/{endpoint_id}/disable")

    assert platform.pump() == 1
    assert consumer.received == [] and tenant.delivery(queued)["status"] == "cancelled"


# --- delete ---


def test_a_deleted_endpoint_is_hidden_shown_as_deleted_and_never_delivered_to(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint(consumer.url)["id"]
    kept_id = tenant.endpoint(consumer.url + "/kept")["id"]
    accepted = tenant.publish()
    pending = next(d for d in accepted["delivery_ids"] if tenant.delivery(d)["endpoint_id"] == endpoint_id)

    deleted = tenant.call("DELETE", f"/v1/endpoints/{endpoint_id}")
    assert deleted.status == 204 and deleted.body in ("", b"", None)
    assert [e["id"] for e in tenant.call("GET", "/v1/endpoints").json()["data"]] == [kept_id]
    shown = tenant.call("GET", f"/v1/endpoints/{endpoint_id}")
    assert shown.status == 200 and shown.json()["state"] == "deleted" and shown.json()["signing_secrets"] == []
    assert stored(tenant, endpoint_id).secrets == []  # nothing will be signed for it again
    ingest_reads_endpoints_again()  # the delete applies to the events ingest accepts once its kept list expired

    later = tenant.publish()
    assert [tenant.delivery(d)["endpoint_id"] for d in later["delivery_ids"]] == [kept_id]
    platform.pump()
    assert tenant.delivery(pending)["status"] == "cancelled"  # its attempt came up after the delete
    assert all(r.path == "/hook/kept" for r in consumer.wait_for(2))

    for method, path, body in (
        ("PATCH", f"/v1/endpoints/{endpoint_id}", {"description": "back"}),
        ("POST", f"/v1/endpoints/{endpoint_id}/enable", None),
        ("POST", f"/v1/endpoints/{endpoint_id}/disable", None),
        ("POST", f"/v1/endpoints/{endpoint_id}/rotate-secret", None),
        ("POST", f"/v1/endpoints/{endpoint_id}/test", None),
        ("POST", f"/v1/deliveries/{pending}/replay", None),
    ):
        refused = tenant.call(method, path, body)
        assert refused.status == 409 and refused.headers["content-type"] == PROBLEM, (method, path, refused.body)

    assert tenant.call("DELETE", f"/v1/endpoints/{endpoint_id}").status == 204  # again: harmless
    # Its deliveries stay in the log, and its health still reads.
    logged = tenant.call("GET", f"/v1/deliveries?endpoint_id={endpoint_id}").json()["data"]
    assert [d["id"] for d in logged] == [pending]
    assert tenant.call("GET", f"/v1/endpoints/{endpoint_id}/health").json()["counts"]["cancelled"] == 1


# --- secret rotation ---


def test_during_the_overlap_each_delivery_carries_both_signatures_and_afterwards_only_the_new_one(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    created = tenant.endpoint(consumer.url)
    old_secret = created["secret"]

    rotated = tenant.call(
        "POST", f"/v1/endpoints/{created['id']}/rotate-secret", {"expire_previous_after_seconds": 3600}
    )
    assert rotated.status == 200, rotated.body
    new_secret = rotated.json()["secret"]
    assert new_secret.startswith("whsec_") and new_secret != old_secret
    expires = from_rfc3339(rotated.json()["previous_secrets_expire_at"])
    assert timedelta(minutes=59) < expires - utcnow() <= timedelta(hours=1)
    assert [s["expires_at"] for s in rotated.json()["signing_secrets"]] == [to_rfc3339(expires), None]
    assert "secret" not in tenant.call("GET", f"/v1/endpoints/{created['id']}").json()

    tenant.publish()
    platform.pump()
    [during] = consumer.wait_for(1)
    assert len(signatures(during.headers)) == 2
    for secret in (old_secret, new_secret):
        assert Webhook(secret).verify(during.body, during.headers)["type"] == "order.updated"

    # The overlap ends (as if an hour had passed): the old secret stops signing.
    endpoint = stored(tenant, created["id"])
    old = replace(endpoint.secrets[0], expires_at=utcnow() - timedelta(seconds=1))
    wiring.endpoint_service().endpoints.put(replace(endpoint, secrets=[old, *endpoint.secrets[1:]]))
    tenant.publish()
    platform.pump()
    after = consumer.wait_for(2)[1]
    assert len(signatures(after.headers)) == 1
    assert Webhook(new_secret).verify(after.body, after.headers)["type"] == "order.updated"
    with pytest.raises(WebhookVerificationError):
        Webhook(old_secret).verify(after.body, after.headers)

    # The expired secret leaves the record on the next write.
    assert len(stored(tenant, created["id"]).secrets) == 2
    tenant.call("PATCH", f"/v1/endpoints/{created['id']}", {"description": "rotated"})
    assert [s.secret for s in stored(tenant, created["id"]).secrets] == [new_secret]


def test_rotation_without_overlap_retires_the_old_secret_at_once(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    tenant = Tenant(platform)
    created = tenant.endpoint(consumer.url)
    rotated = tenant.call("POST", f"/v1/endpoints/{created['id']}/rotate-secret", {"expire_previous_after_seconds": 0})
    assert rotated.status == 200 and len(rotated.json()["signing_secrets"]) == 1
    assert [s.secret for s in stored(tenant, created["id"]).secrets] == [rotated.json()["secret"]]

    tenant.publish()
    platform.pump()
    [request] = consumer.wait_for(1)
    assert len(signatures(request.headers)) == 1
    Webhook(rotated.json()["secret"]).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(created["secret"]).verify(request.body, request.headers)


def test_rotation_defaults_validates_and_caps_the_active_secrets(platform: Platform) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint("http://127.0.0.1:9/a")["id"]
    path = f"/v1/endpoints/{endpoint_id}/rotate-secret"

    default = tenant.call("POST", path)  # no body: a day's overlap
    expires = from_rfc3339(default.json()["previous_secrets_expire_at"])
    assert default.status == 200 and timedelta(hours=23, minutes=59) < expires - utcnow() <= timedelta(days=1)
    for seconds in (-1, 7 * 86400 + 1, "soon"):
        invalid = tenant.call("POST", path, {"expire_previous_after_seconds": seconds})
        assert invalid.status == 422 and invalid.headers["content-type"] == PROBLEM

    # A shorter overlap brings the earlier deadline forward; a longer one never pushes it back.
    tenant.call("POST", path, {"expire_previous_after_seconds": 600})
    soon = [s.expires_at for s in stored(tenant, endpoint_id).secrets]
    assert soon[0] is not None and soon[0] - utcnow() <= timedelta(minutes=10)
    tenant.call("POST", path, {"expire_previous_after_seconds": 3600})
    assert [s.expires_at for s in stored(tenant, endpoint_id).secrets][:2] == soon[:2]

    assert tenant.call("POST", path, {"expire_previous_after_seconds": 600}).status == 200
    assert len(stored(tenant, endpoint_id).active_secrets(utcnow())) == 5
    capped = tenant.call("POST", path, {"expire_previous_after_seconds": 600})
    assert capped.status == 409 and capped.headers["content-type"] == PROBLEM
    assert len(stored(tenant, endpoint_id).secrets) == 5
    # Retiring every previous secret at once is always possible.
    assert tenant.call("POST", path, {"expire_previous_after_seconds": 0}).status == 200
    assert len(stored(tenant, endpoint_id).secrets) == 1


# --- health ---


def test_health_summarises_a_scripted_mix_of_responses(platform: Platform, consumer: ScriptedConsumer) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint(consumer.url, max_in_flight=1)["id"]  # one FIFO group: attempts in order
    an_hour_ago = utcnow() - timedelta(hours=1)
    old_dead = seed(tenant.id, endpoint_id, an_hour_ago, DeliveryStatus.DEAD)
    seed(tenant.id, endpoint_id, an_hour_ago + timedelta(seconds=5), DeliveryStatus.CANCELLED)
    consumer.queue([Reply(200), Reply(500), Reply(200), Reply(404), Reply(503)])
    ids = [tenant.publish()["delivery_ids"][0] for _ in range(5)]
    platform.pump()
    consumer.wait_for(5)

    response = tenant.call("GET", f"/v1/endpoints/{endpoint_id}/health")
    assert response.status == 200, response.body
    health = response.json()
    assert health["counts"] == {
        "queued": 0,
        "attempting": 0,
        "delivered": 2,
        "retrying": 3,
        "dead": 1,
        "cancelled": 1,
    }
    assert health["sample"] == {"size": 7, "limit": 100, "older_not_sampled": False}
    assert health["success_rate"] == round(2 / 3, 4)  # delivered / (delivered + dead); cancelled not sent
    assert health["last_delivered_at"] == tenant.delivery(ids[2])["completed_at"]
    failure = health["last_failure"]
    assert (failure["delivery_id"], failure["status_code"], failure["error"]) == (ids[4], 503, None)
    assert failure["at"] == tenant.delivery(ids[4])["attempts"][0]["started_at"]
    assert health["consecutive_failures"] == 2  # the 503 and the 404, back to the 200
    assert health["oldest_retrying"]["delivery_id"] == ids[1]
    assert health["oldest_retrying"]["next_attempt_at"] == tenant.delivery(ids[1])["next_attempt_at"]
    assert old_dead.delivery.id not in {failure["delivery_id"], health["oldest_retrying"]["delivery_id"]}


def test_health_of_an_endpoint_with_no_deliveries(platform: Platform) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint("http://127.0.0.1:9/a")["id"]
    health = tenant.call("GET", f"/v1/endpoints/{endpoint_id}/health").json()
    assert set(health["counts"].values()) == {0} and health["sample"]["size"] == 0
    assert health["success_rate"] is None and health["last_failure"] is None and health["oldest_retrying"] is None
    assert health["consecutive_failures"] == 0 and health["state"] == "enabled"


# --- tenant isolation ---


def test_every_lifecycle_route_answers_404_for_another_tenant_s_endpoint(platform: Platform) -> None:
    owner, stranger = Tenant(platform, "owner"), Tenant(platform, "stranger")
    endpoint = owner.endpoint("http://127.0.0.1:9/owner")
    routes = (
        ("PATCH", "", {"description": "mine now"}),
        ("POST", "/disable", None),
        ("POST", "/enable", None),
        ("POST", "/rotate-secret", {"expire_previous_after_seconds": 0}),
        ("GET", "/health", None),
        ("DELETE", "", None),
    )
    for method, suffix, body in routes:
        response = stranger.call(method, f"/v1/endpoints/{endpoint['id']}{suffix}", body)
        assert response.status == 404 and response.headers["content-type"] == PROBLEM, (method, suffix)

    untouched = owner.call("GET", f"/v1/endpoints/{endpoint['id']}").json()
    assert untouched == {k: v for k, v in endpoint.items() if k not in ("secret", "key_type")}
    assert [s.secret for s in stored(owner, endpoint["id"]).secrets] == [endpoint["secret"]]


@pytest.mark.parametrize("token_kind", ["admin", "producer"])
def test_lifecycle_routes_are_for_tenant_keys(platform: Platform, token_kind: str) -> None:
    tenant = Tenant(platform)
    endpoint_id = tenant.endpoint("http://127.0.0.1:9/a")["id"]
    token = platform.admin_token if token_kind == "admin" else tenant.producer
    for method, suffix in (("PATCH", ""), ("DELETE", ""), ("POST", "/disable"), ("GET", "/health")):
        response = platform.call(method, f"/v1/endpoints/{endpoint_id}{suffix}", token, {"description": "x"})
        assert response.status == 403, (method, suffix)
