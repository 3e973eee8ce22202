"""Per-tenant limits: what one tenant's keys may make the platform hold and do for every event it publishes.

A deployment sets them (CDK context, validated by stacks/config.py, carried to the API function in its environment);
these are the defaults and the ranges a deployment may choose from. The table of limits in docs/deploying.md is
generated from `LIMITS` (tests/unit/test_limits.py holds it to this module).

- `max_endpoints_per_tenant` (default 1,000): live (not deleted) endpoints a tenant may have at once. Every event of
  the tenant is matched against all of them, and `GET /v1/endpoints` pages through them. Counted on the tenant's
  record in the same transaction that creates or deletes an endpoint (adapters/dynamodb.py, `CountedEndpoints`).
- `max_filters_per_endpoint` (default 20): event-type filters one endpoint may have. An endpoint that needs more
  than 20 names a family with a wildcard (`order.*`); 20 keeps the worst tenant's matching work (below) at
  1,000 x 20 = 20,000 pattern evaluations per distinct event type (`domain/matching.py`, `FilterIndex`), a few
  tens of milliseconds, where 100 filters made it five times that. The schema's cap (MAX_FILTERS, 100) is the
  most a deployment may allow.

The work per event is bounded by the two together: `FilterIndex` matches once per distinct event type of a request,
looks exact filters up in a dict, and evaluates each distinct wildcard pattern once in linear time, so a request
costs at most `max_endpoints_per_tenant * max_filters_per_endpoint` linear pattern evaluations per distinct type
(`filter_work_per_type`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hookrelay.domain.matching import MAX_FILTERS, MAX_LENGTH, MAX_STARS

DEFAULT_MAX_ENDPOINTS_PER_TENANT = 1_000
MAX_ENDPOINTS_PER_TENANT_CEILING = 10_000  # the most a deployment may allow
DEFAULT_MAX_FILTERS_PER_ENDPOINT = 20


@dataclass(frozen=True)
class TenantLimits:
    max_endpoints_per_tenant: int = DEFAULT_MAX_ENDPOINTS_PER_TENANT
    max_filters_per_endpoint: int = DEFAULT_MAX_FILTERS_PER_ENDPOINT

    def __post_init__(self) -> None:
        if not 1 <= self.max_endpoints_per_tenant <= MAX_ENDPOINTS_PER_TENANT_CEILING:
            ceiling, given = MAX_ENDPOINTS_PER_TENANT_CEILING, self.max_endpoints_per_tenant
            raise ValueError(f"max_endpoints_per_tenant is 1 to {ceiling}, not {given}")
        if not 1 <= self.max_filters_per_endpoint <= MAX_FILTERS:
            raise ValueError(f"max_filters_per_endpoint is 1 to {MAX_FILTERS}, not {self.max_filters_per_endpoint}")

    @property
    def filter_work_per_type(self) -> int:
        """The most pattern evaluations one distinct event type costs ingest (each linear, at most MAX_LENGTH
        characters and MAX_STARS + 2 parts)."""
        return self.max_endpoints_per_tenant * self.max_filters_per_endpoint


DEFAULT_LIMITS = TenantLimits()


def limit_from_config(name: str, raw: object, default: int, ceiling: int) -> int:
    """A limit a deployment configures: a whole number from 1 to `ceiling`; None or "" is the default."""
    if raw is None or raw == "":
        return default
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).strip().isdigit():
        raise ValueError(f"{name} is a whole number, not {raw!r}")
    value = int(raw)
    if not 1 <= value <= ceiling:
        raise ValueError(f"{name} is 1 to {ceiling}, not {value}")
    return value


# docs/deploying.md's table: (setting, default, the most a deployment may set, what it bounds).
LIMITS: tuple[tuple[str, int, int, str], ...] = (
    (
        "max_endpoints_per_tenant",
        DEFAULT_MAX_ENDPOINTS_PER_TENANT,
        MAX_ENDPOINTS_PER_TENANT_CEILING,
        "live endpoints per tenant (409 `limit-exceeded` past it)",
    ),
    (
        "max_filters_per_endpoint",
        DEFAULT_MAX_FILTERS_PER_ENDPOINT,
        MAX_FILTERS,
        f"event-type filters per endpoint (422 past it), each at most {MAX_LENGTH} characters and {MAX_STARS} `*`",
    ),
)


def limits_table() -> str:
    """docs/deploying.md's table of per-tenant limits, generated from `LIMITS`."""
    rows = ["| Setting (CDK context) | Default | Most a deployment may set | Bounds |", "|---|---|---|---|"]
    rows += [f"| `{name}` | {default:,} | {ceiling:,} | {what} |" for name, default, ceiling, what in LIMITS]
    return "\n".join(rows)


# Content filters on an endpoint (domain/content_filter.py): fixed caps, the same on every deployment, published in
# the API document and the consumer guide (both tested against these). They bound what one filter may cost at
# fan-out: at most MAX_FILTER_NODES tests, each a path lookup of at most MAX_FILTER_PATH_SEGMENTS steps (and, where
# the path meets arrays, one visit per payload value under it), so evaluation is linear in the payload for any
# filter within them, and no filter can nest deep enough to exhaust a stack.
MAX_FILTER_BYTES = 8 * 1024  # the filter written out compactly (JSON, UTF-8)
MAX_FILTER_DEPTH = 8  # the filter object is level 1; each `$and`, `$or` or `$not` nests one level deeper
MAX_FILTER_NODES = 64  # tests (one per operator applied to a path) plus `$and`, `$or` and `$not` nodes
MAX_FILTER_IN_VALUES = 100  # values in one `$in` or `$nin` list
MAX_FILTER_PATH_SEGMENTS = 10  # dot-separated segments of one path
MAX_FILTER_PATH_LENGTH = 256  # characters of one path

# The consumer guide's table: (cap, value, what it bounds).
CONTENT_FILTER_CAPS: tuple[tuple[str, int, str], ...] = (
    ("size", MAX_FILTER_BYTES, "bytes of the filter written out as compact JSON"),
    ("depth", MAX_FILTER_DEPTH, "levels: the filter is level 1, each `$and`, `$or` or `$not` one level deeper"),
    ("nodes", MAX_FILTER_NODES, "tests (an operator on a path) plus `$and`, `$or` and `$not` operators"),
    ("`$in` / `$nin` values", MAX_FILTER_IN_VALUES, "values in one list"),
    ("path segments", MAX_FILTER_PATH_SEGMENTS, "dot-separated segments in one path"),
    ("path length", MAX_FILTER_PATH_LENGTH, "characters in one path"),
)


def content_filter_caps_table() -> str:
    """The consumer guide's table of content-filter caps, generated from `CONTENT_FILTER_CAPS`."""
    rows = ["| Cap | At most | Of |", "|---|---|---|"]
    rows += [f"| {name} | {value:,} | {what} |" for name, value, what in CONTENT_FILTER_CAPS]
    return "\n".join(rows)


# --- Per-endpoint rate limit (domain/pacing.py): deliveries a second, set by the tenant on the endpoint ---
# At least one a second. At most 500: each paced send reserves its slot on one DynamoDB item per endpoint (one or two
# writes), and one item takes at most 1,000 write units a second.
MIN_RATE_LIMIT_PER_SECOND = 1
MAX_RATE_LIMIT_PER_SECOND = 500
