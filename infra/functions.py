"""One Lambda function per directory of functions/, sharing one dependencies layer."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import AssetHashType, Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra import bundling
from infra.config import FUNCTIONS, DeployConfig
from infra.nag import suppress
from vdq.core import observability

RUNTIME = lambda_.Runtime.PYTHON_3_13  # bundling.PYTHON_VERSION builds the wheels for it
assert RUNTIME.name == f"python{bundling.PYTHON_VERSION}"


class Functions(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: DeployConfig,
        environment: Mapping[str, str],
    ) -> None:
        super().__init__(scope, id)
        deps = bundling.dependencies_layer()
        self.layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            code=lambda_.Code.from_asset(
                str(deps.path), asset_hash=deps.digest, asset_hash_type=_CUSTOM
            ),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description="VDQ runtime dependencies (pyproject [project].dependencies)",
        )
        self.by_name: dict[str, lambda_.Function] = {}
        for name in FUNCTIONS:
            self.by_name[name] = self._function(name, config, environment)
        self.enqueue = self.by_name["enqueue"]
        self.send = self.by_name["send"]
        self.webhook = self.by_name["webhook"]
        self.operator = self.by_name["operator"]
        self.schedule = self.by_name["schedule"]

    def _function(
        self, name: str, config: DeployConfig, environment: Mapping[str, str]
    ) -> lambda_.Function:
        code = bundling.function_code(name)
        log_group = logs.LogGroup(
            self,
            f"{name.title()}Logs",
            retention=retention(config.log_retention_days),
            removal_policy=RemovalPolicy.DESTROY,
        )
        function = lambda_.Function(
            self,
            name.title(),
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=f"functions.{name}.handler.handler",
            code=lambda_.Code.from_asset(
                str(code.path), asset_hash=code.digest, asset_hash_type=_CUSTOM
            ),
            layers=[self.layer],
            memory_size=config.memory_mb[name],
            timeout=Duration.seconds(config.timeout_seconds[name]),
            tracing=lambda_.Tracing.ACTIVE if config.tracing == "active"
            else lambda_.Tracing.PASS_THROUGH,
            log_group=log_group,
            logging_format=lambda_.LoggingFormat.JSON,
            system_log_level_v2=getattr(lambda_.SystemLogLevel, config.system_log_level),
            environment={
                **environment,
                "POWERTOOLS_SERVICE_NAME": observability.SERVICE,
                "POWERTOOLS_METRICS_NAMESPACE": observability.NAMESPACE,
            },
            description=f"VDQ {name}",
        )
        suppress(
            function,
            "L1",
            f"pinned to python{bundling.PYTHON_VERSION}: the wheelhouse of the layer is built "
            "for it (infra/bundling.py); move both together",
        )
        return function

    def consume(
        self,
        function: lambda_.Function,
        queue: sqs.IQueue,
        *,
        batch_size: int,
        batching_window_seconds: int,
        max_concurrency: int | None = None,
    ) -> None:
        """An SQS event source that reports batch item failures (one bad message, one retry)."""
        function.add_event_source(
            sources.SqsEventSource(
                queue,
                batch_size=batch_size,
                max_batching_window=Duration.seconds(batching_window_seconds),
                report_batch_item_failures=True,
                max_concurrency=max_concurrency,
            )
        )


_CUSTOM = AssetHashType.CUSTOM  # the bundle's own input hash: no re-fingerprinting on synth
_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
    3653: logs.RetentionDays.TEN_YEARS,
}


def retention(days: int) -> logs.RetentionDays:
    if days not in _RETENTION:
        raise ValueError(f"vdq:logRetentionDays must be one of {sorted(_RETENTION)}")
    return _RETENTION[days]
