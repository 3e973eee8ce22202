"""Delivery overhead: deliveries per second through the real delivery path vs. bare `requests.post`, in one run.

    python bench/delivery_overhead.py [--deliveries N]

The delivery path is the one the local stack runs: the SQS event source (`local.sqs_source.poll_once`,
one message per invocation as deployed) invoking the real delivery handler, whose service claims the
delivery, reads endpoint and event, signs, POSTs and records the attempt through the real adapters,
on moto in this process. The bare path POSTs the same body with the same headers to the same consumer
(a ScriptedConsumer on 127.0.0.1 that answers 200 at once, one connection per request for both).

The AWS calls are timed one by one (bench.metering), so the overhead can be split into what moto
takes to answer them (on AWS, network round trips to DynamoDB and SQS instead, not measured here) and
what the function's own code takes.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import requests

from bench.common import heading, machine, table
from bench.cost import Driver, order
from bench.metering import EVENT_SOURCE, Meter
from hookrelay.adapters import schema
from hookrelay.domain.clock import utcnow
from hookrelay.domain.signing import signed_headers
from hookrelay.functions import DELIVERY, queue_trigger
from local.sqs_source import poll_once
from tests.support.aws import moto_stack
from tests.support.consumer import ScriptedConsumer

WARM_UP = 20
SIGNING_SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def deliver_all(driver: Driver, count: int) -> int:
    """Run the event source until `count` messages were handled; returns how many were."""
    handled = 0
    url = driver.env[schema.DELIVERY_QUEUE.env_var]
    idle_polls = 0
    while handled < count and idle_polls < 50:
        with driver.meter.origin(EVENT_SOURCE):
            got = poll_once(driver.sqs, url, batch_size=queue_trigger(DELIVERY).batch_size)
        handled += got
        idle_polls = 0 if got else idle_polls + 1
    return handled


def ms(seconds: float, count: int) -> str:
    return f"{1000 * seconds / count:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deliveries", type=int, default=300)
    args = parser.parse_args(argv)
    count = args.deliveries
    meter = Meter(size_dynamodb=False)  # timing only: sizing items would add our own reads to moto's time
    consumer = ScriptedConsumer()
    try:
        with meter.installed(), moto_stack() as env:
            driver = Driver(env, meter)
            tenant_id = driver.tenant_with_endpoints([consumer.url])
            for number in range(WARM_UP):
                driver.publish(None, tenant_id, order(1024, number))
            assert deliver_all(driver, WARM_UP) == WARM_UP
            for number in range(count):
                driver.publish(None, tenant_id, order(1024, number))
            meter.reset()
            with meter.recorded():
                started = time.perf_counter()
                delivered = deliver_all(driver, count)
                path_seconds = time.perf_counter() - started
            if delivered != count:
                raise RuntimeError(f"only {delivered} of {count} deliveries went through")
            sample = consumer.received[-1]
        body, headers = sample.body, {k: v for k, v in sample.headers.items() if k.startswith(("webhook-", "content-"))}
        with requests.post(consumer.url, data=body, headers=headers, timeout=5):
            pass  # warm-up
        started = time.perf_counter()
        for _ in range(count):
            requests.post(consumer.url, data=body, headers=headers, timeout=5).raise_for_status()
        bare_seconds = time.perf_counter() - started
    finally:
        consumer.close()

    started = time.perf_counter()
    for _ in range(count):
        signed_headers([SIGNING_SECRET], "evt_bench", utcnow(), body.decode())
    signing_seconds = time.perf_counter() - started

    handler_seconds = sum(i.seconds for i in meter.invocations if i.function == DELIVERY.name)
    aws_in_handler = meter.seconds_by(lambda c: f"{c.service} {c.operation}" if c.origin == DELIVERY.name else "")
    aws_in_source = sum(c.seconds for c in meter.calls if c.origin == EVENT_SOURCE)
    handler_aws = sum(s for k, s in aws_in_handler.items() if k)

    print(f"# Delivery overhead ({machine()})")
    heading(f"{count} deliveries, each way, to one consumer on 127.0.0.1")
    path_rate, bare_rate = count / path_seconds, count / bare_seconds
    print(
        table(
            ["path", "deliveries/s", "ms per delivery"],
            [
                ["event source + delivery handler (moto in process)", f"{path_rate:.1f}", ms(path_seconds, count)],
                [
                    "delivery handler alone (its invocations)",
                    f"{count / handler_seconds:.1f}",
                    ms(handler_seconds, count),
                ],
                ["bare requests.post, same body and headers", f"{bare_rate:.1f}", ms(bare_seconds, count)],
            ],
        )
    )
    print(
        f"\nThe delivery path runs at {path_rate / bare_rate:.3f} x the bare rate"
        f" ({bare_rate / path_rate:.1f} x slower): {ms(path_seconds - bare_seconds, count)} ms overhead per delivery."
    )
    heading("Where a delivery's time goes (ms per delivery)")
    handler_calls = Counter(f"{c.service} {c.operation}" for c in meter.calls if c.origin == DELIVERY.name)
    rows = [
        [f"moto: {name} ({handler_calls[name] / count:.0f} per delivery)", ms(seconds, count)]
        for name, seconds in sorted(aws_in_handler.items(), key=lambda item: -item[1])
        if name
    ]
    rows += [
        ["moto: the event source's receive, delete and queue lookup", ms(aws_in_source, count)],
        ["the POST itself (the bare path's time per request)", ms(bare_seconds, count)],
        [
            "the handler's own code (handler time - its AWS calls - the POST)",
            ms(handler_seconds - handler_aws - bare_seconds, count),
        ],
        ["  of which signing (standardwebhooks, measured alone)", ms(signing_seconds, count)],
        ["the event source's own code (the rest)", ms(path_seconds - handler_seconds - aws_in_source, count)],
    ]
    print(table(["part", "ms"], rows))
    moto_share = (handler_aws + aws_in_source) / (path_seconds - bare_seconds)
    print(
        f"\n{sum(handler_calls.values()) / count:.0f} AWS calls per delivery in the handler."
        " moto answering them and the event source's in process accounts for"
        f" {100 * moto_share:.0f}% of the overhead: that part is this machine's moto, not AWS latency."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
