"""POST /v1/endpoints/{id}/redrive, GET /v1/redrives/{id}, and the redrive Lambda."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from hookrelay import wiring
from hookrelay.adapters import schema
from hookrelay.adapters.redrive_sqs import job_body
from hookrelay.domain.clock import to_rfc3339, utcnow
from hookrelay.domain.paging import BoundedCount
from hookrelay.domain.status import DeliveryStatus
from hookrelay.services.ports import DeliveryFilter, RedriveJob
from local.lambda_runtime import invoke
from local.schedule import scheduled_event
from local.sqs_source import invoke_batch, poll_once, queue_arn_of, receive
from tests.support.aws import as_function
from tests.support.consumer import ScriptedConsumer
from tests.support.platform import Platform
from tests.support.records import Seeded, make, store

# The consumer's handler was broken for six hours, two days ago (a redrive never reaches past now).
PAGE_SIZE = 20
OUTAGE = (utcnow() - timedelta(days=2)).replace(minute=0, second=0, microsecond=0)


def run_redrive_jobs(platform: Platform) -> int:
    """Feed the redrive Lambda until its queue is empty (each page enqueues the next); returns jobs run."""
    jobs = 0
    while (
        received := poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive")
    ) > 0:
        jobs += received
    return jobs


def redrive(platform: Platform, token: str, endpoint_id: str, key: str | None = None, **body: str):
    headers = {"idempotency-key": key} if key else None
    return platform.call("POST", f"/v1/endpoints/{endpoint_id}/redrive", token, body, headers=headers)


def lay_out_an_outage(platform: Platform, consumer: ScriptedConsumer):
    """A six-hour outage: 50 dead deliveries to the broken endpoint inside it, and around it everything a
    redrive of that window must leave alone."""
    tenant_id, token = platform.new_tenant()
    broken = platform.new_endpoint(token, consumer.url)["id"]
    healthy = platform.new_endpoint(token, consumer.url + "/healthy")["id"]
    other_tenant, _ = platform.new_tenant("other")
    inside = [make(tenant_id, broken, OUTAGE + timedelta(minutes=7 * i)) for i in range(50)]  # 5h43m
    leave_alone: list[Seeded] = [
        make(tenant_id, broken, OUTAGE - timedelta(seconds=1)),  # dead, just before the window
        make(tenant_id, broken, OUTAGE + timedelta(hours=6)),  # dead, at `until` (exclusive)
        make(tenant_id, broken, OUTAGE + timedelta(hours=1), DeliveryStatus.DELIVERED),
        make(tenant_id, broken, OUTAGE + timedelta(hours=2), DeliveryStatus.CANCELLED),
        make(tenant_id, broken, OUTAGE + timedelta(hours=3), expired=True),  # past its retention
        make(tenant_id, healthy, OUTAGE + timedelta(hours=1)),  # dead, another endpoint
        make(other_tenant, broken, OUTAGE + timedelta(hours=1)),  # a stranger's record naming this endpoint
    ]
    store(inside + leave_alone)
    return token, broken, inside, leave_alone


def redrive_services(**settings: int) -> None:
    """Set these on the redrive service of each function that runs pages: the API (the first) and the redrive
    function (the rest)."""
    for function in ("api", "redrive"):
        with as_function(function):
            for name, value in settings.items():
                setattr(wiring.redrive_service(), name, value)


def small_pages(size: int = PAGE_SIZE) -> None:
    redrive_services(page_size=size)


def test_a_redrive_replays_exactly_the_dead_deliveries_in_its_window_once(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    token, broken, inside, _ = lay_out_an_outage(platform, consumer)
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6))}
    small_pages()  # a few pages here; tens of thousands take hundreds alike

    response = redrive(platform, token, broken, **window)
    assert response.status == 202, response.body
    started = response.json()
    assert started["count"] is None and started["status"] == "running"  # counted in the background
    progress = platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()
    assert progress["state"] == "running" and progress["total"] is None and progress["replayed"] == 0

    # The first page's job arrives twice (SQS is at-least-once): the copy must replay nothing.
    platform.sqs.send_message(
        QueueUrl=platform.env[schema.REDRIVE_JOBS_QUEUE.env_var],
        MessageBody=job_body(RedriveJob("redrive", started["redrive_id"], page=0)),
    )
    assert run_redrive_jobs(platform) == -(-len(inside) // PAGE_SIZE) + 1  # one job a page, plus the copy

    done = platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()
    assert done == {
        "id": started["redrive_id"],
        "endpoint_id": broken,
        "since": window["since"],
        "until": window["until"],
        "status_filter": "dead",
        "include_recovered": False,
        "state": "completed",
        "total": len(inside),
        "total_exact": True,
        "replayed": len(inside),
        "skipped": 0,
        "error": None,
        "created_at": done["created_at"],
        "completed_at": done["completed_at"],
    }
    assert platform.pump(max_batches=100) == len(inside)
    received = consumer.wait_for(len(inside))
    assert len(received) == len(inside)
    assert sorted(r.headers["webhook-id"] for r in received) == sorted(s.event.id for s in inside)
    assert {r.body for r in received} == {s.event.body.encode() for s in inside}

    replays = platform.call("GET", f"/v1/deliveries?endpoint_id={broken}&since={done['created_at']}&limit=250", token)
    assert sorted(d["replay_of"] for d in replays.json()["data"]) == sorted(s.delivery.id for s in inside)


def test_cancelled_deliveries_are_redriven_on_request(platform: Platform, consumer: ScriptedConsumer) -> None:
    token, broken, _, leave_alone = lay_out_an_outage(platform, consumer)
    cancelled = leave_alone[3].delivery
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6)), "status": "cancelled"}
    started = redrive(platform, token, broken, **window).json()
    run_redrive_jobs(platform)
    assert platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()["total"] == 1
    assert platform.pump() == 1
    [request] = consumer.wait_for(1)
    assert request.headers["webhook-id"] == cancelled.event_id


def test_the_same_request_repeated_with_its_key_redrives_once(platform: Platform, consumer: ScriptedConsumer) -> None:
    token, broken, inside, _ = lay_out_an_outage(platform, consumer)
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6))}
    first = redrive(platform, token, broken, key="after-the-fix", **window)
    again = redrive(platform, token, broken, key="after-the-fix", **window)
    assert first.status == again.status == 202
    assert again.json() == first.json()
    run_redrive_jobs(platform)
    assert platform.pump(max_batches=100) == len(inside)

    changed = redrive(platform, token, broken, key="after-the-fix", since=window["since"])
    assert changed.status == 422, changed.body


def test_an_empty_window_completes_with_its_first_job(platform: Platform, consumer: ScriptedConsumer) -> None:
    token, broken, _, _ = lay_out_an_outage(platform, consumer)
    before = {"since": to_rfc3339(OUTAGE - timedelta(days=3)), "until": to_rfc3339(OUTAGE - timedelta(days=2))}
    started = redrive(platform, token, broken, **before)
    assert started.status == 202 and started.json()["status"] == "running"
    assert run_redrive_jobs(platform) == 1
    done = platform.call("GET", f"/v1/redrives/{started.json()['redrive_id']}", token).json()
    assert (done["state"], done["total"], done["replayed"]) == ("completed", 0, 0)


def test_the_api_does_not_count_a_redrive_the_background_job_does(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting a long window reads many index pages: inside the API it could outlast the API's time limit."""
    token, broken, inside, _ = lay_out_an_outage(platform, consumer)
    counted: list[DeliveryFilter] = []
    for function in ("api", "redrive"):  # each function's own delivery log, counted as one
        with as_function(function):
            log = wiring.redrive_service().deliveries

        def count(where: DeliveryFilter, now: datetime, up_to: int, real_count: Any = log.count) -> BoundedCount:
            counted.append(where)
            return real_count(where, now, up_to)

        monkeypatch.setattr(log, "count", count)
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6))}
    started = redrive(platform, token, broken, **window).json()
    assert counted == []  # the API answered without counting
    run_redrive_jobs(platform)
    assert len(counted) == 1  # the first job counted, once
    done = platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()
    assert (done["total"], done["replayed"]) == (len(inside), len(inside))


