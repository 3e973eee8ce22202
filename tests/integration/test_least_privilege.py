"""Every AWS call a function makes is one its role's statements allow: moto enforces no IAM, so the local check does.

Each function runs as deployed (tests/support/aws.py's `moto_stack`): its own environment, and every call it makes
checked against its statements (local/iam_check.py), refused with AWS's AccessDeniedException when they do not
allow it. This drives every function through its paths, so a call its role lacks fails the path that makes it,
and reports the actions each role grants that no path called.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta

import boto3
import pytest
from botocore.exceptions import ClientError

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.functions import BY_NAME, Access
from local import iam_check
from local.iam_check import IamCheck
from local.lambda_runtime import invoke
from local.sqs_source import poll_once
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform

# Granted and never called by the paths below, each for a reason (the path that calls it, and its test): what the
# report may list, and nothing else. The whole tier's report (tests/conftest.py) prints what no test called.
JUSTIFIED_UNUSED: dict[str, dict[str, str]] = {
    "api": {"dynamodb:DeleteItem": "DELETE /v1/event-types/{name}; idempotency drops a failed request's record"},
    "ingest": {
        "dynamodb:BatchGetItem": "a batch retry reads its keyed items back (test_batch_ingest.py)",
        "dynamodb:DeleteItem": "a delivery parked on arrival is taken back out of the lot (test_crash_points.py)",
    },
    "delivery": {
        "dynamodb:BatchGetItem": "the drain reads which parked deliveries are still in the lot (test_circuit.py)",
        "dynamodb:DeleteItem": "a parked delivery's lot entry goes when it is claimed (test_circuit.py)",
        "dynamodb:Query": "the drain pages through the lot in event order (test_circuit.py)",
        "sqs:SendMessage": "the drain releases parked deliveries to the queue (test_circuit.py)",
        "states:SendTaskFailure": "a retry's delivery record is missing (test_retry_workflow.py)",
        "states:StopExecution": "a retry execution ends when its delivery parks (test_circuit.py)",
        "sts:AssumeRole": "an AWS destination's role is assumed to send to it (test_aws_destinations.py)",
    },
    "sweeper": {
        "dynamodb:DeleteItem": "an ended parked delivery's lot entry goes (test_circuit.py)",
        "states:DescribeExecution": "an open circuit's probe workflow is checked (test_circuit.py)",
        "states:StartExecution": "a lost probe workflow is started again (test_circuit.py)",
    },
    "reconciler": {
        "dynamodb:BatchGetItem": "stranded parked deliveries' circuits are read (test_crash_points.py)",
        "dynamodb:DeleteItem": "a stranded parked delivery is taken back out of the lot (test_crash_points.py)",
        "dynamodb:PutItem": "a stranded delivery whose circuit is still open is parked again (test_crash_points.py)",
        "sqs:SendMessage": "a first message never sent is sent (test_reconciler.py)",
    },
}


@pytest.fixture
def checked() -> Iterator[tuple[Platform, IamCheck]]:
    with moto_stack(retry_schedule="fast") as env:
        check = iam_check.installed()
        assert check is not None
        admin = create_admin_key(env["API_KEYS_TABLE"])
        yield Platform(env=env, admin_token=admin.token), check


def pump_until(platform: Platform, token: str, delivery_id: str, status: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout  # the fast schedule retries within seconds
    while platform.call("GET", f"/v1/deliveries/{delivery_id}", token).json()["status"] != status:
        assert time.monotonic() < deadline, f"{delivery_id} did not become {status}"
        platform.pump()
        time.sleep(0.2)


def drive_every_function(platform: Platform, consumer: ScriptedConsumer) -> None:
    """Each function through its main paths: failures and retries, replays, redrives, the sweeper's disable."""
    tenant_id, token = platform.new_tenant()
    producer = platform.new_key("producer")
    endpoint = platform.new_endpoint(token, consumer.url)
    # An ops endpoint, on a consumer of its own that always answers 200: the redrive's completion and the sweeper's
    # notices are emitted to it as platform events (conditional puts, a message) by the functions that see them.
    ops = ScriptedConsumer()
    platform.new_endpoint(token, ops.url, ["hookrelay.*"])
    since = to_rfc3339(utcnow() - timedelta(minutes=1))
    consumer.queue([Reply(500), Reply(200), Reply(404), Reply(404), Reply(404)])

    event = {"tenant_id": tenant_id, "type": "a", "data": {}}
    first = platform.call("POST", "/v1/events", producer, event, {"idempotency-key": "k1"})
    assert first.status == 202
    pump_until(platform, token, first.json()["delivery_ids"][0], "delivered")  # after one retry
    dying = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "b", "data": {}})
    pump_until(platform, token, dying.json()["delivery_ids"][0], "dead")  # three 404s

    for method, path, body in (
        ("GET", "/v1/deliveries", None),
        ("GET", f"/v1/events/{first.json()['event_id']}", None),
        ("POST", f"/v1/deliveries/{first.json()['delivery_ids'][0]}/replay", None),
        ("POST", f"/v1/endpoints/{endpoint['id']}/test", None),
        ("PATCH", f"/v1/endpoints/{endpoint['id']}", {"description": "x"}),
        ("POST", f"/v1/endpoints/{endpoint['id']}/rotate-secret", {"expire_previous_after_seconds": 0}),
        ("GET", f"/v1/endpoints/{endpoint['id']}/health", None),
    ):
        assert platform.call(method, path, token, body).status < 300, (method, path)
    consumer.default = Reply(200)
    redrive = platform.call(
        "POST", f"/v1/endpoints/{endpoint['id']}/redrive", token, {"since": since}, {"idempotency-key": "r1"}
    )
    assert redrive.status == 202
    while poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive"):
        pass
    platform.pump()

    # A failing endpoint, with a one-second "day": the sweeper warns twice, then disables it.
    consumer.default = Reply(503)
    failing = platform.call("POST", "/v1/events", producer, {"tenant_id": tenant_id, "type": "c", "data": {}})
    platform.pump(max_batches=1)
    for pause in (1.2, 2.0, 2.1, 0.1):
        time.sleep(pause)
        invoke("sweeper", {"source": "aws.events"})
    assert platform.call("GET", f"/v1/endpoints/{endpoint['id']}", token).json()["state"] == "disabled"

    # The reconciler: a lost attempt and a poison message surfaced, recent deliveries read.
    [retrying] = failing.json()["delivery_ids"]
    lost = {"reason": "attempt_lost", "delivery_id": retrying, "tenant_id": tenant_id, "attempt": 2}
    platform.sqs.send_message(QueueUrl=platform.env[schema.DEAD_LETTER_QUEUE.env_var], MessageBody=json.dumps(lost))
    poisoned = {"delivery_id": first.json()["delivery_ids"][0], "tenant_id": tenant_id, "attempt": 1}
    platform.sqs.send_message(
        QueueUrl=platform.env[schema.POISON_QUEUE.env_var],
        MessageBody=json.dumps(poisoned),
        MessageGroupId="g",
        MessageDeduplicationId="d",
    )
    assert invoke("reconciler", {"source": "aws.events"})["surfaced"] == 1

    # A portal session (the API writes it, the authorizer reads it), and the portal's page (which touches nothing).
    opened = platform.call("POST", "/v1/portal-sessions", token, {})
    assert opened.status == 201
    assert platform.call("GET", "/v1/deliveries", opened.json()["token"]).status == 200
    for path in ("/portal", "/portal/app.js"):
        assert platform.call("GET", path, None).status == 200

    spare = platform.call("POST", "/v1/api-keys", platform.admin_token, {"role": "producer"}).json()
    assert platform.call("DELETE", f"/v1/api-keys/{spare['key_id']}", platform.admin_token).status == 204
    platform.pump()
    kinds = {json.loads(request.body)["type"] for request in ops.received}
    ops.close()
    assert {"hookrelay.redrive.completed", "hookrelay.endpoint.failing", "hookrelay.endpoint.disabled"} <= kinds


