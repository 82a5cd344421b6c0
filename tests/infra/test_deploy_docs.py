"""What the deploy pages (docs/deploying/) name exists: stack outputs and parameters in the
template, context keys that infra/ reads, and the make targets and vdq commands they tell a user
to run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.test_deploy_choices import context_keys_read_by_infra

pytestmark = pytest.mark.infra

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("docs/deploying/index.md", "docs/deploying/details.md")


def deploy_section() -> str:
    """The deploy pages, one after the other."""
    return "\n".join((ROOT / page).read_text() for page in PAGES)


def subsection(section: str, title: str) -> str:
    """The part of ``section`` under the heading ``title`` (any level), to the next heading."""
    start = re.search(rf"^#+ {re.escape(title)}$", section, re.M)
    assert start, title
    end = re.compile(r"^#+ ", re.M).search(section, start.end())
    return section[start.start() : end.start() if end else None]


def commands(section: str) -> list[str]:
    """Each shell command of the section: lines of its sh blocks and its inline code spans."""
    found = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        found += [line.split("#")[0].strip() for line in block.replace("\\\n", " ").splitlines()]
    found += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", section, flags=re.S))
    return [c for c in found if c]


def test_every_stack_output_the_deploy_pages_name_is_in_the_template(synth):
    section = deploy_section()
    table = subsection(section, "Outputs")
    named = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            named.update(re.findall(r"`(\w+)`", row.split("|")[1]))
    named.update(re.findall(r"OutputKey=='(\w+)'", section))
    named.update(re.findall(r"vdq_output (\w+)", section))
    assert len(named) >= 10, named  # the table was read
    missing = sorted(named - set(synth.template_json["Outputs"]))
    assert not missing, f"the deploy pages name outputs the stack does not have: {missing}"


def test_every_stack_parameter_the_deploy_pages_name_is_in_the_template(synth):
    named = set(re.findall(r"--parameters (\w+)=", deploy_section()))
    assert named, "the deploy section names the Twilio secret parameter"
    assert not named - set(synth.template_json["Parameters"])


def test_every_context_key_the_deploy_pages_name_is_read_by_infra():
    from infra.config import SETTING_NAMES

    section = deploy_section()
    named = set(re.findall(r"`(vdq:\w+)", section)) | set(re.findall(r"-c (vdq:\w+)", section))
    read = context_keys_read_by_infra()
    assert "vdq:sesIdentities" in read and "vdq:stackName" in read  # the scan finds them
    assert not sorted(named - read), f"context keys infra/ never reads: {named - read}"
    # a product setting as a context key: in cdk.json's "context" ("NAME": ...) or with -c
    settings = set(re.findall(r"-c ([A-Z][A-Z0-9_]+)=", section))
    settings |= set(re.findall(r'"([A-Z][A-Z0-9_]+)":', section))
    assert settings and not settings - set(SETTING_NAMES), settings - set(SETTING_NAMES)


def test_every_make_target_and_vdq_command_the_deploy_pages_name_exists():
    import importlib

    try:  # vdq.cli as a package (its parser in vdq.cli.main) or as one module
        parser = importlib.import_module("vdq.cli.main").parser
    except ModuleNotFoundError:
        parser = importlib.import_module("vdq.cli").parser
    section = deploy_section()
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    vdq = parser()
    (sub,) = [a for a in vdq._actions if a.dest == "command"]
    found_make, found_vdq = set(), set()
    for command in commands(section):
        words = command.split()
        for i, word in enumerate(words[:-1]):
            first = i == 0 or words[i - 1] in ("&&", ";") or re.fullmatch(r"\w+=\S*", words[i - 1])
            if word == "make" and first:
                found_make.add(words[i + 1])
            if word in ("vdq", ".venv/bin/vdq") and first:
                found_vdq.add(words[i + 1])
    assert "synth" in found_make and "venv" in found_make  # the scan reads the section
    assert not found_make - targets, f"make targets not in the Makefile: {found_make}"
    unknown = found_vdq - set(sub.choices)
    assert not unknown, f"the deploy pages name vdq commands the CLI does not have: {unknown}"


def test_every_option_of_a_vdq_command_the_deploy_pages_name_exists():
    from vdq.cli.main import parser

    (sub,) = [a for a in parser()._actions if a.dest == "command"]
    checked = 0
    for command in commands(deploy_section()):
        words = command.split()
        if len(words) < 2 or words[0] not in ("vdq", ".venv/bin/vdq"):
            continue
        if words[1] not in sub.choices:
            continue
        known = set(sub.choices[words[1]]._option_string_actions)
        unknown = [w for w in words[2:] if w.startswith("--") and w.split("=")[0] not in known]
        assert not unknown, f"{command!r} names options vdq {words[1]} lacks: {unknown}"
        checked += 1
    assert checked >= 2, "the scan finds the vdq smoke commands"


def test_the_outputs_vdq_smoke_reads_are_in_the_template_and_the_docs(synth):
    from vdq.cli.deployment import OUTPUTS

    assert set(OUTPUTS.values()) <= set(synth.template_json["Outputs"])
    smoke = subsection(deploy_section(), "Smoke test")
    assert all(f"`{name}`" in smoke for name in OUTPUTS.values())


def test_the_checklist_keeps_lasting_choices_in_cdk_json_not_on_one_deploy():
    """A `-c` value holds for one deploy: the next `cdk deploy` without it drops it (an alarm
    subscription passed so vanished at the smoke test's deploy). The checklist's deploys pass
    none but the smoke test's temporary scopes, and the alarm address goes in cdk.json."""
    checklist = (ROOT / PAGES[0]).read_text()
    deploys = [c for c in commands(checklist) if "cdk deploy" in c]
    assert len(deploys) >= 2, deploys  # the first deploy and the smoke test's
    passed = {key for c in deploys for key in re.findall(r"-c '?([\w:]+)=", c)}
    assert passed <= {"vdq:machineScopes"}, passed
    lasting = "".join(re.findall(r"```json\n(.*?)```", checklist, re.S))
    assert '"vdq:alarmEmail"' in lasting and '"vdq:sesIdentities"' in lasting


def test_tearing_down_names_every_resource_the_stack_keeps(synth):
    """What `cdk destroy` leaves behind (DeletionPolicy Retain, whatever the choices) is listed
    before the stack goes, and said how to remove: the KMS key kept costing a month each."""
    kept = {r["Type"] for r in synth.template_json["Resources"].values()
            if r.get("DeletionPolicy") == "Retain"}  # fmt: skip
    assert "AWS::DynamoDB::Table" in kept  # the template was read
    teardown = subsection(deploy_section(), "12. Tearing down")
    assert sorted(t for t in kept if f"'{t}'" not in teardown) == []


def test_the_producer_step_gives_each_producer_a_client_of_its_own():
    """Quotas (VDQ_PRODUCER_QUOTAS), the reputation guard's holds and `vdq stats --by producer`
    tell producers apart by the token's subject: a client-credentials token's is its client's
    id. Producers that shared the stack's one machine client would be one producer: a quota or
    a hold meant for one would stop every other's email too. The checklist's producer step must
    give each producing service its own client, and say how."""
    step = subsection((ROOT / PAGES[0]).read_text(), "9. A machine client for a producer")
    assert "All producers share this one client" not in step
    assert '"vdq:producerClients": ["shop-orders"' in step
    assert "vdq_output ProducerClientShopOrders" in step


def test_no_page_sets_a_lasting_choice_or_setting_for_one_deploy_only():
    """What a page tells the deployer to pass with `-c` is gone at the next `cdk deploy` without
    it: an alarm address passed so loses its subscription, a TWILIO_WEBHOOK_URL passed so goes
    back to the API's own URL and every callback behind the custom domain fails its signature
    check. The pages put lasting choices and settings in cdk.json; `-c` is left to the smoke
    test's temporary scopes."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    passed = {}
    for page in pages:
        for key in re.findall(r"-c '?(vdq:\w+|[A-Z][A-Z0-9_]+)=", page.read_text()):
            passed.setdefault(key, []).append(str(page.relative_to(ROOT)))
    assert "vdq:machineScopes" in passed  # the scan reads the pages
    lasting = {key: where for key, where in passed.items() if key != "vdq:machineScopes"}
    assert lasting == {}, f"pages that set a lasting choice with -c: {lasting}"


def test_the_smoke_step_says_its_operator_scopes_reach_the_stacks_client_alone():
    """vdq:machineScopes sets the scopes of the stack's own client; each of vdq:producerClients
    has vdq:producerScopes' (test_stack.py). The smoke test's deploy with operator scopes thus
    widens that one client: the step must say so, not that producers share one client or that
    their clients get the operator scopes too."""
    smoke = subsection((ROOT / PAGES[0]).read_text(), "10. Smoke test")
    assert "Producers share the machine client" not in smoke
    assert "may ask for them too" not in smoke
    assert "`vdq:producerClients` keep `vdq:producerScopes`" in smoke


def test_every_output_of_the_template_is_in_the_outputs_table(synth):
    """The checklist sends the deployer to the stack's outputs and to the table of all of them
    (details.md, Outputs): an output the table leaves out is one the console lists unexplained."""
    table = subsection(deploy_section(), "Outputs")
    named = set()
    for row in table.splitlines():
        if row.startswith("| `"):
            named.update(re.findall(r"`(\w+)`", row.split("|")[1]))
    outputs = set(synth.template_json["Outputs"])
    assert "ApiUrl" in outputs and "ProducerClientShopOrders" in outputs  # the template was read
    unnamed = sorted(o for o in outputs - named if not o.startswith("ProducerClient"))
    assert unnamed == [], f"outputs the Outputs table does not name: {unnamed}"


def test_the_inbound_webhook_is_set_where_twilio_reads_it_for_a_messaging_service():
    """A US 10DLC number sends in its campaign's Messaging Service, and a Messaging Service
    handles the inbound messages of its numbers: its own Incoming Messages setting applies, and
    the number's "A message comes in" webhook is ignored unless the service defers to it. Told
    to set the number's webhook only, a deployer with a 10DLC number never got STOP, START or
    HELP into the suppression list. Both deploy pages say where to set it then."""
    page = (ROOT / PAGES[0]).read_text()  # to step 8: the step's sh blocks hold "# " lines
    checklist = page[page.index("## 7. Deploy"):page.index("## 8. The first operator")]
    details = subsection((ROOT / PAGES[1]).read_text(), "Twilio callbacks")
    for page, text in (("checklist", checklist), ("details", details)):
        flat = " ".join(text.split())
        assert "Messaging Service" in flat, page
        assert "Defer to sender's webhook" in flat, page
        assert "twilio/inbound" in flat, page


def test_the_twilio_step_enables_the_receivers_countries():
    """Twilio refuses an SMS to a country its account's Messaging Geographic Permissions leave
    off (error 21408), whatever the number: the item errors. A new account has only some
    countries on, so the checklist's Twilio step has the deployer turn on theirs."""
    page = (ROOT / PAGES[0]).read_text()
    step = " ".join(page[page.index("## 5. Twilio"):page.index("## 6. ")].split())
    assert "Geo permissions" in step and "21408" in step
