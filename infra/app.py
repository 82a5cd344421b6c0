"""Entry point of the CDK app (cdk.json runs ``python -m infra.app``).

cdk-nag's AwsSolutions pack validates every synth: an unacknowledged finding stops it.
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.config import DeployConfig
from infra.stack import VdqStack
from vdq.core import resources


def build(app: cdk.App) -> VdqStack:
    """The VDQ stack on ``app``, with the checks registered."""
    config = DeployConfig.from_context(app.node)
    config.require_ses_identities()  # the send role's only From identities: no default fits
    name = app.node.try_get_context("vdq:stackName") or resources.STACK_NAME
    # Environment-agnostic: one template for any account and region (the pseudo parameters).
    stack = VdqStack(app, name, config=config)
    cdk.Tags.of(stack).add("app", "vdq")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    return stack


def main() -> None:
    started = time.monotonic()
    app = cdk.App()
    build(app)
    app.synth()
    print(f"vdq synth took {time.monotonic() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