def test_every_path_of_every_function_runs_within_its_role(
    checked: tuple[Platform, IamCheck], consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call a role lacks raises AccessDeniedException in the path that makes it, failing the drive; the granted
    actions that no path called are reported, and each must be justified."""
    platform, check = checked
    monkeypatch.setenv(schema.ENDPOINT_HEALTH_DAY_SECONDS, "1")
    wiring.reset()
    drive_every_function(platform, consumer)

    called = {call.function for call in check.calls}
    # Every function's paths were run; the portal's page (run above) has no access, so any call of its is denied.
    assert called == {name for name, function in BY_NAME.items() if function.access != Access()}
    unused = {name: actions for name, actions in check.unused().items() if actions}
    report = [f"{name}: {', '.join(actions)}" for name, actions in sorted(unused.items())]
    print("\ngranted and never called:\n  " + "\n  ".join(report or ["nothing"]))
    assert {name: set(actions) for name, actions in unused.items()} == {
        name: set(reasons) for name, reasons in JUSTIFIED_UNUSED.items()
    }


def test_a_grant_taken_away_fails_the_path_that_needs_it() -> None:
    """The reconciler without sqs:ReceiveMessage on the queues it drains: its run fails with AWS's AccessDenied."""
    with moto_stack(revoke=(("reconciler", "sqs:ReceiveMessage"),)), pytest.raises(ClientError) as refused:
        invoke("reconciler", {"source": "aws.events"})
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert "not authorized to perform: sqs:ReceiveMessage" in str(refused.value)
    with moto_stack():  # with the grant, the same run succeeds
        assert invoke("reconciler", {"source": "aws.events"})["surfaced"] == 0


def test_the_portal_is_served_with_the_authorizer_s_own_environment(platform: Platform) -> None:
    """Defect: the authorizer built the portal's session service with the tenants table, which its environment
    does not name (KeyError: 'TENANTS_TABLE', a 500 for every portal request in AWS)."""
    _, token = platform.new_tenant()
    opened = platform.call("POST", "/v1/portal-sessions", token, {})
    assert opened.status == 201
    assert platform.call("GET", "/v1/deliveries", opened.json()["token"]).status == 200


def test_a_keyed_retry_whose_idempotency_record_is_gone_is_answered_from_what_ingest_wrote(
    platform: Platform,
) -> None:
    """Defect: ingest reads the event and its deliveries back on such a retry, and its role had no GetItem on
    either table (AccessDeniedException, a 500 on every such retry in AWS)."""
    tenant_id, _ = platform.new_tenant()
    producer = platform.new_key("producer")
    event = {"tenant_id": tenant_id, "type": "order.created", "data": {"n": 1}}
    first = platform.call("POST", "/v1/events", producer, event, {"idempotency-key": "k-gone"})
    assert first.status == 202
    idempotency = boto3.resource("dynamodb").Table(platform.env[schema.IDEMPOTENCY.env_var])
    for item in idempotency.scan()["Items"]:  # expired after 24 h, or released by a crash
        idempotency.delete_item(Key={"id": item["id"]})
    again = platform.call("POST", "/v1/events", producer, event, {"idempotency-key": "k-gone"})
    assert again.status == 202, again.body
    assert again.json()["event_id"] == first.json()["event_id"]