def count_limit(limit: int) -> None:
    """The log entries a redrive's first job counts at most (REDRIVE_COUNT_LIMIT)."""
    redrive_services(count_limit=limit)


def test_a_window_past_the_count_limit_shows_a_floor_until_its_last_page_makes_it_exact(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """A window of millions is counted only so far (its first job must end within its timeout): `total` is then
    "at least", and the last page, which has seen every delivery in scope, records how many there were."""
    token, broken, inside, _ = lay_out_an_outage(platform, consumer)
    small_pages()
    count_limit(PAGE_SIZE + 5)
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6))}
    started = redrive(platform, token, broken, **window).json()
    jobs = platform.env[schema.REDRIVE_JOBS_QUEUE.env_var]

    assert poll_once(platform.sqs, jobs, function="redrive") == 1  # the first page, and the count
    first = platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()
    assert first["total_exact"] is False and first["total"] <= PAGE_SIZE + 5 < len(inside)
    assert first["replayed"] == PAGE_SIZE and first["state"] == "running"

    run_redrive_jobs(platform)
    done = platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()
    assert (done["state"], done["total"], done["total_exact"]) == ("completed", len(inside), True)
    assert (done["replayed"], done["skipped"]) == (len(inside), 0)


def test_a_window_right_at_the_count_limit_is_counted_exactly(platform: Platform, consumer: ScriptedConsumer) -> None:
    """The count looks for one entry past its limit, without reading it back: a window of exactly that many
    entries is exact from the first page (here every entry of the window is one of the endpoint's, matched)."""
    tenant_id, token = platform.new_tenant()
    endpoint = platform.new_endpoint(token, consumer.url)["id"]
    store([make(tenant_id, endpoint, OUTAGE + timedelta(minutes=i)) for i in range(12)])
    small_pages(5)  # the first page is not the last, which would count exactly
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=1))}
    for limit, shown in ((12, (12, True)), (11, (11, False))):
        count_limit(limit)
        started = redrive(platform, token, endpoint, **window).json()
        assert poll_once(platform.sqs, platform.env[schema.REDRIVE_JOBS_QUEUE.env_var], function="redrive") == 1
        first = platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()
        assert (first["total"], first["total_exact"]) == shown
        run_redrive_jobs(platform)


