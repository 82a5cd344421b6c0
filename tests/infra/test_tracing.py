"""X-Ray as a deploy choice: by default a function traces only a request that arrives sampled
(PassThrough) and the API stage traces nothing; ``vdq:tracing=active`` brings back sampling on
every function and the stage (US$0.9 to 2.2 per million emails at 1M a day: the bench's bill).
The default's template: tests/infra/test_stack.py."""

from __future__ import annotations

import pytest

from tests.infra.conftest import TEST_CONTEXT

pytestmark = pytest.mark.infra


def _config(context: dict):
    import aws_cdk as cdk
    from infra.config import DeployConfig

    return DeployConfig.from_context(cdk.App(context={**TEST_CONTEXT, **context}).node)


def _template(config) -> dict:
    """The functions and the API alone, in a stack of their own (seconds, not a whole synth)."""
    import aws_cdk as cdk
    from infra.api import Api
    from infra.functions import Functions

    app = cdk.App()
    stack = cdk.Stack(app, "TracingTest")
    functions = Functions(stack, "Functions", config=config, environment={})
    Api(stack, "Api", config=config, enqueue=functions.enqueue, operator=functions.operator,
        webhook=functions.webhook)  # fmt: skip
    return app.synth().get_stack_by_name("TracingTest").template["Resources"]


def _of(resources: dict, kind: str) -> list[dict]:
    return [r["Properties"] for r in resources.values() if r["Type"] == kind]


def test_tracing_passes_through_by_default_and_active_restores_sampling_everywhere():
    assert _config({}).tracing == "passthrough"
    active = _config({"vdq:tracing": "Active"})
    assert active.tracing == "active"
    resources = _template(active)
    functions = _of(resources, "AWS::Lambda::Function")
    assert len(functions) == 5
    assert all(f["TracingConfig"] == {"Mode": "Active"} for f in functions)
    [stage] = _of(resources, "AWS::ApiGateway::Stage")
    assert stage["TracingEnabled"] is True


def test_an_unknown_tracing_mode_fails_the_synth_naming_the_key():
    from infra.config import ConfigError

    with pytest.raises(ConfigError, match="vdq:tracing"):
        _config({"vdq:tracing": "sometimes"})
