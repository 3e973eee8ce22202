"""The event catalogue's validator: fastjsonschema (what ingest runs) beside jsonschema, in one run.

    python bench/schema_validation.py [--runs N] [--events N]

For each library and schema, N fresh interpreters each time (1) the library's import, (2) its first check of
one event (compiling the schema, for fastjsonschema), then (3) the mean time of checking the same event again
`--events` times; the medians are printed side by side. (1) + (2) is what a cold ingest container pays on its
first event of a type with a schema (the handler itself never imports a validator: see `cold_start.py`), (3)
what every later event pays. The schemas: a typical order schema, and one at the catalogue's size cap
(`domain/event_types.MAX_SCHEMA_BYTES`), written out compactly. fastjsonschema is run as the adapter runs it
(`adapters/json_schema.py`: formats and defaults off); jsonschema (a development dependency here) as
`Draft7Validator(schema).iter_errors`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import heading, machine, median, table
from hookrelay.domain.event_types import MAX_SCHEMA_BYTES, compact

TYPICAL = {
    "type": "object",
    "required": ["id", "amount", "currency"],
    "additionalProperties": False,
    "properties": {
        "id": {"type": "string", "maxLength": 64},
        "amount": {"type": "integer", "minimum": 0},
        "currency": {"enum": ["EUR", "USD", "GBP"]},
        "customer": {
            "type": "object",
            "required": ["id"],
            "properties": {"id": {"type": "string"}, "email": {"type": "string", "format": "email"}},
        },
        "items": {
            "type": "array",
            "maxItems": 100,
            "items": {
                "type": "object",
                "required": ["sku", "qty"],
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
            },
        },
    },
}
TYPICAL_EVENT = {
    "id": "o1",
    "amount": 100,
    "currency": "EUR",
    "customer": {"id": "c1", "email": "a@example.com"},
    "items": [{"sku": "s", "qty": 1}] * 10,
}


def at_the_cap() -> dict[str, object]:
    """Many small object properties, as many as fit under the cap."""
    item = {
        "type": "object",
        "required": ["a"],
        "properties": {"a": {"type": "integer", "minimum": 0}, "b": {"enum": ["x", "y"]}},
    }
    properties: dict[str, object] = {}
    while len(compact({"type": "object", "properties": properties}).encode()) < MAX_SCHEMA_BYTES - 200:
        properties[f"p{len(properties)}"] = item
    return {"type": "object", "properties": properties}


LIBRARIES = {
    "fastjsonschema": (
        "import fastjsonschema",
        "check = fastjsonschema.compile({**S, '$schema': 'http://json-schema.org/draft-07/schema#'}, "
        "use_default=False, use_formats=False)",
        "check(D)",
    ),
    "jsonschema": (
        "import jsonschema",
        "check = jsonschema.Draft7Validator(S)",
        "assert not list(check.iter_errors(D))",
    ),
}

PROGRAM = """
import json, time
S, D = json.loads({schema!r}), json.loads({event!r})
t0 = time.perf_counter()
{imports}
t1 = time.perf_counter()
{build}
{check}
t2 = time.perf_counter()
for _ in range({events}):
    {check}
t3 = time.perf_counter()
print(json.dumps([t1 - t0, t2 - t1, (t3 - t2) / {events}]))
"""


def measure(library: str, schema: dict[str, object], event: dict[str, object], runs: int, events: int) -> list[float]:
    imports, build, check = LIBRARIES[library]
    program = PROGRAM.format(
        schema=json.dumps(schema), event=json.dumps(event), imports=imports, build=build, check=check, events=events
    )
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)  # noqa: S603
        samples.append(json.loads(out.stdout))
    return [median([sample[i] for sample in samples]) for i in range(3)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="fresh interpreters per library and schema (5)")
    parser.add_argument("--events", type=int, default=1000, help="checks timed after the first (1000)")
    args = parser.parse_args()
    heading(f"Event schema validation: fastjsonschema beside jsonschema ({machine()})")
    capped = at_the_cap()
    rows = []
    for label, schema, event in (
        (f"typical ({len(compact(TYPICAL))} B)", TYPICAL, TYPICAL_EVENT),
        (f"at the cap ({len(compact(capped))} B)", capped, {"p0": {"a": 1}}),
    ):
        for library in LIBRARIES:
            imported, first, each = measure(library, schema, event, args.runs, args.events)
            rows.append(
                (
                    label,
                    library,
                    f"{imported * 1000:.0f}",
                    f"{first * 1000:.0f}",
                    f"{(imported + first) * 1000:.0f}",
                    f"{each * 1e6:.0f}",
                )
            )
    print(
        table(
            ("schema", "library", "import ms", "first check ms", "cold total ms", "each later µs"), rows, align="llrrrr"
        )
    )
    print(f"\nmedians of {args.runs} fresh interpreters; later checks: the mean of {args.events}")


if __name__ == "__main__":
    main()
