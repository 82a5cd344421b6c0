"""The lock files: current with pyproject.toml, exact, hashed, and the layer's free of tooling."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra import locks

LOCKS = (locks.RUNTIME_LOCK, locks.DEV_LOCK)
_ENTRY = re.compile(r"^([a-z0-9-]+)==([^ \\]+) \\\n    --hash=sha256:[0-9a-f]{64}$")


def test_each_lock_was_resolved_from_the_current_pyproject():
    """Changing a requirement of pyproject.toml without `python -m infra.bundling lock` fails."""
    assert locks.recorded_inputs(locks.RUNTIME_LOCK) == locks.runtime_inputs()
    assert locks.recorded_inputs(locks.DEV_LOCK) == locks.dev_inputs()


def test_the_inputs_digest_follows_the_requirements(monkeypatch):
    before = locks.runtime_inputs()
    monkeypatch.setattr(locks, "runtime_requirements", lambda: ["boto3>=1.35", "pydantic>=2"])
    assert locks.runtime_inputs() != before


def test_lock_keep_pins_what_the_requirements_still_allow_and_frees_the_rest(tmp_path):
    lock = tmp_path / "x.lock"
    lock.write_text("# header\n" + "".join(
        f"{name}=={version} \\\n    --hash=sha256:{'0' * 64}\n"
        for name, version in (("aws-lambda-powertools", "3.1.0"), ("boto3", "1.40.1"),
                              ("jmespath", "1.0.1"), ("pytest", "8.4.0"))))  # fmt: skip
    requirements = ["aws-lambda-powertools[tracer]>=3.2", "boto3>=1.35",
                    "[dev] pytest>=9", "[local] vdq[dev]"]  # fmt: skip
    # A raised floor frees its distribution (and a dev extra's); what only a dependency pins,
    # or what is still allowed, stays.
    assert locks.kept(lock, requirements) == {"boto3": "1.40.1", "jmespath": "1.0.1"}


@pytest.mark.parametrize("lock", LOCKS, ids=lambda p: p.name)
def test_every_entry_pins_one_version_with_its_sha256(lock):
    body = [b for b in lock.read_text().split("\n") if not b.startswith("#")]
    entries = "\n".join(body).strip().split("\n")
    pairs = ["\n".join(entries[i : i + 2]) for i in range(0, len(entries), 2)]
    assert pairs and all(_ENTRY.match(p) for p in pairs), [p for p in pairs if not _ENTRY.match(p)]
    names = [_ENTRY.match(p).group(1) for p in pairs]  # type: ignore[union-attr]
    assert len(names) == len(set(names))


def test_the_layer_lock_holds_the_runtime_and_no_build_or_test_tool():
    pinned = locks.pins(locks.RUNTIME_LOCK)
    assert {"boto3", "botocore", "aws-lambda-powertools", "aws-xray-sdk", "pynamodb", "twilio",
            "requests"} <= set(pinned)  # fmt: skip
    tooling = {"pydantic", "pydantic-core", "moto", "werkzeug", "flask", "pytest", "hypothesis",
               "aws-cdk-lib", "constructs", "cdk-nag", "jsii", "cfn-lint"}  # fmt: skip
    assert not tooling & set(pinned)


def test_the_runtime_extra_free_dependencies_carry_no_local_or_build_tool():
    names = {locks.normalize(re.split(r"[<>=\[ ;]", r)[0]) for r in locks.runtime_requirements()}
    assert not names & {"moto", "pyjwt", "pydantic", "werkzeug", "flask"}


def test_development_uses_the_layers_versions():
    runtime, dev = locks.pins(locks.RUNTIME_LOCK), locks.pins(locks.DEV_LOCK)
    assert set(runtime) <= set(dev)
    assert {n: dev[n] for n in runtime} == runtime


def test_the_pynamodb_pin_stays_below_the_next_minor():
    """vdq.store calls PynamoDB's private Model._get_connection (see pyproject.toml)."""
    spec = next(r for r in locks.runtime_requirements() if r.startswith("pynamodb"))
    assert "<6.2" in spec
    assert locks.pins(locks.RUNTIME_LOCK)["pynamodb"].startswith("6.1.")


