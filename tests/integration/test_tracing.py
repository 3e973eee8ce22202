"""With X-Ray tracing on, as deployed: AWS calls are traced, webhooks carry no X-Ray trace header to consumers (the
W3C `traceparent` of the event's own trace is the delivery service's to add, domain/trace_context.py, never the
sender's), and ingest's annotation joining a producer's W3C trace lands on its segment.

Every other test (and the local stack) runs with tracing disabled, so this path runs nowhere else. Patching is
process-wide, so it runs in a child process: every handler is imported there as a traced Lambda would import it
(the Lambda environment and a trace id set, the X-Ray daemon address a UDP socket of this test), then a webhook
is sent by the delivery function's sender to a consumer in that process, which reports the headers it got.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import importlib, json, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from hookrelay.functions import FUNCTIONS

    for function in FUNCTIONS:  # each handler module as its Lambda loads it: its Tracer patches at import
        importlib.import_module(function.handler.rpartition(".")[0])

    from aws_xray_sdk.core import patcher

    received = []

    class Consumer(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["content-length"]))
            received.append(dict(self.headers))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Consumer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    import os
    from hookrelay import wiring
    from hookrelay.adapters import schema

    for spec in (*schema.ALL_TABLES, *schema.OTHER_QUEUES):  # names only: nothing here calls AWS
        os.environ[spec.env_var] = "unused"
    os.environ[schema.DELIVERY_QUEUE.env_var] = schema.encode_delivery_queues(
        {spec: "unused" for spec in schema.delivery_queues(1)}
    )
    os.environ[schema.RETRY_STATE_MACHINE_ARN] = "arn:aws:states:us-east-1:123456789012:stateMachine:unused"
    os.environ[schema.ALLOW_PRIVATE_DESTINATIONS] = "true"  # the consumer is on 127.0.0.1
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    result = wiring.delivery_service().sender.send(url, {"webhook-id": "evt_1"}, b"{}")

    from aws_xray_sdk.core import xray_recorder
    from hookrelay.handlers import ingest, tracing

    with xray_recorder.in_subsegment("## post_event") as subsegment:  # as the route's capture_method opens it
        ingest.tracer.put_annotation(tracing.W3C_TRACE_ID, "4bf92f3577b34da6a3ce929d0e0e4736")
        annotations = dict(subsegment.annotations)
    print(json.dumps({
        "status": result.status_code,
        "headers": received,
        "patched": sorted(patcher._PATCHED_MODULES),
        "annotations": annotations,
    }))
    """
)


def test_a_webhook_sent_with_tracing_on_carries_no_trace_header() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.bind(("127.0.0.1", 0))
        env = {
            "PATH": "/usr/bin:/bin",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "LAMBDA_TASK_ROOT": "/var/task",  # what Powertools and the X-Ray SDK take for "running in Lambda"
            "AWS_LAMBDA_FUNCTION_NAME": "delivery",
            "_X_AMZN_TRACE_ID": "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
            "POWERTOOLS_TRACE_DISABLED": "false",
            "AWS_XRAY_DAEMON_ADDRESS": f"127.0.0.1:{daemon.getsockname()[1]}",
        }
        child = subprocess.run(  # noqa: S603 (this interpreter, a fixed script)
            [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120, check=False
        )
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout.strip().splitlines()[-1])
    assert report["status"] == 200
    [headers] = report["headers"]
    assert not {name.lower() for name in headers} & {"x-amzn-trace-id", "traceparent"}, headers
    assert "botocore" in report["patched"], "tracing is off: the test would pass vacuously"
    assert "requests" not in report["patched"]
    assert report["annotations"] == {"w3c_trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
