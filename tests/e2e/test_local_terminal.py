"""What a person sees in `make run`'s terminal: one readable line per attempt, delivered ones included; the
sweeper's and reconciler's every-two-seconds heartbeats (on --fast) only when they did something."""

from __future__ import annotations

import re

from tests.e2e.harness import eventually, stack_and_consumers


def test_one_readable_line_per_attempt_and_no_idle_heartbeats() -> None:
    with stack_and_consumers("hookrelay-terminal-") as (stack, consumer):
        healthy = consumer("healthy")
        tenant_id, tenant_key = stack.new_tenant("terminal")
        endpoint = stack.created("/v1/endpoints", tenant_key, {"url": healthy.url, "event_types": ["order.*"]})
        healthy.control(secret=endpoint["secret"])
        [delivery_id] = stack.publish(tenant_id, "order.created", {"order_id": 1})["delivery_ids"]
        eventually(lambda: stack.delivery(tenant_key, delivery_id)["status"], "delivered", predicate="delivered".__eq__)

        def lines() -> list[str]:
            return [line for line in stack.process.log().splitlines() if delivery_id in line and " attempt " in line]

        [line] = eventually(lines, "the attempt's line in the terminal")
        assert re.search(rf"attempt 1  {endpoint['id']}  order\.created  -> 200 in \d+ ms  delivered", line), line
        log = stack.process.log()
        assert "endpoint health sweep" not in log and "reconciled" not in log, log[-2000:]
        assert '{"level"' not in log, "a function's JSON log line in the terminal"
