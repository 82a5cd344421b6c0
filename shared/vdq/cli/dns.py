"""``vdq dns-records``: the DNS records an SES domain identity needs, read from SES itself.

For each domain VDQ sends from it calls SES v2 ``GetEmailIdentity`` in the deploy region and
prints the Easy DKIM CNAMEs (one per token SES gave the domain), the custom MAIL FROM domain's
MX and SPF records when the identity has one, and a DMARC record to start with, with the
identity's verification and DKIM status, so a deployer can publish the records and check SES
saw them. It reads and changes nothing else: the identity is created with
``aws sesv2 create-email-identity``.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from vdq.cli import render
from vdq.cli.client import EXIT_NOT_FOUND, EXIT_OK, UsageError
from vdq.cli.deployment import aws_client, aws_error, configured_identities

# Easy DKIM: each token is a CNAME to SES's key of that name (SES Developer Guide, Easy DKIM).
DKIM_TARGET = "{token}.dkim.amazonses.com"
# A custom MAIL FROM domain takes SES's bounces (MX) and says SES may send for it (SPF).
MAIL_FROM_MX = "10 feedback-smtp.{region}.amazonses.com"
SPF = '"v=spf1 include:amazonses.com ~all"'
# A policy that only asks for reports: raise p to quarantine once they show mail passing.
DMARC = '"v=DMARC1; p=none"'

HELP = """Print the DNS records an SES domain identity needs (DKIM, SPF, DMARC), as SES reports
them for the identity, with its verification and DKIM status.

The identities are the arguments, else $VDQ_SENDER_IDENTITIES, else cdk.json's
vdq:sesIdentities. The identity must exist in the region (create it first:
aws sesv2 create-email-identity --email-identity example.com). An address identity needs no
DNS records (SES mails it a link); its domain's identity signs its mail.

records:
  CNAME  <token>._domainkey.<domain> -> <token>.dkim.amazonses.com   one per DKIM token
  MX     <mail from domain> -> 10 feedback-smtp.<region>.amazonses.com   with a custom
  TXT    <mail from domain> -> "v=spf1 include:amazonses.com ~all"       MAIL FROM domain
  TXT    _dmarc.<domain> -> "v=DMARC1; p=none"                            a start: reports only

Without a custom MAIL FROM domain SES sends with its own (amazonses.com): SPF passes but does
not align with your domain, and DMARC passes on DKIM alone."""

EXIT_HELP = """exit codes:
  0  the records of every identity were printed
  2  bad command line, no identity to look up, or no AWS credentials or region
  5  SES has no such identity in the region"""


@dataclass(frozen=True)
class Record:
    type: str
    name: str
    value: str
    purpose: str


@dataclass(frozen=True)
class Identity:
    name: str
    region: str
    found: bool
    verified: bool = False
    dkim_status: str = ""
    mail_from_domain: str = ""
    mail_from_status: str = ""
    records: tuple[Record, ...] = ()
    notes: tuple[str, ...] = ()

    def json(self) -> dict[str, Any]:
        data = asdict(self)
        data["records"] = [asdict(r) for r in self.records]
        data["notes"] = list(self.notes)
        return data


def records_of(domain: str, region: str, answer: Mapping[str, Any]) -> Identity:
    """The identity as a ``GetEmailIdentity`` answer describes it, with its DNS records."""
    dkim = answer.get("DkimAttributes") or {}
    mail_from = answer.get("MailFromAttributes") or {}
    records: list[Record] = []
    notes: list[str] = []
    tokens = dkim.get("Tokens") or []
    if dkim.get("SigningAttributesOrigin", "AWS_SES") != "AWS_SES":
        notes.append("DKIM uses your own key (BYODKIM): publish its public key as the TXT record "
                     "of the selector you gave SES")  # fmt: skip
    elif tokens:
        records += [Record("CNAME", f"{t}._domainkey.{domain}", DKIM_TARGET.format(token=t),
                           "DKIM (Easy DKIM)") for t in tokens]  # fmt: skip
    else:
        notes.append("SES gave no DKIM tokens: turn on Easy DKIM for the identity (aws sesv2 "
                     f"put-email-identity-dkim-attributes --email-identity {domain} "
                     "--signing-enabled) and run this again")  # fmt: skip
    mail_from_domain = str(mail_from.get("MailFromDomain") or "")
    if mail_from_domain:
        records += [
            Record("MX", mail_from_domain, MAIL_FROM_MX.format(region=region),
                   "MAIL FROM: bounces reach SES"),
            Record("TXT", mail_from_domain, SPF, "SPF of the MAIL FROM domain"),
        ]  # fmt: skip
    else:
        notes.append("no custom MAIL FROM domain: SPF passes on amazonses.com and DMARC on DKIM. "
                     "For SPF alignment too: aws sesv2 put-email-identity-mail-from-attributes "
                     f"--email-identity {domain} --mail-from-domain mail.{domain}, then run "
                     "this again")  # fmt: skip
    records.append(Record("TXT", f"_dmarc.{domain}", DMARC,
                          "DMARC: start with reports only (add rua=mailto:...)"))  # fmt: skip
    return Identity(
        name=domain, region=region, found=True,
        verified=bool(answer.get("VerifiedForSendingStatus")),
        dkim_status=str(dkim.get("Status") or ""),
        mail_from_domain=mail_from_domain,
        mail_from_status=str(mail_from.get("MailFromDomainStatus") or ""),
        records=tuple(records), notes=tuple(notes),
    )  # fmt: skip


def look_up(name: str, region: str, ses: Any) -> Identity:
    """One identity: an address needs no records; a domain's come from ``GetEmailIdentity``."""
    if "@" in name:
        return Identity(name=name, region=region, found=True, notes=(
            "an address identity needs no DNS records (SES mails it a verification link); the "
            f"identity of its domain, {name.rsplit('@', 1)[1]}, signs its mail when it exists",))
    try:
        answer = ses.get_email_identity(EmailIdentity=name)
    except ses.exceptions.NotFoundException:
        return Identity(name=name, region=region, found=False, notes=(
            f"SES has no identity {name} in {region}: create it with aws sesv2 "
            f"create-email-identity --email-identity {name} --region {region}, then run this "
            "again",))  # fmt: skip
    return records_of(name, region, answer)


