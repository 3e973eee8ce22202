"""The DynamoDB tables, one per `schema.TableSpec`: the same definitions the local stack provisions on moto."""

from __future__ import annotations

from collections.abc import Iterable

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from hookrelay.adapters import schema


def _string_key(name: str) -> dynamodb.Attribute:
    return dynamodb.Attribute(name=name, type=dynamodb.AttributeType.STRING)


class Storage(Construct):
    """On-demand, encrypted, point-in-time recoverable tables that outlive the stack (they hold the 30-day record)."""

    BILLING_MODE = dynamodb.BillingMode.PAY_PER_REQUEST
    ENCRYPTION = dynamodb.TableEncryption.AWS_MANAGED
    REMOVAL_POLICY = RemovalPolicy.RETAIN
    # Retained by CloudFormation and refused by DynamoDB itself: deleting one takes an explicit update first.
    DELETION_PROTECTION = True

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        specs: Iterable[schema.TableSpec] = schema.ALL_TABLES,
        removal_policy: RemovalPolicy = REMOVAL_POLICY,
        deletion_protection: bool = DELETION_PROTECTION,
    ):
        """`removal_policy` and `deletion_protection`: the defaults keep the tables; a throwaway stage may not."""
        super().__init__(scope, construct_id)
        self._removal_policy, self._deletion_protection = removal_policy, deletion_protection
        self.tables: dict[str, dynamodb.Table] = {spec.logical_name: self._table(spec) for spec in specs}

    def table(self, spec: schema.TableSpec) -> dynamodb.Table:
        return self.tables[spec.logical_name]

    def _table(self, spec: schema.TableSpec) -> dynamodb.Table:
        table = dynamodb.Table(
            self,
            spec.logical_name,
            partition_key=_string_key(spec.partition_key),
            sort_key=_string_key(spec.sort_key) if spec.sort_key else None,
            billing_mode=self.BILLING_MODE,
            encryption=self.ENCRYPTION,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=spec.ttl_attribute,
            removal_policy=self._removal_policy,
            deletion_protection=self._deletion_protection,
        )
        for index in spec.indexes:
            table.add_global_secondary_index(
                index_name=index.name,
                partition_key=_string_key(index.partition_key),
                sort_key=_string_key(index.sort_key),
                projection_type=dynamodb.ProjectionType(index.projection),
                non_key_attributes=list(index.non_key_attributes) or None,
            )
        return table
