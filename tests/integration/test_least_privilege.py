"""Every AWS call a function makes is one its IAM grants allow.

moto does not enforce IAM, so a function that calls something its role lacks passes every other test and
fails in AWS. This runs each function through its paths on moto, records the AWS calls made inside each
invocation (attributed by `local.lambda_runtime.RUNNING`), and checks them against the function's entry in
`Access` in the table of functions (`hookrelay.functions`), which the stack's grants are made from.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import boto3
import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.functions import BY_NAME, Access, TableAccess
from local.lambda_runtime import RUNNING, invoke
from local.provision import queue_name
from local.sqs_source import poll_once
from scripts.create_admin_key import create_admin_key
from tests.support.aws import moto_stack
from tests.support.consumer import Reply, ScriptedConsumer
from tests.support.platform import Platform

READS = {"GetItem", "Query", "Scan", "BatchGetItem"}
TABLE_OPERATIONS: dict[TableAccess, set[str]] = {
    TableAccess.READ: READS,
    TableAccess.WRITE: {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"},
    TableAccess.READ_WRITE: READS | {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"},
    TableAccess.READ_UPDATE: READS | {"UpdateItem"},
    TableAccess.READ_REWRITE: READS | {"PutItem", "UpdateItem"},
}


@dataclass(frozen=True)
class Call:
    function: str
    service: str
    operation: str
    resource: str


class CallRecorder:
    def __init__(self) -> None:
        self.calls: set[Call] = set()

    def __call__(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        function = RUNNING.get()
        if function is None:  # the event source, the test itself, or Step Functions' own tasks
            return
        service, operation = model.service_model.service_name, model.name
        for resource in self._resources(params):
            self.calls.add(Call(function, service, operation, resource))

    @staticmethod
    def _resources(params: dict[str, Any]) -> list[str]:
        for key in ("TableName", "QueueUrl", "stateMachineArn", "TopicArn"):
            if key in params:
                return [params[key]]
        if "RequestItems" in params:
            return list(params["RequestItems"])
        if "TransactItems" in params:  # each item is authorized as its own action on its own table
            return [next(iter(item.values()))["TableName"] for item in params["TransactItems"]]
        if "taskToken" in params:
            return ["task-token"]
        return ["*"]


def allowed(access: Access, env: dict[str, str], call: Call) -> bool:
    if call.service == "dynamodb":
        mode = next((m for spec, m in access.tables.items() if env[spec.env_var] == call.resource), None)
        # Our transactions hold updates only: IAM authorizes each as dynamodb:UpdateItem on its table.
        operation = "UpdateItem" if call.operation == "TransactWriteItems" else call.operation
        return mode is not None and operation in TABLE_OPERATIONS[mode]
    if call.service == "sqs":
        queue = call.resource.rsplit("/", 1)[-1]
        if call.operation in {"SendMessage", "SendMessageBatch"}:
            return any(queue_name(spec) == queue for spec in access.sends_to)
        if call.operation in {"ReceiveMessage", "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility"}:
            return any(queue_name(spec) == queue for spec in access.drains)
        return False
    if call.service == "stepfunctions":
        if call.operation == "StartExecution":
            return access.starts_retries and call.resource == env[schema.RETRY_STATE_MACHINE_ARN]
        if call.operation == "DescribeExecution":
            return access.watches_probes
        return access.answers_retries and call.operation in {"SendTaskSuccess", "SendTaskFailure"}
    if call.service == "sns":
        return call.operation == "Publish" and any(env[t.env_var] == call.resource for t in access.publishes)
    return False


@pytest.fixture
def recorded() -> Iterator[tuple[Platform, CallRecorder]]:
    recorder = CallRecorder()
    with moto_stack(retry_schedule="fast") as env:
        session = boto3._get_default_session()  # the session every adapter's client comes from
        session.events.register("before-parameter-build", recorder)
        try:
            admin = create_admin_key(env["API_KEYS_TABLE"])
            yield Platform(env=env, admin_token=admin.token), recorder
        finally:
            session.events.unregister("before-parameter-build", recorder)


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


def test_every_aws_call_is_granted_to_the_function_that_makes_it(
    recorded: tuple[Platform, CallRecorder], consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform, recorder = recorded
    monkeypatch.setenv(schema.ENDPOINT_HEALTH_DAY_SECONDS, "1")
    wiring.reset()
    drive_every_function(platform, consumer)

    functions = {call.function for call in recorder.calls}
    # Every function's paths were run; the portal's page (run above) has no access, so any call of its is denied.
    assert functions == {name for name, function in BY_NAME.items() if function.access != Access()}
    denied = sorted(
        (c.function, c.service, c.operation, c.resource)
        for c in recorder.calls
        if not allowed(BY_NAME[c.function].access, platform.env, c)
    )
    assert denied == []