def test_bad_redrive_requests(platform: Platform, consumer: ScriptedConsumer) -> None:
    _, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    since = to_rfc3339(OUTAGE)
    for body, status in (
        ({}, 422),
        ({"since": "yesterday"}, 422),
        ({"since": since, "status": "delivered"}, 422),
        ({"since": since, "until": since}, 422),
        ({"since": since, "extra": 1}, 422),
    ):
        response = platform.call("POST", f"/v1/endpoints/{endpoint_id}/redrive", token, body)
        assert response.status == status, (body, response.body)
    assert platform.call("POST", "/v1/endpoints/ep_nope/redrive", token, {"since": since}).status == 404
    assert platform.call("GET", "/v1/redrives/rdr_nope", token).status == 404


def test_a_redrive_whose_job_keeps_failing_is_failed_by_the_reconciler(
    platform: Platform, consumer: ScriptedConsumer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page that fails every time moves to the jobs' dead-letter queue after `max_receive_count` receives; the
    reconciler's next run ends the redrive `failed` with why, so `redrives show --follow` ends."""
    token, broken, _, _ = lay_out_an_outage(platform, consumer)
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6))}
    started = redrive(platform, token, broken, **window).json()

    def broken_page(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug in the page")

    with as_function("redrive"):  # the redrive function's own service runs the pages
        monkeypatch.setattr(wiring.redrive_service(), "run_page", broken_page)
    url = platform.env[schema.REDRIVE_JOBS_QUEUE.env_var]
    for _ in range(schema.REDRIVE_JOBS_QUEUE.max_receive_count or 0):
        _fail_once(platform, url)
    assert poll_once(platform.sqs, url, function="redrive") == 0  # moved to the jobs' dead-letter queue
    assert platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()["state"] == "running"

    invoke("reconciler", scheduled_event("hookrelay-reconciler"))

    failed = platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()
    assert failed["state"] == "failed" and failed["completed_at"] is not None
    assert "page 0" in failed["error"]
    dead_jobs = platform.env[schema.REDRIVE_JOBS_DEAD_LETTER_QUEUE.env_var]
    assert platform.sqs.receive_message(QueueUrl=dead_jobs).get("Messages", []) == []  # handled and deleted
    invoke("reconciler", scheduled_event("hookrelay-reconciler"))  # nothing left: a no-op
    assert platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json() == failed


def test_a_stale_copy_of_an_old_page_in_the_dead_letter_queue_leaves_a_running_redrive_alone(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    token, broken, _, _ = lay_out_an_outage(platform, consumer)
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6))}
    small_pages()
    started = redrive(platform, token, broken, **window).json()
    url = platform.env[schema.REDRIVE_JOBS_QUEUE.env_var]
    for _ in range(2):  # pages 0 and 1 done; page 2's job waits in the queue
        assert poll_once(platform.sqs, url, function="redrive") == 1
    platform.sqs.send_message(
        QueueUrl=platform.env[schema.REDRIVE_JOBS_DEAD_LETTER_QUEUE.env_var],
        MessageBody=job_body(RedriveJob("redrive", started["redrive_id"], page=0)),
    )

    invoke("reconciler", scheduled_event("hookrelay-reconciler"))

    assert platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()["state"] == "running"
    run_redrive_jobs(platform)
    assert platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()["state"] == "completed"


