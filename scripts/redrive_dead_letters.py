"""Give back the deliveries the platform itself killed, once the fault is fixed (an operator command).

    python scripts/redrive_dead_letters.py --since 2026-12-01T03:00:00Z            # list them
    python scripts/redrive_dead_letters.py --since 2026-12-01T03:00:00Z --apply    # replay them

"Dead" has one truth: the delivery record. The dead-letter and poison queues are surfaced by the reconciler every
5 minutes (each message becomes a dead delivery with its `dead_reason`, then is deleted), so there is nothing to
drain from them. This command finds, across tenants, the dead deliveries created since `--since` whose reason is the
platform's (`poison`: its message failed processing repeatedly; `attempt_lost`: its retry workflow gave up on an
unanswered attempt) and, with `--apply`, replays each (a new delivery of the same event, `replay_of` the dead one)
to its endpoint if that endpoint is enabled. A tenant's own dead deliveries (its endpoint failed) are never touched:
they are the tenant's to redrive once its endpoint works. Safe to re-run: each delivery is replayed once. The tables
come from the environment the functions use (`TENANTS_TABLE`, `DELIVERIES_TABLE`, `EVENTS_TABLE`,
`ENDPOINTS_TABLE`, `DELIVERY_QUEUES` (every delivery queue's URL, as JSON: a function's environment holds it, e.g.
`aws lambda get-function-configuration` of the API function), and `RETRY_SCHEDULE`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.domain.clock import from_rfc3339
from hookrelay.services.redrive import OperatorReport

REQUIRED = (schema.TENANTS.env_var, schema.DELIVERIES.env_var, schema.EVENTS.env_var, schema.ENDPOINTS.env_var)


def main(argv: Sequence[str] | None = None) -> OperatorReport:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--since", required=True, help="RFC 3339: deliveries created since then")
    parser.add_argument("--until", help="RFC 3339: and before then (default: now)")
    parser.add_argument("--apply", action="store_true", help="replay them (default: only list them)")
    args = parser.parse_args(argv)
    missing = [name for name in (*REQUIRED, schema.DELIVERY_QUEUE.env_var) if not os.environ.get(name)]
    if missing:
        parser.error(f"set {', '.join(missing)} (the stack's outputs and table names)")
    wiring.reset()
    until = from_rfc3339(args.until) if args.until else None
    report = wiring.operator_redrive().run(from_rfc3339(args.since), until, apply=args.apply)
    verb = "replayed" if args.apply else "would replay (run with --apply)"
    print(
        f"found {len(report.found)} deliveries the platform killed; {verb} {len(report.replayed) or len(report.found)}"
    )
    for line in report.kept:
        print(f"kept {line}")
    return report


if __name__ == "__main__":
    main()
