"""The benchmarks' webhook payload: order-shaped JSON with random values, which deflates as a real payload does.

Standard library only, so that `cost_before_after.py` can hand it to an older checkout's cost benchmark, whatever
that checkout's own payload was.
"""

from __future__ import annotations

import json
import random
from typing import Any


def order(payload_bytes: int, number: int) -> dict[str, Any]:
    """A representative webhook payload of about `payload_bytes` bytes of JSON, the same for the same `number`.

    Its values are random, so it deflates as a real payload does (the event's stored body is about 0.6 of its body:
    bench/cost.py's `deflated_share`), and is priced as such. Until 2026-12-05 the cost benchmark's was a filler
    string, which deflated to a twentieth of its size: each event's storage was priced about 470 bytes short
    (bench/storage.py shows both)."""
    return order_document(payload_bytes, random.Random(number))


def order_document(payload_bytes: int, rng: random.Random) -> dict[str, Any]:
    """An order-shaped webhook payload of random values, grown with line items to about `payload_bytes` of JSON."""

    def token(n: int) -> str:
        return "".join(rng.choices("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", k=n))

    document: dict[str, Any] = {
        "object": "order",
        "id": f"ord_{token(24)}",
        "customer": {"id": f"cus_{token(14)}", "email": f"{token(8)}@{token(6)}.com", "name": token(12)},
        "currency": "eur",
        "amount_total": rng.randint(100, 10**6),
        "status": "paid",
        "created": rng.randint(1_700_000_000, 1_800_000_000),
        "shipping": {"line1": f"{rng.randint(1, 999)} {token(10)} Street", "city": token(9), "postal_code": token(5)},
        "items": [],
    }
    while len(json.dumps(document)) < payload_bytes - 60:
        document["items"].append(
            {"id": f"li_{token(20)}", "sku": token(10), "quantity": rng.randint(1, 9), "price": rng.randint(100, 9999)}
        )
    return document