def _ses(region: str | None) -> Any:
    return aws_client("sesv2", region)


def run(args: argparse.Namespace, ses_client: Callable[[str | None], Any] = _ses) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    names = args.identities or configured_identities(os.environ)
    if not names:
        raise UsageError("no identity: name one (vdq dns-records example.com), or set "
                         "VDQ_SENDER_IDENTITIES or cdk.json's vdq:sesIdentities")  # fmt: skip
    try:
        ses = ses_client(args.region)
        region = str(ses.meta.region_name)
        found = [look_up(name.strip().lower(), region, ses) for name in names]
    except (BotoCoreError, ClientError) as exc:
        raise aws_error("cannot read SES", exc) from None
    if getattr(args, "json", False):
        print(json.dumps([i.json() for i in found], indent=2))
    else:
        print("\n\n".join(describe(i) for i in found))
    return EXIT_OK if all(i.found for i in found) else EXIT_NOT_FOUND


def describe(identity: Identity) -> str:
    """An identity for people: its status line, its records as a table, its notes."""
    lines = [f"{render.safe(identity.name)} in {identity.region}"]
    if identity.found and identity.records:
        status = (f"  verified for sending: {'yes' if identity.verified else 'no'};  DKIM: "
                  f"{identity.dkim_status or '-'};  MAIL FROM: "
                  f"{identity.mail_from_status or '-'}")  # fmt: skip
        rows = [[r.type, render.safe(r.name), render.safe(r.value), r.purpose]
                for r in identity.records]  # fmt: skip
        lines += [status, "", render.table(rows, ["TYPE", "NAME", "VALUE", "FOR"])]
    lines += [f"  note: {render.safe(n)}" for n in identity.notes]
    return "\n".join(lines)


def add_parser(command: Callable[..., Any]) -> None:
    p = command("dns-records", "print the DNS records (DKIM, SPF, DMARC) of the SES identities "
                "VDQ sends from, as SES reports them", run, [])  # fmt: skip
    p.description = HELP
    p.epilog = EXIT_HELP
    p.add_argument("identities", nargs="*", metavar="IDENTITY",
                   help="an SES domain (or address) identity (default: $VDQ_SENDER_IDENTITIES, "
                        "else cdk.json's vdq:sesIdentities)")  # fmt: skip
    p.add_argument("--region", help="the region VDQ is deployed in (default: $AWS_REGION, else "
                   "boto3's: $AWS_DEFAULT_REGION or the profile's)")
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print JSON for scripts")  # fmt: skip
