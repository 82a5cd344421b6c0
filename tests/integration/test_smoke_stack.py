"""``vdq smoke --stack``'s way to the API on moto: the stack's outputs from CloudFormation, the
machine client's secret from Cognito, and a client-credentials token from the TokenUrl output
(a token endpoint on loopback that checks the client's id and secret)."""

from __future__ import annotations

import argparse
import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import boto3
import pytest
from moto import mock_aws

from vdq.cli.client import UsageError
from vdq.cli.deployment import connect


@pytest.fixture
def token_endpoint() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            basic = base64.b64decode(self.headers["Authorization"].split()[1]).decode()
            seen.append({"auth": basic, **{k: v[0] for k, v in form.items()}})
            body = json.dumps({"access_token": "machine-token", "expires_in": 3600,
                               "token_type": "Bearer"}).encode()  # fmt: skip
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/oauth2/token", seen
    server.shutdown()
    server.server_close()


def args(**given: str | None) -> argparse.Namespace:
    return argparse.Namespace(**{"api_url": None, "token": None, "stack": None,
                                 "region": "eu-west-1", **given})  # fmt: skip


def test_smoke_reads_the_stack_outputs_the_secret_and_gets_a_machine_token(token_endpoint,
                                                                           monkeypatch, tmp_path):
    url, seen = token_endpoint
    monkeypatch.chdir(tmp_path)  # no cdk.json: the default stack name
    monkeypatch.delenv("VDQ_API_URL", raising=False)
    monkeypatch.setenv("VDQ_TOKEN", "a-local-stack-token")  # for --api-url runs: not used here
    with mock_aws():
        cognito = boto3.client("cognito-idp", region_name="eu-west-1")
        pool = cognito.create_user_pool(PoolName="vdq")["UserPool"]["Id"]
        client = cognito.create_user_pool_client(UserPoolId=pool, ClientName="machine",
                                                 GenerateSecret=True)["UserPoolClient"]
        outputs = {"ApiUrl": "https://api.example.test/v1/", "TokenUrl": url,
                   "UserPoolId": pool, "MachineClientId": client["ClientId"]}
        template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                    "Outputs": {k: {"Value": v} for k, v in outputs.items()}}
        cfn = boto3.client("cloudformation", region_name="eu-west-1")
        cfn.create_stack(StackName="Vdq", TemplateBody=json.dumps(template))

        api, where = connect(args())
        assert (api.url, api.token, where) == ("https://api.example.test/v1", "machine-token",
                                               "stack Vdq")  # fmt: skip
        assert seen == [{"auth": f"{client['ClientId']}:{client['ClientSecret']}",
                         "grant_type": "client_credentials"}]  # fmt: skip

        # --api-url with --stack: the stack's token, another URL; --token: no token request.
        api, _ = connect(args(stack="Vdq", api_url="http://127.0.0.1:9"))
        assert (api.url, api.token) == ("http://127.0.0.1:9", "machine-token")
        api, _ = connect(args(stack="Vdq", token="mine"))
        assert api.token == "mine" and len(seen) == 2

        with pytest.raises(UsageError, match="cannot read stack 'Other': Stack with id Other "
                           "does not exist"):  # fmt: skip
            connect(args(stack="Other"))
