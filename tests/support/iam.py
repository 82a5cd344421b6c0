"""A small IAM policy evaluator: is this request allowed by these identity-policy statements?

What it models, as AWS documents it for a request within one account and identity-based
policies only (no resource policies, permission boundaries, SCPs or session policies):

- an explicit Deny wins; else an Allow whose Action/NotAction, Resource/NotResource and every
  condition match allows; else the request is implicitly denied;
- actions match case-insensitively, resources case-sensitively, both with ``*`` and ``?``;
- condition operators String*, Arn*, Bool and Null, with the ``IfExists`` suffix and the
  ``ForAllValues:`` / ``ForAnyValue:`` set qualifiers. Keys within an operator and operators
  within a block all have to match; the values of one key match if any does. An absent key fails
  a plain operator (``...IfExists`` passes), fails ``ForAnyValue:`` and passes ``ForAllValues:``
  (the trap of ``ForAllValues`` with a request that carries no such key); a negated operator
  (``StringNotLike``...) matches an absent key.

Anything else (policy variables, other operators) raises ``Unsupported``: the check fails
loudly rather than guess. A request may name several alternative resources (``Request.resources``)
and is allowed when any of them is: SES authorises a send against the address identity or the
domain identity, whichever the deployer verified.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any


class Unsupported(ValueError):
    """A policy construct this evaluator does not model."""


@dataclass(frozen=True)
class Request:
    action: str
    resources: tuple[str, ...]  # alternatives: allowed when any one is
    context: Mapping[str, Any] = field(default_factory=dict)  # key -> str | list[str]


@dataclass(frozen=True)
class Decision:
    allowed: bool
    statements: tuple[int, ...]  # indexes of the Allow statements that matched
    denied_by: tuple[int, ...] = ()


def evaluate(statements: Sequence[Mapping[str, Any]], request: Request) -> Decision:
    allows: list[int] = []
    denies: list[int] = []
    for index, statement in enumerate(statements):
        if not _applies(statement, request):
            continue
        effect = statement.get("Effect")
        if effect == "Deny":
            denies.append(index)
        elif effect == "Allow":
            allows.append(index)
        else:
            raise Unsupported(f"statement {index}: Effect {effect!r}")
    if denies:
        return Decision(False, (), tuple(denies))
    return Decision(bool(allows), tuple(allows))


def _applies(statement: Mapping[str, Any], request: Request) -> bool:
    if "Principal" in statement or "NotPrincipal" in statement:
        raise Unsupported("a Principal belongs to resource policies")
    if "Action" in statement:
        if not any(_glob(p, request.action, fold=True) for p in _list(statement["Action"])):
            return False
    elif "NotAction" in statement:
        if any(_glob(p, request.action, fold=True) for p in _list(statement["NotAction"])):
            return False
    else:
        raise Unsupported("a statement without Action or NotAction")
    if not any(_resource_matches(statement, r) for r in request.resources):
        return False
    return conditions_match(statement.get("Condition") or {}, request.context)


def _resource_matches(statement: Mapping[str, Any], resource: str) -> bool:
    if "Resource" in statement:
        return any(_glob(p, resource) for p in _list(statement["Resource"]))
    if "NotResource" in statement:
        return not any(_glob(p, resource) for p in _list(statement["NotResource"]))
    raise Unsupported("a statement without Resource or NotResource")


# ---- conditions ------------------------------------------------------------------------------

_OPERATORS = {
    "StringEquals": ("string", False),
    "StringNotEquals": ("string", True),
    "StringEqualsIgnoreCase": ("string_fold", False),
    "StringNotEqualsIgnoreCase": ("string_fold", True),
    "StringLike": ("like", False),
    "StringNotLike": ("like", True),
    "ArnEquals": ("string", False),
    "ArnNotEquals": ("string", True),
    "ArnLike": ("like", False),
    "ArnNotLike": ("like", True),
    "Bool": ("bool", False),
}


def conditions_match(block: Mapping[str, Mapping[str, Any]], context: Mapping[str, Any]) -> bool:
    found = {k.lower(): v for k, v in context.items()}
    for operator, tests in block.items():
        for key, wanted in tests.items():
            if not _condition(operator, found.get(key.lower()), [str(w) for w in _list(wanted)]):
                return False
    return True


def _condition(operator: str, value: Any, wanted: list[str]) -> bool:
    qualifier, _, name = operator.rpartition(":")
    if_exists = name.endswith("IfExists")
    name = name.removesuffix("IfExists")
    if name == "Null":
        if qualifier:
            raise Unsupported(f"{operator}")
        absent = value is None or value == []
        return any((w.lower() == "true") == absent for w in wanted)
    if name not in _OPERATORS:
        raise Unsupported(f"condition operator {operator}")
    kind, negated = _OPERATORS[name]
    values = None if value is None else [str(v) for v in _list(value)]

    def one(v: str) -> bool:
        hit = any(_compare(kind, w, v) for w in wanted)
        return not hit if negated else hit

    if qualifier == "ForAllValues":
        return values is None or all(one(v) for v in values)
    if qualifier == "ForAnyValue":
        return values is not None and any(one(v) for v in values)
    if qualifier:
        raise Unsupported(f"condition qualifier {qualifier}")
    if values is None or values == []:
        return if_exists or negated  # a negated operator matches an absent key
    if len(values) > 1:
        raise Unsupported(f"{operator} on a multi-valued key needs ForAllValues/ForAnyValue")
    return one(values[0])


def _compare(kind: str, wanted: str, value: str) -> bool:
    if "${" in wanted:
        raise Unsupported(f"policy variable in {wanted!r}")
    if kind == "string":
        return wanted == value
    if kind == "string_fold":
        return wanted.lower() == value.lower()
    if kind == "like":
        return _glob(wanted, value)
    if kind == "bool":
        return wanted.lower() == value.lower()
    raise Unsupported(kind)


# ---- matching --------------------------------------------------------------------------------


def _glob(pattern: str, value: str, *, fold: bool = False) -> bool:
    if "${" in pattern:
        raise Unsupported(f"policy variable in {pattern!r}")
    return _compiled(pattern, fold).fullmatch(value) is not None


@lru_cache(maxsize=4096)
def _compiled(pattern: str, fold: bool) -> re.Pattern[str]:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL if fold else re.DOTALL)


def _list(value: Any) -> list[Any]:
    if isinstance(value, str | bool | int):
        return [value]
    if isinstance(value, Iterable):
        return list(value)
    return [value]
