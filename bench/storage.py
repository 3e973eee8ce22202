"""Write units of each storage write of a delivery, measured on moto with `bench.metering` (as bench/cost.py).

    python bench/storage.py [--payload-bytes B] [--attempts N]

What one event costs to store depends on how its body deflates, so the event is written twice: with an order-shaped
JSON document of random values (what a webhook payload looks like, and the cost benchmark's: `bench.payloads.order`),
and with random base64 (incompressible: the worst case).
Then one delivery goes through its writes: created, claimed and recorded, attempt after attempt, each failed
attempt answered with a 1 KiB response body (the most of it the record keeps): how much a growing item costs.
"""

from __future__ import annotations

import argparse
import base64
import random
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import boto3

from bench.common import heading, machine, table
from bench.metering import Meter
from bench.payloads import order_document
from hookrelay.adapters import schema
from hookrelay.adapters.dynamodb import DeliveryTable, EventTable
from hookrelay.domain.classification import Outcome
from hookrelay.domain.clock import utcnow
from hookrelay.domain.lifecycle import new_delivery, new_event
from hookrelay.domain.models import Attempt, Endpoint
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import AttemptRecord
from tests.support.aws import moto_stack


def random_base64(payload_bytes: int, rng: random.Random) -> dict[str, Any]:
    return {"blob": base64.b64encode(rng.randbytes(payload_bytes * 3 // 4)).decode()}


def last_write(meter: Meter, write: Callable[[], object]) -> float:
    before = len(meter.calls)
    write()
    return sum(call.write_units for call in meter.calls[before:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payload-bytes", type=int, default=1024, help="size of the event's data (default 1 KiB)")
    parser.add_argument("--attempts", type=int, default=8, help="attempts of the delivery, all but the last failed")
    args = parser.parse_args(argv)
    rng = random.Random(7)
    meter = Meter()
    print(f"# Storage write units ({machine()})\n")
    with meter.installed(capture_stdout=False), moto_stack(execute_state_machine=False) as env:
        dynamodb = boto3.resource("dynamodb")
        events = EventTable(dynamodb.Table(env[schema.EVENTS.env_var]), dynamodb.Table(env[schema.EVENT_LOG.env_var]))
        deliveries = DeliveryTable(
            dynamodb.Table(env[schema.DELIVERIES.env_var]), dynamodb.Table(env[schema.EVENT_LOG.env_var])
        )
        now = utcnow()
        endpoint = Endpoint(
            id="ep_01JBENCHSTORAGE0000000000", tenant_id="ten_01JBENCHSTORAGE000000000", url="https://example.com/h",
            event_types=["*"], secrets=[], created_at=now, updated_at=now,
        )  # fmt: skip
        payloads = {
            "order JSON, random values (as the cost benchmark's)": order_document(args.payload_bytes, rng),
            "random base64 (incompressible)": random_base64(args.payload_bytes, rng),
        }
        rows = []
        with meter.recorded():
            for name, data in payloads.items():
                event = new_event(
                    tenant_id=endpoint.tenant_id, event_type="order.paid", data=data, now=now, horizon_seconds=3600
                )
                # As ingest stores an event with no idempotency key: in the event log, with its fan-out.
                fan_out = [new_delivery(event, endpoint, now)]
                units = last_write(meter, lambda event=event, fan_out=fan_out: events.append([(event, fan_out)]))
                rows.append([name, f"{len(event.body.encode()):,}", f"{units:g}"])
        heading(f"The event: one put in the event log, its delivery's log entry ({args.payload_bytes} bytes of data)")
        print(table(["payload", "body bytes", "write units"], rows, align="lrr"))

        delivery = new_delivery(event, endpoint, now)
        rows = []
        with meter.recorded():
            created = last_write(meter, lambda: deliveries.put_many([delivery], logged={delivery.id}))
            # Listed by its event, and queued as ingest made it: no record until its first write (the first claim's
            # units below include writing it then; the happy path's unclaimed settle creates it in its one write).
            rows.append(["created (ingest; listed by its event, no record yet)", "", f"{created:g}"])
            for number in range(1, args.attempts + 1):
                started = now + timedelta(minutes=number)
                claim = last_write(
                    meter, lambda n=number, t=started: deliveries.claim(delivery.id, endpoint.tenant_id, n, t, t)
                )
                last = number == args.attempts
                attempt = Attempt(
                    number=number,
                    started_at=started,
                    latency_ms=120,
                    status_code=200 if last else 503,
                    response_excerpt="ok" if last else "x" * 1024,
                    outcome=Outcome.DELIVERED if last else Outcome.RETRY,
                )
                record = AttemptRecord(
                    attempt=attempt,
                    status=DeliveryStatus.DELIVERED if last else DeliveryStatus.RETRYING,
                    next_attempt_at=None if last else started + timedelta(minutes=1),
                    completed_at=started if last else None,
                    expires_at=1 if last else None,
                )
                recorded = last_write(
                    meter, lambda n=number, r=record: deliveries.record_attempt(delivery.id, endpoint.tenant_id, n, r)
                )
                rows.append([f"attempt {number}: claim, record", f"{claim:g}", f"{recorded:g}"])
        heading(f"One delivery, {args.attempts} attempts (each failure keeps a 1 KiB response excerpt)")
        print(table(["write", "claim", "write units"], rows, align="lrr"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
