"""``vdq dns-records``: the DNS records of an SES domain identity, read with SES v2's
GetEmailIdentity (moto for the calls and the missing identity; botocore's Stubber, which checks
an answer against the service model, for the MAIL FROM attributes moto does not return)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import NoCredentialsError
from botocore.stub import Stubber
from moto import mock_aws

from vdq.cli import dns
from vdq.cli.main import main, parser

TOKENS = ["ab3k7qz2v5xyw4c6d8f9g0h1j2k3l4m5", "n6p7q8r9s0t1u2v3w4x5y6z7a8b9c0d1",
          "e2f3g4h5i6j7k8l9m0n1o2p3q4r5s6t7"]  # fmt: skip


@pytest.fixture
def ses() -> Iterator[Any]:
    """moto's SES v2 with example.com as ``create-email-identity`` leaves it: DKIM pending,
    with the three tokens SES gives a domain (moto makes none: they are set on its record)."""
    with mock_aws():
        client = boto3.client("sesv2", region_name="us-east-1")
        client.create_email_identity(EmailIdentity="example.com")
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.sesv2.models import sesv2_backends

        record = sesv2_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].get_email_identity("example.com")
        record.dkim_attributes.update(Tokens=TOKENS, Status="PENDING", SigningEnabled=True)
        yield client


@pytest.fixture(autouse=True)
def no_configured_identities(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.delenv("VDQ_SENDER_IDENTITIES", raising=False)
    monkeypatch.chdir(tmp_path)  # no cdk.json


def test_a_domain_gets_its_dkim_cnames_and_dmarc_and_its_status(ses, capsys):
    assert main(["dns-records", "example.com"]) == 0
    out = capsys.readouterr().out
    for token in TOKENS:
        row = next(line for line in out.splitlines() if line.startswith("CNAME") and token in line)
        assert row.split()[1:3] == [f"{token}._domainkey.example.com",
                                    f"{token}.dkim.amazonses.com"]  # fmt: skip
    dmarc = next(line for line in out.splitlines() if "_dmarc.example.com" in line)
    assert dmarc.startswith("TXT") and '"v=DMARC1; p=none"' in dmarc
    assert "verified for sending: no" in out and "DKIM: PENDING" in out
    assert "put-email-identity-mail-from-attributes --email-identity example.com" in out


def test_json_lists_each_record_for_scripts(ses, capsys):
    assert main(["dns-records", "--json", "example.com"]) == 0
    [identity] = json.loads(capsys.readouterr().out)
    assert identity["name"] == "example.com" and identity["region"] == "us-east-1"
    assert [r["type"] for r in identity["records"]] == ["CNAME"] * 3 + ["TXT"]
    assert identity["records"][0]["value"] == f"{TOKENS[0]}.dkim.amazonses.com"
    assert identity["dkim_status"] == "PENDING" and identity["verified"] is False


def test_an_identity_ses_lacks_exits_5_with_the_command_that_creates_it(ses, capsys):
    assert main(["dns-records", "example.org"]) == 5
    out = capsys.readouterr().out
    assert "aws sesv2 create-email-identity --email-identity example.org" in out


def test_the_identities_default_to_the_settings_and_an_address_needs_no_records(
        ses, capsys, monkeypatch):  # fmt: skip
    monkeypatch.setenv("VDQ_SENDER_IDENTITIES", "example.com,shop@example.org")
    assert main(["dns-records"]) == 0
    out = capsys.readouterr().out
    assert f"{TOKENS[0]}._domainkey.example.com" in out
    assert "shop@example.org" in out and "needs no DNS records" in out


def test_the_identities_default_to_cdk_json(ses, capsys, tmp_path):
    (tmp_path / "cdk.json").write_text(json.dumps({"context": {
        "vdq:sesIdentities": ["example.com"]}}))  # fmt: skip
    assert main(["dns-records"]) == 0
    assert "_dmarc.example.com" in capsys.readouterr().out


def test_no_identity_anywhere_is_a_usage_error_that_says_where_to_name_one(capsys):
    assert main(["dns-records"]) == 2
    err = capsys.readouterr().err
    assert "VDQ_SENDER_IDENTITIES" in err and "vdq:sesIdentities" in err


def _args(*argv: str) -> Any:
    return parser().parse_args(["dns-records", *argv])


def test_a_custom_mail_from_domain_gets_its_mx_and_spf_records(capsys):
    client = boto3.client("sesv2", region_name="eu-west-1")
    answer = {  # as SES answers for a domain with Easy DKIM and a custom MAIL FROM domain
        "IdentityType": "DOMAIN", "FeedbackForwardingStatus": True,
        "VerifiedForSendingStatus": True, "VerificationStatus": "SUCCESS",
        "DkimAttributes": {"SigningEnabled": True, "Status": "SUCCESS", "Tokens": TOKENS,
                           "SigningAttributesOrigin": "AWS_SES"},
        "MailFromAttributes": {"MailFromDomain": "mail.example.com",
                               "MailFromDomainStatus": "SUCCESS",
                               "BehaviorOnMxFailure": "USE_DEFAULT_VALUE"},
        "Policies": {}, "Tags": [],
    }  # fmt: skip
    with Stubber(client) as stub:  # the Stubber refuses an answer the model does not allow
        stub.add_response("get_email_identity", answer, {"EmailIdentity": "example.com"})
        assert dns.run(_args("example.com"), ses_client=lambda region: client) == 0
    out = capsys.readouterr().out
    assert "mail.example.com" in out and "10 feedback-smtp.eu-west-1.amazonses.com" in out
    assert '"v=spf1 include:amazonses.com ~all"' in out
    assert "verified for sending: yes" in out and "MAIL FROM: SUCCESS" in out
    assert "put-email-identity-mail-from-attributes" not in out


def test_no_credentials_is_a_usage_error_naming_them(capsys):
    def without_credentials(region: str | None) -> Any:
        raise NoCredentialsError()

    from vdq.cli.client import UsageError

    with pytest.raises(UsageError, match="no AWS credentials"):
        dns.run(_args("example.com"), ses_client=without_credentials)


def test_aws_region_wins_over_the_default_region_as_in_the_aws_cli(capsys, monkeypatch):
    """The deploy checklist exports AWS_REGION, which the AWS CLI v2 and the CDK CLI read and
    boto3 does not: the identity is looked up there, not in the profile's region."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")  # a profile's region, say
    monkeypatch.setenv("AWS_REGION", "eu-west-2")
    with mock_aws():
        boto3.client("sesv2", region_name="eu-west-2").create_email_identity(
            EmailIdentity="example.com")  # fmt: skip
        assert main(["dns-records", "example.com"]) == 0
        assert "example.com in eu-west-2" in capsys.readouterr().out
        monkeypatch.delenv("AWS_DEFAULT_REGION")
        assert main(["dns-records", "example.com"]) == 0
        assert main(["dns-records", "--region", "us-east-1", "example.com"]) == 5
