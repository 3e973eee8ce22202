"""What publishing costs on the ingest side, one event per request against batches of ten, counted on moto.

    python bench/batch_ingest.py [--events N] [--payload-bytes B]

Side by side in one run, each way publishes the same N events (1 KB of JSON each by default) to a tenant with one
endpoint, through `local.gateway` (the real authorizer and ingest function), metered by `bench.metering`:

- single: `POST /v1/events`, one event a request, no key;
- single, keyed: the same with an `Idempotency-Key` header (Powertools idempotency records);
- batch of 10: `POST /v1/events/batch`, ten events a request, no keys;
- batch of 10, keyed: the same with an `idempotency_key` on every event.

Per 10 events it prints the API requests, Lambda invocations, DynamoDB write calls and write units (by table), SQS
calls and 64 KiB chunks, and the ingest side's cost per million events at the list prices of bench/cost.py (API
requests, Lambda requests and GB-s of the authorizer and ingest function, DynamoDB writes and reads, SQS). The
deliveries themselves (the delivery function, its claim and record, the workflow) are the same whichever way an
event came in and are not run here: bench/cost.py prices them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import heading, machine, table
from bench.cost import API_PAYLOAD_UNIT, PRICES, Driver, money
from bench.metering import Meter
from bench.payloads import order
from hookrelay.functions import AUTHORIZER, BY_NAME, INGEST
from tests.support.aws import moto_stack
from tests.support.consumer import ScriptedConsumer

BATCH = 10


def single(driver: Driver, tenant_id: str, events: list[dict[str, Any]], keyed: bool, round_: int) -> int:
    from local import gateway

    for number, data in enumerate(events):
        body = json.dumps({"tenant_id": tenant_id, "type": "order.updated", "data": data}).encode()
        headers = {"authorization": f"Bearer {driver.producer}", "content-type": "application/json"}
        if keyed:
            headers["idempotency-key"] = f"r{round_}-e{number}"
        answer = gateway.handle("POST", "/v1/events", "", headers, body)
        assert answer.status == 202, answer.body
    return len(events)


def batched(driver: Driver, tenant_id: str, events: list[dict[str, Any]], keyed: bool, round_: int) -> int:
    requests = 0
    for start in range(0, len(events), BATCH):
        prefix = f"r{round_}-b{start}" if keyed else None
        driver.publish(None, tenant_id, events[start : start + BATCH], key_prefix=prefix)
        requests += 1
    return requests


WAYS: dict[str, tuple[Callable[..., int], bool]] = {
    "single": (single, False),
    "single, keyed": (single, True),
    "batch of 10": (batched, False),
    "batch of 10, keyed": (batched, True),
}


def measure(events: int, payload_bytes: int) -> dict[str, dict[str, float]]:
    meter = Meter()
    figures: dict[str, dict[str, float]] = {}
    consumer = ScriptedConsumer()
    try:
        with meter.installed(capture_stdout=False), moto_stack() as env:
            driver = Driver(env, meter)
            tenant_id = driver.tenant_with_endpoints([consumer.url])
            payloads = [order(payload_bytes, n) for n in range(events)]
            for round_, (name, (publish, keyed)) in enumerate(WAYS.items()):
                publish(driver, tenant_id, payloads[:BATCH], keyed, -1 - round_)  # warm: clients made, code run
                meter.reset()
                with meter.recorded():
                    requests = publish(driver, tenant_id, payloads, keyed, round_)
                figures[name] = summarise(meter, requests, events, payload_bytes)
    finally:
        consumer.close()
    return figures


def summarise(meter: Meter, requests: int, events: int, payload_bytes: int) -> dict[str, float]:
    per = BATCH / events  # figures per 10 events
    calls = meter.billed_calls()
    dynamodb_writes = [c for c in calls if c.service == "dynamodb" and c.write_units]
    invocations = Counter(i.function for i in meter.invocations)
    # Billed per millisecond, at each function's memory (bench/cost.py's `bill` does the same).
    gb_s = sum(math.ceil(i.seconds * 1000) / 1000 * BY_NAME[i.function].memory_mb / 1024 for i in meter.invocations)
    api_units = requests * max(1, math.ceil(payload_bytes * events / requests / API_PAYLOAD_UNIT))
    figures: dict[str, float] = {
        "API requests": requests * per,
        "authorizer invocations": invocations[AUTHORIZER.name] * per,
        "ingest invocations": invocations[INGEST.name] * per,
        "DynamoDB write calls": len(dynamodb_writes) * per,
        "DynamoDB WRU": sum(c.write_units for c in calls) * per,
        "DynamoDB read calls": sum(1 for c in calls if c.service == "dynamodb" and c.read_units) * per,
        "DynamoDB RRU": sum(c.read_units for c in calls) * per,
        "SQS calls": sum(1 for c in calls if c.service == "sqs") * per,
        "SQS 64 KiB chunks": sum(c.sqs_chunks for c in calls) * per,
        "Lambda GB-s (moto)": gb_s * per,
    }
    for operation, count in sorted(Counter(c.operation for c in dynamodb_writes).items()):
        figures[f"  DynamoDB {operation}"] = count * per
    usd = (
        PRICES["api_requests"].cost(api_units)
        + PRICES["lambda_requests"].cost(sum(invocations.values()))
        + PRICES["lambda_gb_s"].cost(gb_s)
        + PRICES["dynamodb_wru"].cost(sum(c.write_units for c in calls))
        + PRICES["dynamodb_rru"].cost(sum(c.read_units for c in calls))
        + PRICES["sqs_fifo"].cost(sum(c.sqs_chunks for c in calls if c.fifo))
    )
    figures["ingest side, USD per million events"] = usd * 1e6 / events
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=200, help="events published each way (a multiple of 10)")
    parser.add_argument("--payload-bytes", type=int, default=1024)
    args = parser.parse_args(argv)
    if args.events % BATCH:
        parser.error(f"--events must be a multiple of {BATCH}")
    figures = measure(args.events, args.payload_bytes)
    heading(f"Ingest side per {BATCH} events: {args.events} events each way, {args.payload_bytes}-byte payloads")
    print(machine())
    names = list(WAYS)
    rows = []
    metrics = list(dict.fromkeys(m for way in figures.values() for m in way))
    # The counts as measured, then each DynamoDB write operation's calls, then the price.
    ordered = sorted(metrics, key=lambda m: (m.startswith("ingest side"), m.startswith("  ")))
    for metric in ordered:
        row: list[object] = [metric]
        for name in names:
            value = figures[name].get(metric, 0.0)
            row.append(money(value) if metric.startswith("ingest side") else f"{value:.2f}")
        rows.append(row)
    print(table(["per 10 events", *names], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
