"""The hookrelay CLI: producers send events; consumers inspect, replay and redrive their deliveries.

Configuration comes from flags or the environment (HOOKRELAY_URL, HOOKRELAY_TOKEN). Output is a
human-readable table by default and JSON with --json. Exit codes: 0 success; 1 the API refused (its
problem details are printed on stderr) or a followed redrive failed; 2 bad usage; 3 the API could
not be reached.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import requests
from pydantic import BaseModel

from hookrelay_client.client import MAX_BATCH_EVENTS, UNCHANGED, HookrelayClient, header
from hookrelay_client.errors import HookrelayError, Problem
from hookrelay_client.models import (
    BatchEventResult,
    Delivery,
    Endpoint,
    EndpointAuth,
    EndpointHealth,
    EndpointStats,
    EventType,
    IssuedSigningKey,
    Redrive,
)
from hookrelay_client.render import ProgressBar, cell, fields, table

EXIT_OK, EXIT_API_ERROR, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
RELATIVE_MOMENT = re.compile(r"^(\d+)([smhd])$")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


@dataclass
class Result:
    """What a command produced: `data` for --json, `text` for people, and the exit code."""

    data: Any
    text: str
    exit_code: int = EXIT_OK


def as_json(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [as_json(item) for item in value]
    return value


# -- argument types ---------------------------------------------------------------------------------


def moment(text: str) -> datetime:
    """RFC 3339 (`2030-01-01T02:00:00Z`), `now`, or a duration ago (`90s`, `30m`, `6h`, `2d`)."""
    now = datetime.now(UTC)
    if text == "now":
        return now
    relative = RELATIVE_MOMENT.match(text)
    if relative:
        return now - timedelta(**{UNITS[relative[2]]: int(relative[1])})
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not RFC 3339, 'now', or a duration like 6h") from None
    if parsed.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no timezone: add Z or an offset")
    return parsed


def seconds(text: str) -> int:
    """Whole seconds (`3600`) or a duration (`90s`, `30m`, `6h`, `2d`)."""
    if text.isdigit():
        return int(text)
    relative = RELATIVE_MOMENT.match(text)
    if relative is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not seconds or a duration like 6h")
    return int(timedelta(**{UNITS[relative[2]]: int(relative[1])}).total_seconds())


def _argument_text(text: str) -> str:
    """The text itself, a file's (`@file`), or standard input's (`-`)."""
    if text == "-":
        return sys.stdin.read()
    if text.startswith("@"):
        return Path(text[1:]).read_text()
    return text


def json_object(text: str) -> dict[str, Any]:
    """Inline JSON, `@file.json`, or `-` for standard input; must be an object."""
    text = _argument_text(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"not valid JSON: {error.msg}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("not a JSON object")
    return value


def json_events(text: str) -> list[dict[str, Any]]:
    """Events for send-batch: a JSON array of objects or JSON Lines (one object a line), inline, `@file`, or `-`."""
    text = _argument_text(text)
    try:
        document = json.loads(text)
        events = document if isinstance(document, list) else [document]
    except json.JSONDecodeError:
        try:
            events = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as error:
            raise argparse.ArgumentTypeError(f"--events is neither a JSON array nor JSON Lines: {error.msg}") from None
    if not events or not all(isinstance(event, dict) for event in events):
        raise argparse.ArgumentTypeError("--events must hold at least one event, each a JSON object")
    return events


# -- commands ---------------------------------------------------------------------------------------


def send(client: HookrelayClient, args: argparse.Namespace) -> Result:
    accepted = client.publish_event(
        args.tenant_id, args.type, args.data, ordering_key=args.ordering_key, idempotency_key=args.idempotency_key
    )
    sequence = f", sequence {accepted.sequence}" if accepted.sequence is not None else ""
    count = len(accepted.delivery_ids)
    text = f"accepted {accepted.event_id}: {count} deliver{'y' if count == 1 else 'ies'}{sequence}"
    warnings = [f"warning: {warning.code}: {warning.detail}" for warning in accepted.warnings]
    deliveries = [f"  {delivery_id}" for delivery_id in accepted.delivery_ids]
    return Result(accepted, "\n".join([text, *deliveries, *warnings]))


def send_batch(client: HookrelayClient, args: argparse.Namespace) -> Result:
    """Publish the events in requests of up to 100; one line per event, in order. Exit 1 if any was refused."""
    results: list[BatchEventResult] = []
    requests_made = 0
    for start in range(0, len(args.events), MAX_BATCH_EVENTS):
        results += client.publish_events(args.tenant_id, args.events[start : start + MAX_BATCH_EVENTS]).results
        requests_made += 1
    refused = sum(not result.accepted for result in results)
    lines = [f"{position}  {describe_batch_result(result)}" for position, result in enumerate(results)]
    lines.append(f"{len(results) - refused} accepted, {refused} refused, in {requests_made} request(s)")
    return Result(results, "\n".join(lines), EXIT_API_ERROR if refused else EXIT_OK)


def describe_batch_result(result: BatchEventResult) -> str:
    if not result.accepted:  # a problem document, as the API's own: rendered the same way (field or pointer)
        problem = Problem(result.status, result.title or "", result.detail, errors=result.errors)
        return "refused " + problem.describe().replace("\n", "\n   ")
    count = len(result.delivery_ids)
    sequence = f", sequence {result.sequence}" if result.sequence is not None else ""
    again = " (published before under its idempotency key)" if result.duplicate else ""
    return f"accepted {result.event_id}: {count} deliver{'y' if count == 1 else 'ies'}{sequence}{again}"


DELIVERY_COLUMNS = ("ID", "STATUS", "ATTEMPTS", "LAST", "EVENT", "TYPE", "ENDPOINT", "CREATED", "NEXT ATTEMPT")


def last_outcome(code: int | None, error: str | None) -> str:
    return str(code) if code is not None else (error or "-")[:40]


def list_deliveries(client: HookrelayClient, args: argparse.Namespace) -> Result:
    filters = {
        "status": args.status,
        "endpoint_id": args.endpoint_id,
        "event_id": args.event_id,
        "since": args.since,
        "until": args.until,
        "recovered": args.recovered,
        "limit": args.limit,
    }
    if args.all:
        deliveries, next_cursor = list(client.iter_deliveries(**filters)), None
    else:
        page = client.list_deliveries(cursor=args.cursor, **filters)
        deliveries, next_cursor = page.data, page.next_cursor
    rows = [
        (
            d.id,
            d.shown_status,
            d.attempt_count,
            last_outcome(d.last_status_code, d.last_error),
            d.event_id,
            d.event_type,
            d.endpoint_id,
            d.created_at,
            d.next_attempt_at,
        )
        for d in deliveries
    ]
    text = table(DELIVERY_COLUMNS, rows) if rows else "no deliveries match"
    if next_cursor:
        text += f"\n(more: --cursor {next_cursor}, or --all)"
    return Result({"data": as_json(deliveries), "next_cursor": next_cursor}, text)


def describe_delivery(delivery: Delivery) -> str:
    summary = fields(
        [
            ("id", delivery.id),
            ("status", delivery.shown_status),
            ("event", f"{delivery.event_id} ({delivery.event_type or '-'})"),
            ("endpoint", delivery.endpoint_id),
            ("attempts", delivery.attempt_count),
            ("created", delivery.created_at),
            ("next attempt", delivery.next_attempt_at),
            ("completed", delivery.completed_at),
            ("replay of", delivery.replay_of),
        ]
    )
    if not delivery.attempts:
        return summary + "\n\nno attempts yet"
    rows = [
        (
            a.number,
            a.started_at,
            a.status_code,
            f"{a.latency_ms:.0f} ms" if a.latency_ms is not None else None,
            a.error,
            " ".join((a.response_excerpt or "").split())[:60] or None,
        )
        for a in delivery.attempts
    ]
    return summary + "\n\n" + table(("#", "STARTED", "STATUS", "LATENCY", "ERROR", "RESPONSE"), rows)


def show_delivery(client: HookrelayClient, args: argparse.Namespace) -> Result:
    delivery = client.get_delivery(args.delivery_id)
    return Result(delivery, describe_delivery(delivery))


def replay(client: HookrelayClient, args: argparse.Namespace) -> Result:
    replayed = client.replay_delivery(args.delivery_id)
    text = f"replay queued: {replayed.delivery_id} (replay of {replayed.replay_of}, event {replayed.event_id})"
    return Result(replayed, text)


def follow(client: HookrelayClient, redrive_id: str, poll_interval: float, stderr: TextIO) -> Result:
    bar = ProgressBar(stderr)
    try:
        final = client.follow_redrive(
            redrive_id,
            poll_interval=poll_interval,
            on_progress=lambda r: bar.update(r.replayed, r.total or 0, f"replayed ({r.state})"),
        )
    finally:
        bar.close()
    return Result(final, describe_redrive(final), EXIT_OK if final.state == "completed" else EXIT_API_ERROR)


def counted(count: int, exact: bool) -> str:
    """A count the platform makes up to a limit (parked deliveries, a redrive's window): "+" when it is a floor."""
    return f"{count}{'' if exact else '+'}"


def describe_redrive(redrive: Redrive) -> str:
    total = redrive.total
    return fields(
        [
            ("redrive", redrive.id),
            ("state", redrive.state),
            ("endpoint", redrive.endpoint_id),
            ("window", f"{redrive.since.isoformat()} .. {redrive.until.isoformat()}"),
            ("status filter", redrive.status_filter),
            ("replayed", f"{redrive.replayed}/{'?' if total is None else counted(total, redrive.total_exact)}"),
            ("skipped", f"{redrive.skipped} (already recovered, or their event expired)"),
            ("recovered", "replayed too" if redrive.include_recovered else "skipped"),
            ("created", redrive.created_at),
            ("completed", redrive.completed_at),
        ]
    )


def _to_replay(count: int | None) -> str:
    return "counting the deliveries to replay" if count is None else f"{count} deliveries to replay"


def start_redrive(client: HookrelayClient, args: argparse.Namespace) -> Result:
    accepted = client.redrive(
        args.endpoint_id,
        args.since,
        args.until,
        status=args.status,
        include_recovered=args.include_recovered,
        idempotency_key=args.idempotency_key,
    )
    if args.follow:
        print(f"redrive {accepted.redrive_id}: {_to_replay(accepted.count)}", file=args.stderr)
        return follow(client, accepted.redrive_id, args.poll_interval, args.stderr)
    text = f"redrive {accepted.redrive_id} {accepted.status}: {_to_replay(accepted.count)}"
    return Result(accepted, text + f"\n(follow it: redrives show {accepted.redrive_id} --follow)")


def show_redrive(client: HookrelayClient, args: argparse.Namespace) -> Result:
    if args.follow:
        return follow(client, args.redrive_id, args.poll_interval, args.stderr)
    redrive = client.get_redrive(args.redrive_id)
    return Result(redrive, describe_redrive(redrive))


def show_event(client: HookrelayClient, args: argparse.Namespace) -> Result:
    event = client.get_event(args.event_id)
    summary = fields(
        [
            ("id", event.id),
            ("type", event.type),
            ("timestamp", event.timestamp),
            ("ordering key", event.ordering_key),
            ("sequence", event.sequence),
        ]
    )
    return Result(event, f"{summary}\n\n{event.body or json.dumps(event.data)}")


KEY_TYPES = ("hmac", "ed25519")  # the API's KeyType (openapi.yaml); the server refuses any other
FILTER_HELP = "a content filter: a JSON object, @file.json or - (the consumer guide says what it may hold)"
ENDPOINT_COLUMNS = ("ID", "STATE", "URL", "EVENT TYPES", "MAX IN FLIGHT", "CREATED")


AUTH_KINDS = ("basic", "bearer", "oauth2_client_credentials")  # the API's EndpointAuthKind (openapi.yaml)


def _secret_from_env(variable: str | None, what: str) -> str | None:
    """A credential named by the environment variable that holds it: never on the command line (shell history,
    the process list)."""
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        raise SystemExit(f"{what}: the environment variable {variable} is not set")
    return value


def _headers(args: argparse.Namespace) -> list[dict[str, Any]] | None:
    """--header NAME=VALUE and --secret-header NAME=ENV_VAR (the value read from the environment; NAME alone, on
    an update, keeps the stored value); None when neither was given (and --clear-headers was not)."""
    given: list[dict[str, Any]] = []
    for item in args.header or []:
        name, equals, value = item.partition("=")
        if not equals:
            raise SystemExit(f"--header {item!r}: give NAME=VALUE")
        given.append(header(name, value))
    for item in args.secret_header or []:
        name, equals, variable = item.partition("=")
        given.append(
            header(name, _secret_from_env(variable, f"--secret-header {name}") if equals else None, secret=True)
        )
    if given or getattr(args, "clear_headers", False):
        return given
    return None


def _auth(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.auth in (None, "none"):
        return None
    given = {
        "kind": args.auth,
        "username": args.username,
        "password": _secret_from_env(args.password_env, "--password-env"),
        "token": _secret_from_env(args.token_env, "--token-env"),
        "token_url": args.token_url,
        "client_id": args.client_id,
        "client_secret": _secret_from_env(args.client_secret_env, "--client-secret-env"),
        "scope": args.scope,
        "audience": args.audience,
    }
    return {name: value for name, value in given.items() if value is not None}


def create_endpoint(client: HookrelayClient, args: argparse.Namespace) -> Result:
    endpoint = client.create_endpoint(
        args.url,
        args.event_type or ["*"],
        kind="poll" if args.poll else None,
        description=args.description,
        max_in_flight=args.max_in_flight,
        key_type=args.key_type,
        role_arn=args.role_arn,
        filter=args.filter,
        headers=_headers(args),
        auth=_auth(args),
        rate_limit_per_second=args.rate_limit,
    )
    rows = [("id", endpoint.id), ("url", endpoint.url or endpoint.messages_url), ("event types", endpoint.event_types)]
    if endpoint.role_arn:  # an AWS destination: what its role's trust policy must require
        rows += [("role", endpoint.role_arn), ("external id", endpoint.external_id)]
    summary = fields([*rows, ("filter", describe_filter(endpoint.filter))])
    return Result(endpoint, f"{summary}\n{describe_issued_key(endpoint)}")


def describe_issued_key(issued: IssuedSigningKey) -> str:
    """The new key as far as it is ever shown: an HMAC secret this once, or an Ed25519 public key."""
    if issued.public_key:
        return fields([("key type", issued.key_type), ("public key", issued.public_key)]) + (
            "\n(verify v1a signatures with this public key; `endpoints show` shows it again)"
        )
    return (
        fields([("key type", issued.key_type), ("secret", issued.secret)])
        + "\n(the secret is shown only now: store it)"
    )


def list_endpoints(client: HookrelayClient, args: argparse.Namespace) -> Result:
    if args.limit is None and args.cursor is None:  # every page, as one list
        endpoints, next_cursor = client.list_endpoints(), None
    else:
        page = client.list_endpoints_page(limit=args.limit, cursor=args.cursor)
        endpoints, next_cursor = page.data, page.next_cursor
    rows = [(e.id, e.state, e.url, e.event_types, e.max_in_flight, e.created_at) for e in endpoints]
    text = table(ENDPOINT_COLUMNS, rows) if rows else "no endpoints"
    if next_cursor:
        text += f"\n(more: --cursor {next_cursor})"
    return Result({"data": as_json(endpoints), "next_cursor": next_cursor}, text)


def show_endpoint(client: HookrelayClient, args: argparse.Namespace) -> Result:
    endpoint = client.get_endpoint(args.endpoint_id)
    return Result(endpoint, describe_endpoint(endpoint))


def describe_endpoint(e: Endpoint) -> str:
    secrets = ", ".join(
        f"{s.key_type} " + (f"until {cell(s.expires_at)}" if s.expires_at else "current") for s in e.signing_secrets
    )
    public_keys = ", ".join(s.public_key for s in e.signing_secrets if s.public_key)
    rows = [("id", e.id), ("state", e.state), ("kind", e.kind), ("url", e.url), ("event types", e.event_types)]
    if e.role_arn:
        rows += [("role", e.role_arn), ("external id", e.external_id)]
    rows += [("filter", describe_filter(e.filter))]
    rows += [("description", e.description), ("max in flight", e.max_in_flight)]
    rows += [("rate limit", f"{e.rate_limit_per_second}/s" if e.rate_limit_per_second else "none")]
    rows += [("secrets", secrets or None), ("public keys", public_keys or None)]
    headers = ", ".join(f"{h.name}: (secret)" if h.secret else f"{h.name}: {h.value}" for h in e.headers)
    rows += [("headers", headers or None), ("auth", describe_auth(e.auth))]
    rows += [("created", e.created_at), ("updated", e.updated_at)]
    return fields(rows)


def describe_filter(content_filter: dict[str, Any] | None) -> str | None:
    """The content filter as one line of compact JSON (None: no filter, shown as `-`)."""
    return None if content_filter is None else json.dumps(content_filter, separators=(",", ":"), ensure_ascii=False)


def describe_auth(auth: EndpointAuth | None) -> str | None:
    """The auth's kind and what is not secret (the server never returns the rest)."""
    if auth is None:
        return None
    shown = [(name, getattr(auth, name)) for name in ("username", "client_id", "token_url", "scope", "audience")]
    return " ".join([auth.kind, *(f"{name}={value}" for name, value in shown if value)])


def add_outbound_options(sub: argparse.ArgumentParser, *, update: bool) -> None:
    """Custom headers and auth; every secret is read from an environment variable, never given on the line."""
    replaces = " (replaces the headers)" if update else ""
    sub.add_argument("--header", action="append", metavar="NAME=VALUE", help=f"a custom header; repeatable{replaces}")
    sub.add_argument(
        "--secret-header",
        action="append",
        metavar="NAME=ENV_VAR",
        help="a secret header, its value read from ENV_VAR; repeatable"
        + ("; NAME alone keeps the stored value" if update else ""),
    )
    if update:
        sub.add_argument("--clear-headers", action="store_true", help="remove every custom header")
    kinds = (*AUTH_KINDS, "none") if update else AUTH_KINDS
    sub.add_argument(
        "--auth", choices=kinds, help="how to authenticate to the endpoint" + (" (none: remove)" if update else "")
    )
    sub.add_argument("--username", help="basic")
    sub.add_argument("--password-env", metavar="ENV_VAR", help="basic: the variable holding the password")
    sub.add_argument("--token-env", metavar="ENV_VAR", help="bearer: the variable holding the token")
    sub.add_argument("--token-url", help="oauth2_client_credentials: the token endpoint")
    sub.add_argument("--client-id", help="oauth2_client_credentials")
    sub.add_argument(
        "--client-secret-env", metavar="ENV_VAR", help="oauth2_client_credentials: the variable holding it"
    )
    sub.add_argument("--scope", help="oauth2_client_credentials (optional)")
    sub.add_argument("--audience", help="oauth2_client_credentials (optional)")


def update_endpoint(client: HookrelayClient, args: argparse.Namespace) -> Result:
    description = None if args.clear_description else (args.description if args.description is not None else UNCHANGED)
    content_filter = None if args.clear_filter else (args.filter if args.filter is not None else UNCHANGED)
    rate_limit = None if args.clear_rate_limit else (args.rate_limit if args.rate_limit is not None else UNCHANGED)
    endpoint = client.update_endpoint(
        args.endpoint_id,
        url=args.url,
        event_types=args.event_type,
        description=description,
        max_in_flight=args.max_in_flight,
        role_arn=None if args.clear_role else (args.role_arn if args.role_arn is not None else UNCHANGED),
        filter=content_filter,
        headers=_headers(args),
        auth=UNCHANGED if args.auth is None else _auth(args),
        rate_limit_per_second=rate_limit,
    )
    return Result(endpoint, describe_endpoint(endpoint))


def read_messages(client: HookrelayClient, args: argparse.Namespace) -> Result:
    page = client.read_messages(args.endpoint_id, after=args.after, limit=args.limit)
    rows = [(m.seq, m.type, m.event_id, m.delivery_id) for m in page.data]
    text = table(("SEQ", "TYPE", "EVENT", "DELIVERY"), rows) if rows else "no messages"
    return Result(page, f"{text}\n(next: --after {page.next_after}, which acknowledges these)")


def disable_endpoint(client: HookrelayClient, args: argparse.Namespace) -> Result:
    endpoint = client.disable_endpoint(args.endpoint_id)
    note = "new events are recorded as cancelled; after enabling, redrive them with --status cancelled"
    return Result(endpoint, f"{endpoint.id} disabled\n({note})")


def enable_endpoint(client: HookrelayClient, args: argparse.Namespace) -> Result:
    endpoint = client.enable_endpoint(args.endpoint_id)
    note = "deliveries cancelled while it was disabled are not resent by themselves: redrive --status cancelled"
    return Result(endpoint, f"{endpoint.id} enabled\n({note})")


def delete_endpoint(client: HookrelayClient, args: argparse.Namespace) -> Result:
    client.delete_endpoint(args.endpoint_id)
    return Result({"deleted": args.endpoint_id}, f"deleted {args.endpoint_id}")


def rotate_secret(client: HookrelayClient, args: argparse.Namespace) -> Result:
    rotated = client.rotate_endpoint_secret(
        args.endpoint_id, expire_previous_after_seconds=args.expire_previous_after, key_type=args.key_type
    )
    text = fields([("endpoint", rotated.id), ("previous expire", rotated.previous_secrets_expire_at)])
    return Result(rotated, f"{text}\n{describe_issued_key(rotated)}")


def describe_health(h: EndpointHealth) -> str:
    sample = f"newest {h.sample.size} deliveries" + (" (older ones not sampled)" if h.sample.older_not_sampled else "")
    failure = retrying = None
    if h.last_failure:
        f = h.last_failure
        failure = f"{cell(f.at)} {last_outcome(f.status_code, f.error)} ({f.delivery_id})"
    if h.oldest_retrying:
        r = h.oldest_retrying
        retrying = f"{r.delivery_id}, {r.age_seconds} s old, next attempt {cell(r.next_attempt_at)}"
    return fields(
        [
            ("endpoint", f"{h.endpoint_id} ({h.state})"),
            ("sample", sample),
            ("counts", ", ".join(f"{status} {count}" for status, count in h.counts.items() if count) or "none"),
            ("success rate", f"{h.success_rate:.1%}" if h.success_rate is not None else None),
            ("last delivered", h.last_delivered_at),
            ("last failure", failure),
            ("failing streak", f"{h.consecutive_failures} attempts"),
            ("oldest retrying", retrying),
            ("rate limit", f"{h.rate_limit_per_second}/s" if h.rate_limit_per_second else "none"),
            ("parked", counted(h.backlog.parked, h.backlog.parked_exact)),
            ("slots taken ahead", f"{h.backlog.paced_seconds:g} s" if h.backlog.paced_seconds is not None else None),
        ]
    )


def endpoint_health(client: HookrelayClient, args: argparse.Namespace) -> Result:
    health = client.get_endpoint_health(args.endpoint_id)
    return Result(health, describe_health(health))


# The stats chart's bar: one mark per outcome, stacked in this order, scaled to the busiest hour.
CHART_WIDTH = 30
CHART_MARKS = (("delivered", "#"), ("failed_attempts", "x"), ("dead", "!"))


def stats_bar(values: Sequence[int], busiest: int, width: int = CHART_WIDTH) -> str:
    """`values` stacked as marks, scaled so that `busiest` fills `width`; a non-zero value shows at least once."""
    if busiest <= 0:
        return ""
    return "".join(
        mark * (max(1, round(value * width / busiest)) if value else 0)
        for value, (_, mark) in zip(values, CHART_MARKS, strict=True)
    )


def describe_stats(stats: EndpointStats) -> str:
    totals = [[getattr(hour, name) for name, _ in CHART_MARKS] for hour in stats.hours]
    busiest = max((sum(values) for values in totals), default=0)
    rows = [
        [
            hour.start.astimezone(UTC).strftime("%m-%d %H:00"),
            *values,
            hour.latency_ms.p50,
            hour.latency_ms.p95,
            hour.latency_ms.p99,
            hour.wait_ms.p50,
            hour.wait_ms.p99,
            stats_bar(values, busiest),
        ]
        for hour, values in zip(stats.hours, totals, strict=True)
    ]
    read = f"{stats.deliveries_read} deliveries read"
    if stats.partial:
        read += f" (partial: the window holds more than {stats.max_deliveries_read}; the oldest are not counted)"
    legend = "chart: " + ", ".join(f"{mark} {name.replace('_', ' ')}" for name, mark in CHART_MARKS)
    headers = [
        "HOUR (UTC)",
        "DELIVERED",
        "FAILED",
        "DEAD",
        "P50 MS",
        "P95 MS",
        "P99 MS",
        "WAIT P50",
        "WAIT P99",
        "CHART",
    ]
    return "\n".join([f"endpoint {stats.endpoint_id}: {read}", legend, table(headers, rows)])


def endpoint_stats(client: HookrelayClient, args: argparse.Namespace) -> Result:
    stats = client.get_endpoint_stats(args.endpoint, hours=args.hours)
    return Result(stats, describe_stats(stats))


def send_test(client: HookrelayClient, args: argparse.Namespace) -> Result:
    sent = client.send_test_event(args.endpoint_id)
    return Result(sent, f"test event {sent.event_id} queued as delivery {sent.delivery_id}")


def create_tenant(client: HookrelayClient, args: argparse.Namespace) -> Result:
    tenant = client.create_tenant(args.name)
    text = fields([("tenant", tenant.tenant_id), ("name", tenant.name), ("key", tenant.api_key.key_id)])
    return Result(tenant, f"{text}\ntoken   {tenant.api_key.token}\n(the token is shown only now: store it)")


def create_api_key(client: HookrelayClient, args: argparse.Namespace) -> Result:
    key = client.create_api_key(args.role, args.description)
    text = fields([("key", key.key_id), ("role", key.role), ("token", key.token)])
    return Result(key, text + "\n(the token is shown only now: store it)")


def open_portal(client: HookrelayClient, args: argparse.Namespace) -> Result:
    opened = client.open_portal_session(args.tenant_id, args.ttl, args.capability)
    text = fields(
        [
            ("session", opened.session_id),
            ("tenant", opened.tenant_id),
            ("expires", str(opened.expires_at)),
            ("may", ", ".join(opened.capabilities)),
        ]
    )
    return Result(opened, f"{text}\n{opened.portal_url}\n(the link is shown only now; open it in a browser)")


def revoke_api_key(client: HookrelayClient, args: argparse.Namespace) -> Result:
    client.revoke_api_key(args.key_id)
    return Result({"revoked": args.key_id}, f"revoked {args.key_id}")


EVENT_TYPE_COLUMNS = ("NAME", "SCHEMA", "DEPRECATED", "DESCRIPTION", "UPDATED")


def list_event_types(client: HookrelayClient, args: argparse.Namespace) -> Result:
    if args.all:
        types, next_cursor = list(client.iter_event_types(limit=args.limit)), None
    else:
        page = client.list_event_types(limit=args.limit, cursor=args.cursor)
        types, next_cursor = page.data, page.next_cursor
    rows = [
        (t.name, "yes" if t.data_schema else "-", "yes" if t.deprecated else "-", t.description, t.updated_at)
        for t in types
    ]
    text = table(EVENT_TYPE_COLUMNS, rows) if rows else "no event types registered"
    if next_cursor:
        text += f"\n(more: --cursor {next_cursor}, or --all)"
    return Result({"data": as_json(types), "next_cursor": next_cursor}, text)


def describe_event_type(t: EventType) -> str:
    summary = fields(
        [("name", t.name), ("description", t.description), ("deprecated", t.deprecated), ("updated", t.updated_at)]
    )
    parts = [summary]
    if t.data_schema is not None:
        parts.append("schema:\n" + json.dumps(t.data_schema, indent=2))
    if t.example is not None:
        parts.append("example:\n" + json.dumps(t.example, indent=2))
    return "\n\n".join(parts)


def show_event_type(client: HookrelayClient, args: argparse.Namespace) -> Result:
    event_type = client.get_event_type(args.name)
    return Result(event_type, describe_event_type(event_type))


def put_event_type(client: HookrelayClient, args: argparse.Namespace) -> Result:
    event_type = client.put_event_type(
        args.name,
        description=args.description,
        schema=args.schema,
        example=args.example,
        deprecated=args.deprecated,
    )
    return Result(event_type, describe_event_type(event_type))


def delete_event_type(client: HookrelayClient, args: argparse.Namespace) -> Result:
    client.delete_event_type(args.name)
    return Result({"deleted": args.name}, f"deleted event type {args.name}")


# -- parser -----------------------------------------------------------------------------------------

Command = Callable[[HookrelayClient, argparse.Namespace], Result]


def common_options() -> argparse.ArgumentParser:
    """Accepted before or after the command; SUPPRESS keeps a subcommand's absent flag from hiding the root's."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--api-url", default=argparse.SUPPRESS, help="API base URL (env HOOKRELAY_URL)")
    common.add_argument("--token", default=argparse.SUPPRESS, help="API key (env HOOKRELAY_TOKEN; preferred)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON for scripts")
    common.add_argument("--timeout", type=float, default=argparse.SUPPRESS, help="seconds per request (10)")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = common_options()
    parser = argparse.ArgumentParser(
        prog="python -m hookrelay_client",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(group: Any, name: str, run: Command, help_text: str) -> argparse.ArgumentParser:
        sub = group.add_parser(name, parents=[common], help=help_text, description=help_text)
        sub.set_defaults(run=run)
        return sub

    def following(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--follow", action="store_true", help="poll until done, with a progress bar on stderr")
        sub.add_argument("--poll-interval", type=float, default=1.0, help="seconds between polls (1)")

    sub = command(commands, "send", send, "publish an event (producer key)")
    sub.add_argument("--tenant-id", required=True)
    sub.add_argument("--type", required=True, help="event type, e.g. order.updated")
    sub.add_argument("--data", type=json_object, required=True, help="JSON object, @file.json, or - for stdin")
    sub.add_argument("--ordering-key", help="events with one key get a strictly increasing sequence")
    sub.add_argument("--idempotency-key", help="retrying with the same key publishes once")

    sub = command(commands, "send-batch", send_batch, "publish many events, up to 100 a request (producer key)")
    sub.add_argument("--tenant-id", required=True)
    sub.add_argument(
        "--events",
        type=json_events,
        required=True,
        help='JSON array or JSON Lines of {"type", "data", "ordering_key"?, "idempotency_key"?}; @file, or - for stdin',
    )

    deliveries = commands.add_parser("deliveries", help="list and inspect deliveries").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    sub = command(deliveries, "list", list_deliveries, "list deliveries, newest first")
    sub.add_argument("--status", help="queued, attempting, retrying, delivered, dead, cancelled")
    sub.add_argument("--endpoint-id")
    sub.add_argument("--event-id")
    sub.add_argument("--since", type=moment, help="RFC 3339, 'now', or a duration ago such as 6h")
    sub.add_argument("--until", type=moment)
    recovered = sub.add_mutually_exclusive_group()
    recovered.add_argument(
        "--unrecovered",
        dest="recovered",
        action="store_false",
        default=None,
        help="only deliveries not recovered (with --status dead: the dead still undelivered)",
    )
    recovered.add_argument(
        "--recovered", dest="recovered", action="store_true", help="only those recovered (a replay delivered)"
    )
    sub.add_argument("--limit", type=int, help="page size")
    sub.add_argument("--cursor", help="the next_cursor of the previous page")
    sub.add_argument("--all", action="store_true", help="follow next_cursor through every page")
    sub = command(deliveries, "show", show_delivery, "one delivery with every attempt")
    sub.add_argument("delivery_id")
    sub = command(deliveries, "stats", endpoint_stats, "an endpoint's last hours: outcomes and latency per hour")
    sub.add_argument("--endpoint", required=True, help="the endpoint's id")
    sub.add_argument("--hours", type=int, help="how many hours back, the current one included (default 24)")

    sub = command(commands, "replay", replay, "re-send a delivery's event as a new delivery (same webhook-id)")
    sub.add_argument("delivery_id")

    sub = command(commands, "redrive", start_redrive, "replay an endpoint's dead deliveries in a time window")
    sub.add_argument("endpoint_id")
    sub.add_argument("--since", type=moment, required=True, help="RFC 3339, 'now', or a duration ago such as 6h")
    sub.add_argument("--until", type=moment, help="end of the window (now)")
    sub.add_argument("--status", help="dead (the default) or cancelled")
    sub.add_argument(
        "--include-recovered",
        action="store_true",
        help="also replay deliveries already recovered (a replay of them delivered); skipped by default",
    )
    sub.add_argument("--idempotency-key", help="retrying with the same key starts one redrive")
    following(sub)

    redrives = commands.add_parser("redrives", help="inspect a redrive").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    sub = command(redrives, "show", show_redrive, "a redrive's progress")
    sub.add_argument("redrive_id")
    following(sub)

    events = commands.add_parser("events", help="inspect events").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    sub = command(events, "show", show_event, "an event with the exact body that was signed")
    sub.add_argument("event_id")

    endpoints = commands.add_parser("endpoints", help="manage endpoints (tenant key)").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    sub = command(endpoints, "create", create_endpoint, "register an endpoint; prints its signing secret once")
    where = sub.add_mutually_exclusive_group(required=True)
    where.add_argument("--url", help="the endpoint's URL, or an SQS, SNS or EventBridge ARN (with --role-arn)")
    where.add_argument("--poll", action="store_true", help="pull delivery: read with `endpoints messages`")
    sub.add_argument("--event-type", action="append", help="a type or filter such as order.*; repeatable (*)")
    sub.add_argument("--description")
    sub.add_argument("--max-in-flight", type=int)
    sub.add_argument("--rate-limit", type=int, help="deliveries a second the endpoint accepts (none by default)")
    sub.add_argument("--key-type", choices=KEY_TYPES, help="hmac (a whsec_ secret; the default) or ed25519 (v1a)")
    sub.add_argument("--role-arn", help="for an SQS, SNS or EventBridge ARN as --url: the role hookrelay assumes")
    sub.add_argument("--filter", type=json_object, help=FILTER_HELP)
    add_outbound_options(sub, update=False)
    sub = command(endpoints, "list", list_endpoints, "your endpoints, newest first (every page unless --limit)")
    sub.add_argument("--limit", type=int, help="page size: one page only")
    sub.add_argument("--cursor", help="the next_cursor of the previous page")
    sub = command(endpoints, "show", show_endpoint, "one endpoint")
    sub.add_argument("endpoint_id")
    sub = command(endpoints, "update", update_endpoint, "change an endpoint (only the options given)")
    sub.add_argument("endpoint_id")
    sub.add_argument("--url")
    sub.add_argument("--event-type", action="append", help="replaces the filters; repeatable")
    described = sub.add_mutually_exclusive_group()
    described.add_argument("--description")
    described.add_argument("--clear-description", action="store_true")
    sub.add_argument("--max-in-flight", type=int, help="concurrency of deliveries created from now on")
    role = sub.add_mutually_exclusive_group()
    role.add_argument("--role-arn", help="an AWS destination's role (with an ARN as --url)")
    role.add_argument("--clear-role", action="store_true", help="with a webhook --url: the endpoint leaves AWS")
    filtered = sub.add_mutually_exclusive_group()
    filtered.add_argument("--filter", type=json_object, help=FILTER_HELP + "; replaces the current one")
    filtered.add_argument("--clear-filter", action="store_true", help="remove the content filter")
    add_outbound_options(sub, update=True)
    limited = sub.add_mutually_exclusive_group()
    limited.add_argument("--rate-limit", type=int, help="deliveries a second the endpoint accepts")
    limited.add_argument("--clear-rate-limit", action="store_true", help="no rate limit")
    for name, run, help_text in (
        ("disable", disable_endpoint, "stop sending; new events are recorded as cancelled"),
        ("enable", enable_endpoint, "resume sending"),
        ("delete", delete_endpoint, "delete an endpoint (its deliveries stay in the log)"),
        ("health", endpoint_health, "how its newest deliveries went"),
    ):
        command(endpoints, name, run, help_text).add_argument("endpoint_id")
    sub = command(endpoints, "messages", read_messages, "a poll endpoint's messages; --after acknowledges")
    sub.add_argument("endpoint_id")
    sub.add_argument("--after", type=int, default=0, help="the last seq handled (acknowledges it and those before)")
    sub.add_argument("--limit", type=int)
    sub = command(endpoints, "rotate-secret", rotate_secret, "add a new signing secret; prints it once")
    sub.add_argument("endpoint_id")
    sub.add_argument(
        "--expire-previous-after",
        type=seconds,
        help="how long the current secrets keep signing: seconds or a duration such as 30m, 6h, 7d (1d; 0 = now)",
    )
    sub.add_argument("--key-type", choices=KEY_TYPES, help="the new key's type (default: the newest key's)")

    sub = command(commands, "test", send_test, "send a test event to an endpoint")
    sub.add_argument("endpoint_id")

    tenants = commands.add_parser("tenants", help="manage tenants (admin key)").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    sub = command(tenants, "create", create_tenant, "create a tenant and its first key")
    sub.add_argument("name")

    catalogue = commands.add_parser("event-types", help="the event-type catalogue").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    sub = command(catalogue, "list", list_event_types, "registered event types, by name (any key)")
    sub.add_argument("--limit", type=int, help="page size")
    sub.add_argument("--cursor", help="the next_cursor of the previous page")
    sub.add_argument("--all", action="store_true", help="follow next_cursor through every page")
    sub = command(catalogue, "show", show_event_type, "one event type with its schema and example (any key)")
    sub.add_argument("name")
    sub = command(catalogue, "put", put_event_type, "register or replace an event type (admin key)")
    sub.add_argument("name", help="the event type, e.g. order.created")
    sub.add_argument("--description")
    sub.add_argument("--schema", type=json_object, help="JSON Schema draft 7 of its data: JSON, @file.json, or -")
    sub.add_argument("--example", type=json_object, help="an example data object: JSON, @file.json, or -")
    sub.add_argument("--deprecated", action="store_true", help="mark it deprecated (still accepted and checked)")
    sub = command(catalogue, "delete", delete_event_type, "remove an event type (admin key)")
    sub.add_argument("name")
    portal = commands.add_parser("portal", help="the consumer portal (tenant or admin key)").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    sub = command(portal, "open", open_portal, "make a short-lived link to a tenant's portal page")
    sub.add_argument("--tenant-id", help="the tenant (admin keys); a tenant key opens its own")
    sub.add_argument("--ttl", type=seconds, help="how long the link works: 60s to 1h (default 15m)")
    sub.add_argument(
        "--capability",
        action="append",
        choices=("view", "recover", "manage"),
        help="what the link may do (repeatable; default: view and recover; view always)",
    )

    keys = commands.add_parser("api-keys", help="manage API keys (admin key)").add_subparsers(
        dest="action", required=True, metavar="ACTION"
    )
    sub = command(keys, "create", create_api_key, "issue a key")
    sub.add_argument("--role", required=True, help="admin, producer, or tenant:<tenant id>")
    sub.add_argument("--description")
    sub = command(keys, "revoke", revoke_api_key, "revoke a key")
    sub.add_argument("key_id")
    return parser


def main(
    argv: Sequence[str] | None = None,
    *,
    session: requests.Session | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Run one command; returns the exit code. Output goes to `stdout`, errors and progress to `stderr`."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    args.stderr = err  # for the commands that draw progress
    url = getattr(args, "api_url", None) or os.environ.get("HOOKRELAY_URL")
    token = getattr(args, "token", None) or os.environ.get("HOOKRELAY_TOKEN")
    if not url or not token:
        parser.error("set the API URL and key: --api-url/--token or HOOKRELAY_URL/HOOKRELAY_TOKEN")
    client = HookrelayClient(url, token, timeout=getattr(args, "timeout", 10.0), session=session)
    as_json_output = getattr(args, "json", False)
    try:
        result = args.run(client, args)
    except HookrelayError as error:
        if as_json_output:
            print(json.dumps(asdict(error.problem), indent=2), file=err)
        else:
            print(f"error: {error.problem.describe()}", file=err)
        return EXIT_API_ERROR
    except requests.RequestException as error:
        print(f"error: cannot reach {url}: {error}", file=err)
        return EXIT_UNREACHABLE
    print(json.dumps(as_json(result.data), indent=2) if as_json_output else result.text, file=out)
    return result.exit_code
