"""The SQS queues, one per `schema.QueueSpec`, each wired to the dead-letter queue its spec names."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import Duration
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from hookrelay.adapters import schema
from stacks.nag import acknowledge


def _dead_letter_targets_first(specs: Iterable[schema.QueueSpec]) -> list[schema.QueueSpec]:
    # A queue's dead-letter queue must exist before it; a spec with no dead letter sorts first.
    return sorted(specs, key=lambda spec: spec.dead_letter is not None)


class Queues(Construct):
    ENCRYPTION = sqs.QueueEncryption.SQS_MANAGED

    def __init__(self, scope: Construct, construct_id: str, *, specs: Iterable[schema.QueueSpec]):
        """`specs`: every queue of the deployment (`schema.all_queues` of its delivery shards)."""
        super().__init__(scope, construct_id)
        ordered = _dead_letter_targets_first(specs)
        self.queues: dict[str, sqs.Queue] = {}
        for spec in ordered:
            self.queues[spec.logical_name] = self._queue(spec)
        self._acknowledge_terminal_queues({spec.dead_letter for spec in ordered if spec.dead_letter})

    def queue(self, spec: schema.QueueSpec) -> sqs.Queue:
        return self.queues[spec.logical_name]

    def _queue(self, spec: schema.QueueSpec) -> sqs.Queue:
        dead_letter = None
        if spec.dead_letter:
            if spec.max_receive_count is None:
                raise ValueError(f"queue {spec.logical_name} names a dead-letter queue but no max_receive_count")
            dead_letter = sqs.DeadLetterQueue(
                queue=self.queues[spec.dead_letter], max_receive_count=spec.max_receive_count
            )
        return sqs.Queue(
            self,
            spec.logical_name,
            fifo=spec.fifo or None,
            content_based_deduplication=spec.content_based_deduplication if spec.fifo else None,
            fifo_throughput_limit=sqs.FifoThroughputLimit.PER_MESSAGE_GROUP_ID if spec.high_throughput else None,
            deduplication_scope=sqs.DeduplicationScope.MESSAGE_GROUP if spec.high_throughput else None,
            visibility_timeout=Duration.seconds(spec.visibility_timeout_seconds),
            retention_period=Duration.seconds(spec.retention_seconds),
            dead_letter_queue=dead_letter,
            encryption=self.ENCRYPTION,
            enforce_ssl=True,
        )

    def _acknowledge_terminal_queues(self, redrive_targets: set[str]) -> None:
        for name, queue in self.queues.items():
            if name not in redrive_targets and not queue.dead_letter_queue:
                acknowledge(
                    queue,
                    "AwsSolutions-SQS3",
                    (
                        "This queue is itself a dead-letter destination: the delivery Lambda sends one message per "
                        "dead delivery here for operators (alarmed on depth and age); nothing consumes it "
                        "automatically, so a further dead-letter queue would have nothing to catch."
                    ),
                )
