"""The data the queue keeps: the one DynamoDB table and the attachments bucket."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import Capacity
from infra.nag import suppress
from vdq.core import resources

_TYPES = {"S": dynamodb.AttributeType.STRING, "N": dynamodb.AttributeType.NUMBER}


def _attribute(definition: dict, name: str) -> dynamodb.Attribute:
    types = {a["AttributeName"]: a["AttributeType"] for a in definition["AttributeDefinitions"]}
    return dynamodb.Attribute(name=name, type=_TYPES[types[name]])


def _billing(capacity: Capacity | None) -> dict:
    if capacity is None:
        return {"billing_mode": dynamodb.BillingMode.PAY_PER_REQUEST}
    return {"billing_mode": dynamodb.BillingMode.PROVISIONED, **_provisioned_units(capacity)}


def _provisioned_units(capacity: Capacity | None) -> dict:
    if capacity is None:
        return {}
    return {"read_capacity": capacity.min_read, "write_capacity": capacity.min_write}


class Data(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        deletion_protection: bool,
        noncurrent_days: int,
        capacity: Capacity | None = None,
    ) -> None:
        super().__init__(scope, id)
        # The key schema and indexes come from vdq.core.resources, as the local stack's do.
        definition = resources.table_definition("unused")
        keys = {k["KeyType"]: k["AttributeName"] for k in definition["KeySchema"]}
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=_attribute(definition, keys["HASH"]),
            sort_key=_attribute(definition, keys["RANGE"]),
            **_billing(capacity),
            # State-change events are published from the stream, at least once.
            stream=dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            time_to_live_attribute=resources.TABLE_TTL_ATTRIBUTE,
            deletion_protection=deletion_protection,
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.RETAIN if deletion_protection else RemovalPolicy.DESTROY,
        )
        for index in definition["GlobalSecondaryIndexes"]:
            index_keys = {k["KeyType"]: k["AttributeName"] for k in index["KeySchema"]}
            self.table.add_global_secondary_index(
                index_name=index["IndexName"],
                partition_key=_attribute(definition, index_keys["HASH"]),
                sort_key=_attribute(definition, index_keys["RANGE"]),
                projection_type=dynamodb.ProjectionType.KEYS_ONLY,
                **_provisioned_units(capacity),
            )
        if capacity is not None:
            self._auto_scale(
                capacity, [i["IndexName"] for i in definition["GlobalSecondaryIndexes"]]
            )

        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(90))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        suppress(
            self.access_logs, "S1", "this is the access-log bucket; logging it to itself loops"
        )
        self.bucket = s3.Bucket(
            self,
            "Attachments",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="attachments/",
            lifecycle_rules=[
                # A purged file is deleted by the schedule; its old version then goes for good.
                s3.LifecycleRule(
                    id="purged-files",
                    noncurrent_version_expiration=Duration.days(noncurrent_days),
                    expired_object_delete_marker=True,
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                ),
                # Presigned uploads (vdq.intake.uploads) that no email took: an email copies its
                # upload to its files and deletes it, so what is left here is abandoned.
                s3.LifecycleRule(
                    id="untaken-uploads",
                    prefix=resources.UPLOADS_PREFIX,
                    expiration=Duration.days(resources.UPLOADS_EXPIRE_DAYS),
                    noncurrent_version_expiration=Duration.days(resources.UPLOADS_EXPIRE_DAYS),
                ),
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _auto_scale(self, capacity: Capacity, indexes: list[str]) -> None:
        """Target tracking on the table and on every index: an index short of write capacity
        throttles the table's writes, so each scales as the table does."""
        t = self.table
        scalables = [
            t.auto_scale_write_capacity(
                min_capacity=capacity.min_write, max_capacity=capacity.max_write
            ),
            t.auto_scale_read_capacity(
                min_capacity=capacity.min_read, max_capacity=capacity.max_read
            ),
        ]
        for name in indexes:
            scalables.append(
                t.auto_scale_global_secondary_index_write_capacity(
                    name, min_capacity=capacity.min_write, max_capacity=capacity.max_write
                )
            )
            scalables.append(
                t.auto_scale_global_secondary_index_read_capacity(
                    name, min_capacity=capacity.min_read, max_capacity=capacity.max_read
                )
            )
        for scalable in scalables:
            scalable.scale_on_utilization(target_utilization_percent=capacity.target)