def test_a_page_that_failed_handing_over_to_the_next_is_carried_on_by_the_reconciler(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """Page 1 recorded, then its job kept failing before the next page's job was enqueued: the redrive goes on."""
    token, broken, inside, _ = lay_out_an_outage(platform, consumer)
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6))}
    small_pages()
    started = redrive(platform, token, broken, **window).json()
    url = platform.env[schema.REDRIVE_JOBS_QUEUE.env_var]
    for _ in range(2):
        assert poll_once(platform.sqs, url, function="redrive") == 1
    platform.sqs.purge_queue(QueueUrl=url)  # page 2's job never sent
    platform.sqs.send_message(
        QueueUrl=platform.env[schema.REDRIVE_JOBS_DEAD_LETTER_QUEUE.env_var],
        MessageBody=job_body(RedriveJob("redrive", started["redrive_id"], page=1)),
    )

    invoke("reconciler", scheduled_event("hookrelay-reconciler"))
    run_redrive_jobs(platform)

    done = platform.call("GET", f"/v1/redrives/{started['redrive_id']}", token).json()
    assert (done["state"], done["replayed"]) == ("completed", len(inside))


def _fail_once(platform: Platform, url: str) -> None:
    """One receive of the job, whose invocation fails; its visibility timeout then passes."""
    [message] = receive(platform.sqs, url, batch_size=1, wait_seconds=0)
    assert invoke_batch(platform.sqs, url, queue_arn_of(platform.sqs, url), [message], "redrive") == 1
    platform.sqs.change_message_visibility(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0)


# --- Idempotent in effect: a delivery whose replay was delivered is recovered, and later redrives skip it ---


def three_dead_in_an_outage(platform: Platform, consumer: ScriptedConsumer) -> tuple[str, str, list[Seeded]]:
    tenant_id, token = platform.new_tenant()
    endpoint_id = platform.new_endpoint(token, consumer.url)["id"]
    dead = [make(tenant_id, endpoint_id, OUTAGE + timedelta(hours=i)) for i in range(3)]
    store(dead)
    return token, endpoint_id, dead


def redrive_to_the_end(platform: Platform, token: str, endpoint_id: str, **body: Any) -> dict[str, Any]:
    window = {"since": to_rfc3339(OUTAGE), "until": to_rfc3339(OUTAGE + timedelta(hours=6))}
    response = platform.call("POST", f"/v1/endpoints/{endpoint_id}/redrive", token, window | body)
    assert response.status == 202, response.body
    run_redrive_jobs(platform)
    done: dict[str, Any] = platform.call("GET", f"/v1/redrives/{response.json()['redrive_id']}", token).json()
    assert done["state"] == "completed", done
    return done


def dead_listed(platform: Platform, token: str, query: str = "") -> dict[str, dict[str, Any]]:
    listed = platform.call("GET", f"/v1/deliveries?status=dead{query}", token)
    assert listed.status == 200, listed.body
    return {d["id"]: d for d in listed.json()["data"]}


