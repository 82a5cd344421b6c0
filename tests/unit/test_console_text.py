"""The console's pure text helpers (shared/vdq/console/static/dom.js), run in Node: what the
pages write for values the browser tests do not reach one by one."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

DOM = Path(__file__).resolve().parents[2] / "shared" / "vdq" / "console" / "static" / "dom.js"
NODE = shutil.which("node")


def run(script: str) -> object:
    """What ``script`` (an ES module importing dom.js as ``dom``) prints, as JSON."""
    source = f"import * as dom from {json.dumps(DOM.as_uri())};\n{script}"
    done = subprocess.run([NODE or "node", "--input-type=module", "-e", source],
                          capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.skipif(NODE is None, reason="needs Node")
def test_an_mms_of_media_alone_reads_as_such_on_its_item_page_not_as_a_dash():
    """Found in use: the item page of a picture-only MMS showed a dash as its excerpt and its
    body, read as content lost, where the lists said (media only)."""
    mms = {"method": "sms", "segments": 0, "excerpt": None}
    content = {"body": None, "media_urls": ["https://cdn.example.com/map.png"]}
    shown = run(f"console.log(JSON.stringify(dom.shownContent({json.dumps(mms)}, "
                f"{json.dumps(content)})));")  # fmt: skip
    assert shown == {"body": "(media only)", "media_urls": content["media_urls"]}
    # Text is shown as it is; an email's content is left alone.
    sms = {"method": "sms", "segments": 1, "excerpt": "Code 1234"}
    assert run(f"console.log(JSON.stringify(dom.shownContent({json.dumps(sms)}, "
               "{body: 'Code 1234', media_urls: []})));") == {"body": "Code 1234",
                                                              "media_urls": []}  # fmt: skip
    email = {"method": "email", "excerpt": "Hi"}
    assert run(f"console.log(JSON.stringify(dom.shownContent({json.dumps(email)}, "
               "{subject: 'Hi', text: 'Hello'})));") == {"subject": "Hi", "text": "Hello"}
    assert run(f"console.log(JSON.stringify(dom.excerpt({json.dumps(mms)})));") == \
        "(media only)"  # fmt: skip
