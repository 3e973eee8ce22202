"""moto's SQS as the local stack patches it (local/moto_sqs.py): a send or a receive reads a queue's settings without
the approximate counts (each a scan of the whole queue), and the settings read are moto's own; the clock is moto's,
read without building datetimes."""

from __future__ import annotations

from datetime import datetime

import boto3
from moto import mock_aws
from moto.core import utils
from moto.sqs import models
from moto.sqs.models import Queue, sqs_backends

from local import moto_sqs

ACCOUNT = "123456789012"
MICROSECOND = 1e-6


def test_a_send_reads_the_queues_settings_as_moto_does_but_not_its_counts() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(
            QueueName="q.fifo",
            Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true", "MessageRetentionPeriod": "600"},
        )["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="m", MessageGroupId="g")
        queue: Queue = sqs_backends[ACCOUNT]["us-east-1"].queues["q.fifo"]
        whole = Queue.attributes.fget(queue)  # type: ignore[attr-defined]
        moto_sqs.install()
        try:
            moto_sqs._settings_only.active = True
            settings = queue.attributes
        finally:
            moto_sqs._settings_only.active = False
            moto_sqs.uninstall()
    assert whole["ApproximateNumberOfMessages"] == 1  # the control: moto counts the message
    assert settings == {name: value for name, value in whole.items() if name not in moto_sqs._COUNTS}
    assert settings["ContentBasedDeduplication"] == "true"
    assert Queue.attributes.fget(queue)["ApproximateNumberOfMessages"] == 1  # type: ignore[attr-defined]  # put back


def test_the_clock_is_motos_clock_read_without_its_datetimes() -> None:
    moto_sqs.install()
    try:
        assert models.unix_time is moto_sqs.unix_time
        before, patched, after = utils.unix_time(), models.unix_time(), utils.unix_time()
        millis = models.unix_time_millis()
        at = datetime(2026, 12, 2, 6, 0, 0, 123000)
        assert models.unix_time_millis(at) == utils.unix_time_millis(at)
    finally:
        moto_sqs.uninstall()
    # moto's readings are datetimes, whole microseconds: `after` may be up to one short of a float read before it.
    assert before <= patched <= after + MICROSECOND
    assert 1000 * before <= millis <= 1000 * (utils.unix_time() + MICROSECOND)
    assert models.unix_time is utils.unix_time  # put back