def test_a_second_redrive_of_the_window_sends_nothing_the_first_recovered(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """Three dead, the consumer fixed, a redrive of the window sends all three (200): a second redrive of the same
    window re-sends none of them, and the originals, still dead, are marked recovered by their replays."""
    token, endpoint_id, dead = three_dead_in_an_outage(platform, consumer)

    first = redrive_to_the_end(platform, token, endpoint_id)
    assert (first["total"], first["replayed"], first["skipped"]) == (3, 3, 0)
    assert platform.pump() == 3
    assert len(consumer.wait_for(3)) == 3

    second = redrive_to_the_end(platform, token, endpoint_id)
    assert platform.pump() == 0
    assert len(consumer.received) == 3  # nothing sent again
    assert (second["total"], second["replayed"], second["skipped"], second["include_recovered"]) == (3, 0, 3, False)

    # The log: still dead, each recovered by its delivered replay; `recovered=false` lists none of them.
    listed = dead_listed(platform, token)
    assert set(listed) == {s.delivery.id for s in dead}
    for original in listed.values():
        assert original["status"] == "dead" and original["recovered_at"] is not None
        replay = platform.call("GET", f"/v1/deliveries/{original['recovered_by']}", token).json()
        assert (replay["status"], replay["replay_of"]) == ("delivered", original["id"])
        shown = platform.call("GET", f"/v1/deliveries/{original['id']}", token).json()
        assert shown["recovered_by"] == original["recovered_by"]
    assert dead_listed(platform, token, "&recovered=false") == {}
    assert set(dead_listed(platform, token, "&recovered=true")) == set(listed)


def test_include_recovered_redrives_the_recovered_too(platform: Platform, consumer: ScriptedConsumer) -> None:
    token, endpoint_id, dead = three_dead_in_an_outage(platform, consumer)
    redrive_to_the_end(platform, token, endpoint_id)
    assert platform.pump() == 3

    again = redrive_to_the_end(platform, token, endpoint_id, include_recovered=True)
    assert (again["total"], again["replayed"], again["skipped"], again["include_recovered"]) == (3, 3, 0, True)
    assert platform.pump() == 3
    assert sorted(r.headers["webhook-id"] for r in consumer.wait_for(6)) == sorted(2 * [s.event.id for s in dead])
    # Each original stays recovered by the first replay delivered: the mark is written once.
    first_marks = {d["id"]: d["recovered_by"] for d in dead_listed(platform, token).values()}
    assert all(first_marks.values())

    refused = platform.call(
        "POST", f"/v1/endpoints/{endpoint_id}/redrive", token, {"since": to_rfc3339(OUTAGE), "include_recovered": "x"}
    )
    assert refused.status == 422, refused.body


def test_a_redrive_skips_what_a_single_replay_recovered_and_replays_the_rest(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    token, endpoint_id, dead = three_dead_in_an_outage(platform, consumer)
    replayed = platform.call("POST", f"/v1/deliveries/{dead[0].delivery.id}/replay", token)
    assert replayed.status == 202, replayed.body
    assert platform.pump() == 1
    assert dead_listed(platform, token)[dead[0].delivery.id]["recovered_by"] == replayed.json()["delivery_id"]
    assert set(dead_listed(platform, token, "&recovered=false")) == {s.delivery.id for s in dead[1:]}

    done = redrive_to_the_end(platform, token, endpoint_id)
    assert (done["total"], done["replayed"], done["skipped"]) == (3, 2, 1)
    assert platform.pump() == 2
    received = consumer.wait_for(3)
    assert sorted(r.headers["webhook-id"] for r in received) == sorted(s.event.id for s in dead)


def test_a_replay_delivered_but_never_marked_is_found_by_the_next_redrive(
    platform: Platform, consumer: ScriptedConsumer
) -> None:
    """The mark missing (the process died between the replay's record and the mark and its message never came back;
    or the replay was delivered before marks existed): the next redrive looks the replays up, marks, and skips."""
    token, endpoint_id, dead = three_dead_in_an_outage(platform, consumer)
    redrive_to_the_end(platform, token, endpoint_id)
    assert platform.pump() == 3
    table = wiring.delivery_log_service().deliveries.table
    for seeded in dead:
        table.update_item(Key={"id": seeded.delivery.id}, UpdateExpression="REMOVE recovered_by, recovered_at")
    assert set(dead_listed(platform, token, "&recovered=false")) == {s.delivery.id for s in dead}

    again = redrive_to_the_end(platform, token, endpoint_id)
    assert (again["replayed"], again["skipped"]) == (0, 3)
    assert platform.pump() == 0 and len(consumer.received) == 3
    assert dead_listed(platform, token, "&recovered=false") == {}
