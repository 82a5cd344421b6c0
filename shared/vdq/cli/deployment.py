"""Where a deployment's API is and a token for it, for ``vdq smoke``.

A stack: its CloudFormation outputs (``describe_stacks``), the machine client's secret (not an
output: ``cognito-idp describe_user_pool_client``) and an access token by the client-credentials
grant at the ``TokenUrl`` output. Or ``--api-url`` with ``--token`` / ``$VDQ_TOKEN``, or a token
made with ``$VDQ_LOCAL_JWT_SECRET`` for the local stack. Defaults come from ``./cdk.json`` when
smoke runs in the repository that deployed.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vdq.cli.client import ApiError, Client, UsageError
from vdq.core import resources

# The stack outputs smoke reads (infra/stack.py declares them).
OUTPUTS = {"api_url": "ApiUrl", "token_url": "TokenUrl", "user_pool_id": "UserPoolId",
           "client_id": "MachineClientId"}  # fmt: skip


@dataclass(frozen=True)
class StackOutputs:
    api_url: str
    token_url: str
    user_pool_id: str
    client_id: str


def outputs_of(answer: dict[str, Any], stack: str) -> StackOutputs:
    """The outputs smoke needs from a ``describe_stacks`` answer (UsageError naming any missing)."""
    stacks = answer.get("Stacks") or []
    if not stacks:
        raise UsageError(f"stack {stack!r} not found")
    values = {o.get("OutputKey"): o.get("OutputValue") for o in stacks[0].get("Outputs") or []}
    missing = [name for name in OUTPUTS.values() if not values.get(name)]
    if missing:
        status = stacks[0].get("StackStatus", "?")
        raise UsageError(f"stack {stack!r} ({status}) has no output {', '.join(missing)}: is it "
                         "VDQ's stack, and deployed?")  # fmt: skip
    return StackOutputs(**{key: str(values[name]) for key, name in OUTPUTS.items()})


_OR_API = "; or pass --api-url and --token"


def aws_error(action: str, exc: Exception, hint: str = "") -> UsageError:
    """The usage error of a command whose AWS request failed: ``action``, then why (no
    credentials, no region, or what AWS said), then ``hint``."""
    from botocore.exceptions import ClientError, NoCredentialsError, NoRegionError

    if isinstance(exc, NoCredentialsError):
        why = "no AWS credentials (aws configure or AWS_PROFILE)"
    elif isinstance(exc, NoRegionError):
        why = "no AWS region (--region, AWS_REGION or the profile's)"
    elif isinstance(exc, ClientError):
        why = exc.response.get("Error", {}).get("Message") or str(exc)
    else:
        why = str(exc)
    return UsageError(f"{action}: {why}{hint}")


def read_stack(stack: str, region: str | None, cfn: Any = None) -> StackOutputs:
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        cfn = cfn or aws_client("cloudformation", region)
        return outputs_of(cfn.describe_stacks(StackName=stack), stack)
    except (BotoCoreError, ClientError) as exc:
        raise aws_error(f"cannot read stack {stack!r}", exc, _OR_API) from None


def machine_secret(outputs: StackOutputs, region: str | None, cognito: Any = None) -> str:
    """The machine client's secret: not a stack output, so read from Cognito."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        cognito = cognito or aws_client("cognito-idp", region)
        client = cognito.describe_user_pool_client(UserPoolId=outputs.user_pool_id,
                                                   ClientId=outputs.client_id)  # fmt: skip
    except (BotoCoreError, ClientError) as exc:
        raise aws_error("cannot read the machine client's secret", exc, _OR_API) from None
    secret = client.get("UserPoolClient", {}).get("ClientSecret")
    if not secret:
        raise UsageError(f"the machine client {outputs.client_id} has no secret")
    return str(secret)


