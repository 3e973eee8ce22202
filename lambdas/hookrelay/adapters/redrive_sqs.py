"""SQS for redrive and the reconciler: the redrive jobs queue; the dead-letter and poison queues, drained."""

from __future__ import annotations

import json
from typing import Any

from hookrelay.adapters.records import from_data, to_data
from hookrelay.adapters.schema import SQS_MAX_BATCH
from hookrelay.adapters.sqs import parse_message
from hookrelay.domain.redrive import Redrive
from hookrelay.services.ports import QueuedMessage, RedriveJob

# Long enough that a message kept during a drain does not come back within the same run.
DRAIN_VISIBILITY_SECONDS = 15 * 60


def job_body(job: RedriveJob) -> str:
    document: dict[str, Any] = {"kind": job.kind, "redrive_id": job.redrive_id, "page": job.page}
    if job.redrive is not None:
        document["redrive"] = to_data(job.redrive)
    return json.dumps(document, separators=(",", ":"))


def parse_job(body: str) -> RedriveJob:
    data = json.loads(body)
    carried = data.get("redrive")
    return RedriveJob(
        kind=str(data["kind"]),
        redrive_id=data.get("redrive_id"),
        page=int(data.get("page", 0)),
        redrive=from_data(Redrive, carried) if carried is not None else None,
    )


class SqsRedriveJobs:
    def __init__(self, sqs: Any, queue_url: str) -> None:
        self.sqs = sqs
        self.queue_url = queue_url

    def enqueue(self, job: RedriveJob) -> None:
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=job_body(job))


class SqsMessageSource:
    """A queue read by an operator's drain (dead letters, poison messages), not by an event source."""

    def __init__(self, sqs: Any, queue_url: str, *, wait_seconds: int = 1) -> None:
        self.sqs = sqs
        self.queue_url = queue_url
        # Long polling asks every SQS server, so an empty answer means empty, not "missed a sample".
        self.wait_seconds = wait_seconds

    def receive(self, max_messages: int) -> list[QueuedMessage]:
        received = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=max(1, min(SQS_MAX_BATCH, max_messages)),
            WaitTimeSeconds=self.wait_seconds,
            VisibilityTimeout=DRAIN_VISIBILITY_SECONDS,
            MessageSystemAttributeNames=["SentTimestamp", "MessageGroupId", "MessageDeduplicationId"],
        ).get("Messages", [])
        return [self._message(m) for m in received]

    def delete(self, message: QueuedMessage) -> None:
        self.sqs.delete_message(QueueUrl=self.queue_url, ReceiptHandle=message.receipt_handle)

    @staticmethod
    def _message(message: dict[str, Any]) -> QueuedMessage:
        attributes = message.get("Attributes", {})
        group_id = attributes.get("MessageGroupId")
        delivery, job = None, None
        try:
            if group_id is not None:  # FIFO: the poison queue holds delivery messages as they were sent
                delivery = parse_message(message["Body"], group_id, attributes.get("MessageDeduplicationId", ""))
            else:  # the redrive jobs' dead letters hold jobs as they were sent (the other queues: not jobs)
                job = _job_or_none(message["Body"])
        except (ValueError, KeyError, TypeError):
            pass
        return QueuedMessage(
            message_id=message["MessageId"],
            receipt_handle=message["ReceiptHandle"],
            body=message["Body"],
            sent_at_ms=int(attributes.get("SentTimestamp", "0")),
            delivery=delivery,
            job=job,
        )


def _job_or_none(body: str) -> RedriveJob | None:
    data = json.loads(body)
    return parse_job(body) if isinstance(data, dict) and "kind" in data else None
