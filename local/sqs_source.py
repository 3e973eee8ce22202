"""The Lambda SQS event source, in miniature: receive a batch, invoke the handler, delete what succeeded.

Partial batch responses are honoured the way Lambda does: the messages named in `batchItemFailures`
stay on the queue and come back after their visibility timeout; everything else is deleted. A
handler that raises fails the whole batch.
"""

from __future__ import annotations

from typing import Any

from local.lambda_runtime import invoke


def to_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    attributes = message.get("Attributes", {})
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {
            "ApproximateReceiveCount": attributes.get("ApproximateReceiveCount", "1"),
            "SentTimestamp": attributes.get("SentTimestamp", "0"),
            "SenderId": attributes.get("SenderId", "local"),
            "ApproximateFirstReceiveTimestamp": attributes.get("ApproximateFirstReceiveTimestamp", "0"),
            "MessageGroupId": attributes.get("MessageGroupId"),
            "MessageDeduplicationId": attributes.get("MessageDeduplicationId"),
            "SequenceNumber": attributes.get("SequenceNumber"),
        },
        "messageAttributes": {},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": "us-east-1",
    }


def poll_once(
    sqs: Any, queue_url: str, *, function: str = "delivery", batch_size: int = 10, wait_seconds: int = 0
) -> int:
    """One receive → invoke → delete cycle. Returns the number of messages received."""
    received = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=batch_size,
        WaitTimeSeconds=wait_seconds,
        MessageSystemAttributeNames=["All"],
    ).get("Messages", [])
    if not received:
        return 0
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    try:
        response = invoke(function, {"Records": [to_record(m, queue_arn) for m in received]}) or {}
    except Exception:  # the whole batch failed: leave every message to come back
        return len(received)
    failed = {failure["itemIdentifier"] for failure in response.get("batchItemFailures", [])}
    done = [m for m in received if m["MessageId"] not in failed]
    for start in range(0, len(done), 10):
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done[start : start + 10])
            ],
        )
    return len(received)
