"""The documentation site: it builds with ``mkdocs build --strict`` (no broken link, missing
anchor or page left out), fetches nothing from elsewhere, its generated pages are current and
complete, the runbook covers every alarm the stack creates, and the README's links land."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from docsite.pages import COMMITTED, stale

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
MAX_README_LINES = 250


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def _page(site: Path, doc: str) -> str:
    """The built HTML of ``docs/<doc>`` (``x/y.md`` is served as ``x/y/index.html``)."""
    path = doc.removesuffix(".md")
    if path == "index" or path.endswith("/index"):
        path = path.removesuffix("index").rstrip("/")
    return (site / path / "index.html").read_text()


def test_the_site_builds_strict_with_every_generated_page(site):
    for doc in ("reference/api.md", "reference/settings.md", "reference/cli.md", "security.md"):
        assert "<h1" in _page(site, doc), doc
    assert "Threats and controls" in _page(site, "security.md")


def test_the_site_loads_nothing_from_elsewhere(site):
    """No script, style sheet, font or image from another host (Material's own bundle fetches a
    polyfill only for a browser without ResizeObserver, and Mermaid only for a page with a
    diagram: the site has none)."""
    for page in site.rglob("*.html"):
        html = page.read_text()
        external = re.findall(r'<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)="(?:https?:)?//',
                              html)  # fmt: skip
        assert not external, (page, external)
        assert 'class="mermaid"' not in html, page
    assert not re.search(r"fonts\.(googleapis|gstatic)", "".join(
        p.read_text() for p in site.rglob("*.css")))


def test_the_committed_generated_pages_are_current():
    assert stale() == [], "run `.venv/bin/python -m docsite` and commit the pages it writes"


def test_the_settings_page_lists_every_setting_and_deploy_choice():
    from infra.choices import CHOICES

    from vdq.core.settings import Settings

    page = COMMITTED["reference/settings.md"]()
    for env, _default, doc in Settings.documented():
        assert f"| `{env}` |" in page and doc, env
    for choice in CHOICES:
        assert f"| `{choice.key}` |" in page, choice.key


def test_the_api_page_has_every_operation_and_schema():
    document = json.loads((ROOT / "shared" / "vdq" / "openapi.json").read_text())
    page = COMMITTED["reference/api.md"]()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if isinstance(operation, dict) and "operationId" in operation:
                heading = f"### {method.upper()} `{path}` {{#{operation['operationId'].lower()}}}"
                assert heading in page, heading
    for name in document["components"]["schemas"]:
        assert f"### {name} {{#schema-{name.lower()}}}" in page, name


def test_the_api_page_gives_an_optional_fields_type_and_limits_beside_null():
    # An optional field is its value's schema or null: its limits are the value's, and an
    # anyOf beside a type (the SMS body's segment limits) narrows the type, not replaces it.
    from docsite.openapi import limits_of, type_of

    document = json.loads((ROOT / "shared" / "vdq" / "openapi.json").read_text())
    html = document["components"]["schemas"]["EmailRequest"]["properties"]["html"]
    assert type_of(html) == "string or null"
    assert limits_of(html).startswith("at most 1000000 characters")
    narrowed = {"type": "string", "maxLength": 9, "anyOf": [{"maxLength": 3}, {"pattern": "a"}]}
    assert type_of({"anyOf": [narrowed, {"type": "null"}]}) == "string or null"
    assert limits_of({"anyOf": [narrowed, {"type": "null"}], "default": None}) == \
        "at most 9 characters"  # fmt: skip
    assert COMMITTED["reference/api.md"]().count("| `html` | string or null |  | at most") == 1


def test_the_cli_page_has_every_command():
    from docsite.pages import BUILT

    from vdq.cli.main import parser

    page = BUILT["reference/cli.md"]()
    (sub,) = [a for a in parser()._actions if a.dest == "command"]
    for name in sub.choices:
        assert f"## vdq {name} {{#vdq-{name}}}" in page, name


def test_every_alarm_the_stack_creates_has_a_runbook_section(synth):
    created = {alarm.node.id for alarm in synth.stack.monitoring.alarms}
    assert len(created) >= 20 and "ErroredItems" in created  # the stack's alarms were read
    # and no alarm of the template is made elsewhere, out of the runbook's sight
    assert len(synth.resources("AWS::CloudWatch::Alarm")) == len(created)
    runbook = (ROOT / "docs" / "operating" / "runbook.md").read_text()
    documented = set()
    for heading in re.findall(r"^#{2,4} (.+)$", runbook, re.M):
        documented.update(re.findall(r"`(\w+)`", heading))
    assert sorted(created - documented) == [], "alarms the runbook does not cover"
    assert sorted(documented - created) == [], "runbook sections for alarms the stack lacks"


def test_the_readme_is_short_and_its_links_land(site):
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= MAX_README_LINES
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert len(links) >= 10
    for link in links:
        if re.match(r"[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        assert (ROOT / target).exists(), link
        if anchor and target.startswith("docs/") and target.endswith(".md"):
            html = _page(site, target.removeprefix("docs/"))
            assert f'id="{anchor}"' in html, link


def _pages() -> list[Path]:
    """The hand-written pages and the README (the generated ones come from the code)."""
    generated = {ROOT / "docs" / doc for doc in COMMITTED}
    return [ROOT / "README.md", ROOT / "SECURITY.md",
            *(p for p in sorted((ROOT / "docs").rglob("*.md")) if p not in generated)]  # fmt: skip


def _spans(page: Path) -> list[str]:
    return re.findall(r"`([^`\n]+)`", page.read_text())


def _resolves(dotted: str) -> bool:
    """``dotted`` names a module, or an attribute of one (a class's method too)."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(found, name):
                return False
            found = getattr(found, name)
        return True
    return False


def test_the_pages_name_only_code_that_exists():
    """A module path in backticks (`vdq.dispatch.giveback`, `vdq.core.ids`) is importable and
    has what it names: after code moves (the flat modules went into stages), a page still naming
    the old place fails here. Two-part names may be permissions (`vdq.can_retry`)."""
    from vdq.core.settings import DEFAULT_GROUP_PERMISSIONS

    permissions = {p for group in DEFAULT_GROUP_PERMISSIONS.values() for p in group}
    checked, missing = 0, []
    for page in _pages():
        for span in _spans(page):
            for dotted in re.findall(r"(?<![\w/.-])((?:vdq|infra|bench|docsite)(?:\.\w+)+)", span):
                checked += 1
                if dotted not in permissions and not _resolves(dotted):
                    missing.append(f"{page.relative_to(ROOT)}: {dotted}")
    assert checked >= 20, checked  # the spans were read
    assert missing == []


def test_the_pages_name_only_files_and_tests_that_exist():
    """A repository path in backticks exists (from the root, or inside shared/ or shared/vdq/ as
    the REST page writes them), and `path::test_name` names a test of that file."""
    where = (ROOT, ROOT / "shared", ROOT / "shared" / "vdq")
    checked, missing = 0, []
    for page in _pages():
        for span in _spans(page):
            for path, _, test in re.findall(r"(?<![\w/.<-])((?:[\w.-]+/)+[\w.-]+\.(?:py|json|lock|"
                                            r"md|yml|toml))(::(\w+))?", span):  # fmt: skip
                if path.startswith(("cdk.out/", "build/", ".venv")):
                    continue  # made by a build, not committed
                checked += 1
                found = next((base / path for base in where if (base / path).exists()), None)
                if found is None or (test and f"def {test}(" not in found.read_text()):
                    missing.append(f"{page.relative_to(ROOT)}: {path}{'::' + test if test else ''}")
    assert checked >= 20, checked
    assert missing == []


def _runbook_section(alarm: str) -> str:
    runbook = (ROOT / "docs" / "operating" / "runbook.md").read_text()
    start = re.search(rf"^#+ .*`{alarm}`.*$", runbook, re.M)
    assert start, alarm
    end = re.compile(r"^#+ ", re.M).search(runbook, start.end())
    return runbook[start.end() : end.start() if end else None]


def test_the_runbook_redrives_only_dead_letter_queues_of_sqs_queues(synth):
    """SQS's StartMessageMoveTask moves only from the dead-letter queue of an SQS queue (not an
    SNS subscription's, not Scheduler's or a stream's): every redrive the runbook gives names
    such a queue's output."""
    queues = synth.resources("AWS::SQS::Queue").values()
    redriven = {json.dumps(q["Properties"]["RedrivePolicy"]["deadLetterTargetArn"])
                for q in queues if "RedrivePolicy" in q["Properties"]}  # fmt: skip
    runbook = (ROOT / "docs" / "operating" / "runbook.md").read_text()
    named = re.findall(r"start-message-move-task --source-arn \"\$\(queue_arn (\w+)\)\"", runbook)
    assert len(named) >= 2, named  # the send and results dead-letter queues
    for output in named:
        logical = synth.template_json["Outputs"][output]["Value"]["Ref"]
        assert json.dumps({"Fn::GetAtt": [logical, "Arn"]}) in redriven, output
    assert "start-message-move-task" not in re.sub(
        r"`start-message-move-task`\) cannot", "", _runbook_section("EmailEventsDeadLetters"))


def test_the_runbook_moves_email_events_to_the_results_queue(synth, monkeypatch):
    """The EmailEvents dead-letter queue is an SNS subscription's: the runbook copies its
    messages to the queue that subscription delivers to, found by its logical id, and empties
    it. The copy runs here against moto."""
    import boto3
    from moto import mock_aws

    section = _runbook_section("EmailEventsDeadLetters")
    [prefix] = re.findall(r"starts_with\(LogicalResourceId, '(\w+)'\)", section)
    [subscription] = [r["Properties"] for r in synth.resources("AWS::SNS::Subscription").values()
                      if r["Properties"]["Protocol"] == "sqs"]  # fmt: skip
    target = subscription["Endpoint"]["Fn::GetAtt"][0]
    assert [q for q in synth.resources("AWS::SQS::Queue") if q.startswith(prefix)] == [target]
    [script] = re.findall(r"<<'EOF'\n(.*?)\nEOF\n", section, re.S)
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        dlq = sqs.create_queue(QueueName="email-events-dlq")["QueueUrl"]
        results = sqs.create_queue(QueueName="results")["QueueUrl"]
        events = [json.dumps({"eventType": "Delivery", "n": n}) for n in range(13)]
        for body in events:
            sqs.send_message(QueueUrl=dlq, MessageBody=body)
        monkeypatch.setenv("DLQ", dlq)
        monkeypatch.setenv("RESULTS", results)
        exec(compile(script, "runbook.md", "exec"), {})
        moved = []
        while batch := sqs.receive_message(QueueUrl=results, MaxNumberOfMessages=10).get(
                "Messages"):  # fmt: skip
            moved += [m["Body"] for m in batch]
        assert sorted(moved) == sorted(events)
        assert "Messages" not in sqs.receive_message(QueueUrl=dlq)


def _stack_resources_query(section: str, name: str) -> str:
    """What the ``--query`` of ``describe-stack-resources`` that sets ``name`` in ``section``
    picks from the stack's resources as CloudFormation lists them (the physical id of each
    taken here as its logical id)."""
    [query] = re.findall(rf'{name}=\$\(aws cloudformation describe-stack-resources[^)]*?'
                         rf'--query "([^"]+)"', section.replace("\\\n", " "), re.S)  # fmt: skip
    return query


def _pick(synth, query: str) -> list[str]:
    import jmespath

    listed = {"StackResources": [
        {"LogicalResourceId": logical, "ResourceType": resource["Type"],
         "PhysicalResourceId": logical}
        for logical, resource in synth.template_json["Resources"].items()]}  # fmt: skip
    found = jmespath.search(query, listed)
    return found if isinstance(found, list) else [found]


def test_the_runbook_s_results_queue_lookup_finds_that_queue_alone(synth):
    """The copy of EmailEvents dead letters reads the results queue's URL from the stack's
    resources: its query must pick that queue only. Its logical id is the prefix of others'
    (the queue's policy, the SNS subscription): ``--output text`` would join their ids with
    tabs into one "URL" and the copy would fail at its first message."""
    query = _stack_resources_query(_runbook_section("EmailEventsDeadLetters"), "RESULTS")
    [subscription] = [r["Properties"] for r in synth.resources("AWS::SNS::Subscription").values()
                      if r["Properties"]["Protocol"] == "sqs"]  # fmt: skip
    assert _pick(synth, query) == [subscription["Endpoint"]["Fn::GetAtt"][0]]


def _runbook_part(title: str) -> str:
    """The runbook's text under the heading ``title`` (any level), to the next heading."""
    runbook = (ROOT / "docs" / "operating" / "runbook.md").read_text()
    start = re.search(rf"^#+ {re.escape(title)}$", runbook, re.M)
    assert start, title
    end = re.compile(r"^#+ ", re.M).search(runbook, start.end())
    return runbook[start.end() : end.start() if end else None]


def test_the_runbook_pauses_sending_by_the_send_queues_consumers(synth):
    """To stop every send at once (SES paused the account, a bad campaign no hold stopped),
    the send function's queue consumers are disabled: the items stay queued, their messages
    wait. The runbook's query picks those event source mappings and no other; pausing SES's
    configuration set instead would error each email (SendingPausedException is permanent)."""
    section = _runbook_part("Pausing sending")
    [query] = re.findall(r'describe-stack-resources[^"]*--query "([^"]+)"',
                         section.replace("\\\n", " "))  # fmt: skip
    send = synth.logical_id(synth.stack.functions.send)
    mappings = sorted(logical for logical, r in synth.resources(
        "AWS::Lambda::EventSourceMapping").items()
        if r["Properties"]["FunctionName"] == {"Ref": send})  # fmt: skip
    assert len(mappings) == 3  # one per lane
    assert sorted(_pick(synth, query)) == mappings
    assert "update-event-source-mapping" in section and "--no-enabled" in section
    assert re.search(r"`--enabled`", section), "the runbook says how to resume"


def test_the_runbook_retries_many_errored_items_and_not_the_unknown_ones():
    """An outage errors items by the hundred: the runbook chooses them by their result, never
    an "outcome unknown" one unseen, and retries them all with one `vdq retry` (which takes
    many ids: tests/integration/test_cli.py)."""
    section = _runbook_part("Retrying many items")
    assert "vdq list --state errored --all --json" in section
    assert "xargs vdq retry < ids.txt" in section
    assert "outcome unknown" in section


def test_the_dashboard_and_the_runbook_tell_throttling_from_an_outage(synth):
    """SES refusing for its rate (SendsThrottled: the items wait, no attempt spent) and SES
    failing (SendRetries: automatic retries, then errored after about 77 minutes with the
    defaults) look alike from the queue; the dashboard shows both and the runbook says which
    is which."""
    (dashboard,) = synth.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for name in ("SendsThrottled", "SendRetries", "SendErrors"):
        assert f'\\"{name}\\"' in body, f"the dashboard shows no {name}"
    section = _runbook_part("Email or SMS is not going out")
    for text in ("SendsThrottled", "SendRetries", "daily message quota exceeded",
                 "SendingPausedException", "health.aws.amazon.com"):
        assert text in section, text


def test_the_command_tables_show_each_command_as_it_parses():
    """Each row of a `| vdq ... | does |` table (the README's, the operating page's) names
    options the command has, and writes a positional that takes several values as `ID...`,
    one that takes one as `ID`: `vdq cancel ID` read as one id at a time."""
    import argparse

    from vdq.cli.main import parser

    (sub,) = [a for a in parser()._actions if a.dest == "command"]
    checked = 0
    for page in (ROOT / "README.md", ROOT / "docs" / "operating" / "index.md"):
        rows = re.findall(r"^\| (`vdq .+?`(?:, `vdq .+?`)*) \|", page.read_text(), re.M)
        for row in rows:
            for usage in re.findall(r"`(vdq [^`]+)`", row):
                words = usage.replace("\\|", "|").split()
                command = sub.choices.get(words[1])
                assert command, usage
                if any(isinstance(a, argparse._SubParsersAction) for a in command._actions):
                    continue  # suppressions, producers: their actions have options of their own
                options = set(command._option_string_actions)
                for word in words[2:]:
                    for option in re.findall(r"--[\w-]+", word):
                        assert option in options, f"{page.name}: {usage!r}: {option}"
                (positional, *_) = [a for a in command._actions if not a.option_strings
                                    and a.dest != "help"] or [None]  # fmt: skip
                if positional is None or not re.search(r"\bID\b", usage):
                    continue
                several = positional.nargs in ("+", "*")
                assert ("ID..." in usage) == several, f"{page.name}: {usage!r}"
                checked += 1
    assert checked >= 6, checked  # show, retry, cancel, resend in both tables


def test_the_readme_and_the_checklist_quote_the_cost_page():
    """The idle month (bench/idle.py's total, copied to the cost page) and the date of the
    bench's run are quoted by the README and the deploy checklist: all three say the same."""
    cost = (ROOT / "docs" / "cost.md").read_text()
    (on_demand, provisioned), = re.findall(r"^total a month +([\d.]+) +([\d.]+)$", cost, re.M)
    (run,) = re.findall(r"run on (\d{4}-\d\d-\d\d) at the us-east-1 list", " ".join(cost.split()))
    checklist = " ".join((ROOT / "docs" / "deploying" / "index.md").read_text().split())
    assert f"US${on_demand} a month on-demand" in checklist
    assert f"US${provisioned}." in checklist
    assert f"run of {run}," in checklist
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"US${on_demand} a month idle" in readme


def test_the_pages_name_every_widget_and_metric_of_the_dashboard(synth):
    """The operating page says what the `Dashboard` output shows, widget by widget, and the
    runbook says what each VDQ metric on it counts: a widget or a metric added to the dashboard
    and left out of both is one an operator reads without a word on it."""
    [dashboard] = synth.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"]).replace('\\"', '"')
    titles = re.findall(r'"title":"([^"]+)"', body)
    assert "Alarms" in titles and "Queue items" in titles  # the body was read
    operating = " ".join((ROOT / "docs" / "operating" / "index.md").read_text().split())
    assert [t for t in titles if f"*{t}*" not in operating] == []
    metrics = set(re.findall(r'\["VDQ","(\w+)"', body))
    assert "ItemsEnqueued" in metrics  # the VDQ namespace's metrics were read
    runbook = (ROOT / "docs" / "operating" / "runbook.md").read_text()
    assert sorted(m for m in metrics if f"`{m}`" not in runbook) == []


def test_the_pages_find_each_functions_log_group_where_cloudformation_named_it(synth):
    """The functions' log groups are the stack's own resources (kept vdq:logRetentionDays days)
    and have no name given: CloudFormation names them (``Vdq-FunctionsSendLogs...``), and
    ``/aws/lambda/<function>``, where Lambda would log by itself, does not exist. The pages send
    an operator to each function's log group with the runbook's ``log_group`` helper, whose
    query picks that group and no other."""
    groups = synth.resources("AWS::Logs::LogGroup")
    assert groups and all("LogGroupName" not in g["Properties"] for g in groups.values())
    named = [str(p.relative_to(ROOT)) for p in _pages() if "/aws/lambda/" in p.read_text()]
    assert named == [], f"pages that name /aws/lambda/ log groups: {named}"
    runbook = (ROOT / "docs" / "operating" / "runbook.md").read_text()
    [query] = re.findall(r"log_group\(\) \{ aws cloudformation describe-stack-resources[^}]*?"
                         r"--query \"([^\"]+)\"", runbook.replace("\\\n", " "))  # fmt: skip
    checked = 0
    for name, function in synth.stack.functions.by_name.items():
        logical = synth.logical_id(function)
        group = synth.template_json["Resources"][logical]["Properties"]["LoggingConfig"]["LogGroup"]
        assert _pick(synth, query.replace("$1", name.title())) == [group["Ref"]], name
        checked += 1
    assert checked == 5
    assert re.search(r'--log-group-name "\$\(log_group \w+\)"', runbook), "the helper is used"


def test_the_runbook_says_how_long_a_dead_letter_queue_keeps_a_message(synth):
    """What the sweeps leave in a dead-letter queue "stays for you", but SQS deletes it after
    the queue's retention period: an SES event left in the results' dead-letter queue past it is
    lost. The runbook gives that period, the one every dead-letter queue of the stack has."""
    stack = synth.stack
    queues = [stack.messaging.results.dead_letters, stack.schedules.dead_letters,
              stack.email_events.dead_letters,
              *(lane.dead_letters for lane in stack.messaging.send_lanes.values())]  # fmt: skip
    kept = {synth.template_json["Resources"][synth.logical_id(q)]["Properties"]
            ["MessageRetentionPeriod"] for q in queues}  # fmt: skip
    assert len(queues) == 6 and len(kept) == 1, kept
    (seconds,) = kept
    assert seconds % 86400 == 0
    part = " ".join(_runbook_part("Messages in a dead-letter queue").split())
    assert f"{seconds // 86400} days" in part, "the runbook says how long a dead letter is kept"


def test_the_leaked_key_step_says_when_the_functions_stop_honouring_it():
    """Taking the AWSPREVIOUS label off a leaked unsubscribe key does not stop it at once: each
    function keeps the previous version it read for its cache's age. The operating page says
    how long a leaked key still opens links."""
    from vdq.results.unsubscribe import SECRET_MAX_AGE

    page = (ROOT / "docs" / "operating" / "index.md").read_text()
    start = page.index("**After a leak**")
    leak = " ".join(page[start : page.index("```", start)].split())
    minutes = {300: "five minutes"}[SECRET_MAX_AGE]
    assert "leaked key at once" not in leak
    assert f"within {minutes}" in leak