def aws_region(flag: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The region a command's AWS calls go to, in the AWS CLI v2's order: ``--region``, then
    ``$AWS_REGION``, then boto3's own (``$AWS_DEFAULT_REGION``, the profile). boto3 reads no
    ``AWS_REGION``, so without this a deployer who exported it, as the deploy checklist does,
    would read SES or the stack in the profile's region, or in none."""
    return flag or environ.get("AWS_REGION") or None


def aws_client(service: str, region: str | None) -> Any:
    """A client of its own session: credentials and region as the environment says now."""
    import boto3

    return boto3.session.Session(region_name=aws_region(region)).client(service)



def machine_token(outputs: StackOutputs, secret: str, session: Any = None) -> str:
    """An access token by the client-credentials grant (every scope the client has)."""
    import requests

    session = session or requests.Session()
    try:
        answer = session.post(outputs.token_url, data={"grant_type": "client_credentials"},
                              auth=(outputs.client_id, secret), timeout=30)  # fmt: skip
    except requests.RequestException as exc:
        raise ApiError(0, "unreachable", f"cannot reach the token endpoint {outputs.token_url} "
                       f"({type(exc).__name__})") from None  # fmt: skip
    try:
        data = answer.json()
    except ValueError:
        data = {}
    token = data.get("access_token") if isinstance(data, dict) else None
    if answer.status_code != 200 or not token:
        error = data.get("error") if isinstance(data, dict) else None
        raise ApiError(answer.status_code, str(error or "token_error"),
                       f"the token endpoint refused the machine client ({error or 'no token'})")
    return str(token)


def _cdk_context(key: str) -> Any:
    """A context value of ./cdk.json (smoke run from the repository that deployed), or None."""
    try:
        return json.loads(Path("cdk.json").read_text()).get("context", {}).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def configured_identities(env: Mapping[str, str]) -> list[str]:
    """The SES identities of the settings, else of cdk.json's ``vdq:sesIdentities``."""
    raw: Any = env.get("VDQ_SENDER_IDENTITIES") or _cdk_context("vdq:sesIdentities") or ""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = raw.split(",")
    identities = [str(i).strip() for i in (raw if isinstance(raw, list) else [raw]) if i]
    return [i for i in identities if i]


def default_sender(env: Mapping[str, str]) -> str | None:
    """The first SES identity of the settings or cdk.json; a domain as ``vdq-smoke@domain``."""
    identities = configured_identities(env)
    if not identities:
        return None
    first = identities[0]
    return first if "@" in first else f"vdq-smoke@{first}"


def connect(args: argparse.Namespace) -> tuple[Client, str]:
    """The API client and where it points (for the first line). With a stack (``--stack``, or
    no API URL at all) only an explicit ``--token`` replaces the machine token: $VDQ_API_URL and
    $VDQ_TOKEN belong to ``--api-url`` runs (a local stack's token is no use on AWS)."""
    url = None if args.stack else args.api_url or os.environ.get("VDQ_API_URL")
    if not url:
        stack = args.stack or _cdk_context("vdq:stackName") or resources.STACK_NAME
        outputs = read_stack(stack, args.region)
        url, where = args.api_url or outputs.api_url, f"stack {stack}"
        token = args.token or machine_token(outputs, machine_secret(outputs, args.region))
    else:
        where = url
        token = args.token or os.environ.get("VDQ_TOKEN") or _local_token()
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"the API URL {url!r} is not an http:// or https:// URL")
    return Client(url, token), where


def _local_token() -> str:
    """A vdq-admins token of the local stack, made with $VDQ_LOCAL_JWT_SECRET (as vdq token)."""
    secret = os.environ.get("VDQ_LOCAL_JWT_SECRET")
    if not secret:
        raise UsageError("no token: set VDQ_TOKEN or pass --token (or set VDQ_LOCAL_JWT_SECRET "
                         "for the local stack; --stack gets a deployment's own)")  # fmt: skip
    from vdq.cli.commands import _needs_local_extra

    _needs_local_extra()
    from vdq.local.front import make_token

    return make_token(secret, ["vdq-admins"], subject="vdq-smoke", hours=1)