class FakeIndex:
    """pip's resolution over a few releases (``_resolve``'s contract: its arguments, the report's
    install entries; CalledProcessError when the requirements and constraints conflict)."""

    RELEASES = {  # name: {version: its requirements}
        "boto3": {"1.44.7": ["botocore==1.44.7", "jmespath>=1.0"],
                  "1.44.8": ["botocore==1.44.8", "jmespath>=1.0"]},
        "botocore": {"1.44.7": ["jmespath>=1.0"], "1.44.8": ["jmespath>=1.0"]},
        "jmespath": {"1.0.1": [], "1.1.0": []},
        "requests": {"2.31.0": [], "2.32.0": []},
    }  # fmt: skip

    def __init__(self) -> None:
        self.calls = 0

    def resolve(self, args: list[str]) -> list[dict]:
        import itertools
        import subprocess

        from packaging.requirements import Requirement
        from packaging.version import Version

        self.calls += 1
        wanted, options = [], iter(args)
        for arg in options:
            if arg == "-c":
                wanted += [Requirement(x) for x in Path(next(options)).read_text().split()]
            elif arg in ("--target", "--platform", "--python-version", "--implementation"):
                next(options)
            elif not arg.startswith("-"):
                wanted.append(Requirement(arg))
        names = sorted(self.RELEASES)
        combos = itertools.product(*(sorted(self.RELEASES[n], key=Version, reverse=True)
                                     for n in names))  # fmt: skip
        for combo in combos:  # the newest that holds
            chosen = dict(zip(names, combo, strict=True))
            needs = wanted + [Requirement(r) for n in names for r in self.RELEASES[n][chosen[n]]]
            if all(r.specifier.contains(chosen[r.name]) for r in needs):
                return [{"metadata": {"name": n, "version": v,
                                      "requires_dist": self.RELEASES[n][v]},
                         "download_info": {"archive_info": {"hashes": {"sha256": "0" * 64}}}}
                        for n, v in chosen.items()]  # fmt: skip
        raise subprocess.CalledProcessError(1, ["pip", "install", *args])


def test_lock_keep_moves_what_a_raised_floor_needs_with_it(tmp_path, monkeypatch):
    # boto3's floor raised past the locked 1.44.7: boto3 1.44.8 needs botocore 1.44.8, which
    # no requirement of pyproject.toml names, so its pin is "still allowed"; kept, it makes
    # the resolution impossible and `lock --keep` fails where `lock` works. What nothing
    # moved needs (requests) stays.
    lock = tmp_path / "runtime.lock"
    lock.write_text("# header\n" + "".join(
        f"{name}=={version} \\\n    --hash=sha256:{'0' * 64}\n"
        for name, version in (("boto3", "1.44.7"), ("botocore", "1.44.7"),
                              ("jmespath", "1.0.1"), ("requests", "2.31.0"))))  # fmt: skip
    monkeypatch.setattr(locks, "RUNTIME_LOCK", lock)
    monkeypatch.setattr(locks, "runtime_requirements", lambda: ["boto3>=1.44.8", "requests>=2.31"])
    monkeypatch.setattr(locks, "_resolve", FakeIndex().resolve)
    locks.write_runtime_lock(keep=True)
    assert locks.pins(lock) | {"jmespath": "?"} == {
        "boto3": "1.44.8", "botocore": "1.44.8", "jmespath": "?", "requests": "2.31.0"}


def test_lock_keep_of_the_dev_lock_does_not_move_everything_the_project_needs():
    # The dev extras name the project itself ("vdq[local]"), which no lock pins: it is not a
    # new requirement whose needs (every dependency of the project) move with it.
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        lock = Path(tmp) / "dev.lock"
        pinned = (("boto3", "1.44.7"), ("pytest", "8.4.0"))
        lock.write_text("".join(f"{n}=={v} \\\n    --hash=sha256:{'0' * 64}\n" for n, v in pinned))
        needs = {"vdq": {"boto3", "pytest"}, "boto3": set(), "pytest": set()}
        assert locks.kept(lock, ["boto3>=1.35", "[dev] vdq[local]", "[dev] pytest>=8"],
                          needs) == {"boto3": "1.44.7", "pytest": "8.4.0"}  # fmt: skip
