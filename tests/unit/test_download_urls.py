"""Presigned download URLs name the bucket's regional S3 endpoint, in every kind of region.

Offline: presigning is local computation, no request is made. The global endpoint
(``<bucket>.s3.amazonaws.com``) redirects for new buckets outside us-east-1 and never serves
opt-in regions (ap-east-1, me-south-1), so the host is what these tests pin.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from vdq.core.settings import Settings
from vdq.runtime import Runtime

BUCKET = "vdq-attachments-0123abcd"


def _url(monkeypatch: pytest.MonkeyPatch, region: str) -> str:
    monkeypatch.setenv("AWS_DEFAULT_REGION", region)
    monkeypatch.setenv("AWS_REGION", region)
    runtime = Runtime(settings=Settings(attachments_bucket=BUCKET))
    return runtime.files.download_url("files/abc", "report 1.pdf", "application/pdf", 300)


@pytest.mark.parametrize(
    ("region", "host"),
    [
        ("us-east-1", f"{BUCKET}.s3.us-east-1.amazonaws.com"),
        ("eu-west-1", f"{BUCKET}.s3.eu-west-1.amazonaws.com"),
        ("ap-east-1", f"{BUCKET}.s3.ap-east-1.amazonaws.com"),  # opt-in
        ("me-south-1", f"{BUCKET}.s3.me-south-1.amazonaws.com"),  # opt-in
        ("cn-north-1", f"{BUCKET}.s3.cn-north-1.amazonaws.com.cn"),  # another partition
    ],
)
def test_download_urls_use_the_regional_endpoint_and_sigv4(monkeypatch, region, host):
    url = urlparse(_url(monkeypatch, region))
    assert url.scheme == "https"
    assert url.netloc == host
    assert url.path == "/files/abc"
    query = parse_qs(url.query)
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]
    assert f"/{region}/s3/aws4_request" in query["X-Amz-Credential"][0]


def test_the_local_stacks_endpoint_keeps_path_style_urls(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://localhost:5123")
    url = urlparse(_url(monkeypatch, "eu-west-1"))
    assert (url.netloc, url.path) == ("localhost:5123", f"/{BUCKET}/files/abc")
