"""Move everything in the dead-letter and poison-message queues back into delivery (an operator command).

    python scripts/redrive_dead_letters.py \
        --dead-letter-queue-url <DeadLetterQueueUrl> --poison-queue-url <PoisonQueueUrl> \
        --delivery-queue-url <DeliveryQueueUrl>

Each dead-letter message names a dead delivery: it is replayed (a new delivery of the same event,
`replay_of` the dead one). Each poison message is a delivery message that failed processing: it is
sent back to the delivery queue as it was. Messages that cannot be acted on (the delivery expired,
its endpoint is disabled or gone) stay in their queue and are listed. Safe to re-run: a message
handled twice replays once. The tables come from the environment the functions use (`DELIVERIES_TABLE`,
`EVENTS_TABLE`, `ENDPOINTS_TABLE`, and `RETRY_SCHEDULE`), or from the options below.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.services.redrive import DrainReport


def redrive_dead_letters(
    dead_letter_queue_url: str,
    poison_queue_url: str,
    delivery_queue_url: str,
    *,
    max_messages: int = 10_000,
    wait_seconds: int = 1,
) -> DrainReport:
    drain = wiring.dead_letter_drain(
        dead_letter_queue_url, poison_queue_url, delivery_queue_url, wait_seconds=wait_seconds
    )
    return drain.drain(max_messages=max_messages)


def main(argv: Sequence[str] | None = None) -> DrainReport:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dead-letter-queue-url", required=True)
    parser.add_argument("--poison-queue-url", required=True)
    parser.add_argument("--delivery-queue-url", required=True)
    for spec in (schema.DELIVERIES, schema.EVENTS, schema.ENDPOINTS):
        parser.add_argument(f"--{spec.logical_name.lower()}-table", help=f"default: ${spec.env_var}")
    parser.add_argument("--max-messages", type=int, default=10_000, help="per queue, for this run")
    args = parser.parse_args(argv)
    for spec in (schema.DELIVERIES, schema.EVENTS, schema.ENDPOINTS):
        name = getattr(args, f"{spec.logical_name.lower()}_table") or os.environ.get(spec.env_var)
        if not name:
            parser.error(f"--{spec.logical_name.lower()}-table or ${spec.env_var} is required")
        os.environ[spec.env_var] = name
    wiring.reset()
    report = redrive_dead_letters(
        args.dead_letter_queue_url, args.poison_queue_url, args.delivery_queue_url, max_messages=args.max_messages
    )
    print(f"replayed {report.replayed} dead deliveries, re-sent {report.resent} poison messages")
    for reason in report.kept:
        print(f"kept {reason}")
    if not report.exhausted:
        print("stopped at --max-messages: run again for the rest")
    return report


if __name__ == "__main__":
    main()
