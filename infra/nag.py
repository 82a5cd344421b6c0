"""cdk-nag v3 acknowledgements: each on one construct (and what it contains), with a reason."""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct


def suppress(
    construct: IConstruct,
    rule: str,
    reason: str,
    findings: list[str] | None = None,
) -> None:
    """Acknowledge ``AwsSolutions-<rule>`` or, with findings, only ``...-<rule>[<finding>]``."""
    ids = [f"AwsSolutions-{rule}[{f}]" for f in findings] if findings else [f"AwsSolutions-{rule}"]
    Validations.of(construct).acknowledge(*(Acknowledgment(id=i, reason=reason) for i in ids))


def logical_id(construct: IConstruct) -> str:
    """The CloudFormation logical ID of a construct's resource, as findings name it."""
    resource = construct.node.default_child or construct
    stack = Stack.of(construct)
    return str(stack.resolve(stack.get_logical_id(resource)))  # type: ignore[arg-type]
