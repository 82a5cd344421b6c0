"""The send path as a reader follows it: one SQS message through the send function.

Traces the Python calls of one send (an email posted, then one send invocation, after a first
one has imported everything), keeps the frames of vdq's own stage modules (workflow, results,
intake, dispatch, schedules: what a reader steps through; core, store and providers are the
floor every step ends on), and prints how many of those modules the message passes through, how
many steps (a move from one module to another), how many of those are returns (back to the
module that called) and how many climb to a higher layer (tests/unit/test_import_graph.LAYERS).
A straight path goes down (handler, dispatch, workflow, store) and rarely comes back up.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench import env

LAYER_OF = {"workflow": 2, "results": 3, "intake": 4, "dispatch": 5, "schedules": 6}
# The returns a reader climbs back through for one message: fewer than this is a straight path.
RETURNS_MAX = 10
FIGURES = [("send path: returns for one SQS send message", f"< {RETURNS_MAX}")]


def _stage_module(filename: str) -> str | None:
    marker = "/shared/vdq/"
    if marker not in filename:
        return None
    module = filename.split(marker, 1)[1].removesuffix(".py").replace("/", ".")
    return module if module.split(".")[0] in LAYER_OF else None


@contextmanager
def traced() -> Iterator[list[tuple[str, str]]]:
    """(event, stage module) of each frame the calls enter and return to, in order, where the
    module changes; event is "call" or "return"."""
    path: list[tuple[str, str]] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        where = frame if event == "call" else frame.f_back
        while where is not None:
            module = _stage_module(where.f_code.co_filename)
            if module is not None:
                if not path or path[-1][1] != module:
                    path.append((event, module))
                return
            where = where.f_back

    sys.setprofile(profile)
    try:
        yield path
    finally:
        sys.setprofile(None)


def _layer(module: str) -> int:
    return LAYER_OF[module.split(".")[0]]


def measure_path(path: list[tuple[str, str]]) -> dict[str, Any]:
    modules = [module for _, module in path]
    pairs = list(itertools.pairwise(path))
    return {"modules": len(set(modules)), "steps": len(pairs),
            "returns": sum(1 for _, (event, _m) in pairs if event == "return"),
            "up_a_layer": sum(1 for (_, a), (_, b) in pairs if _layer(b) > _layer(a)),
            "path": modules}  # fmt: skip


def measure() -> dict[str, Any]:
    from bench.requests import email_body, post, run_send

    with env.stack() as stack:
        post("apigw_post_emails", email_body())
        run_send(stack)  # imports everything the path needs, outside the trace
        post("apigw_post_emails", email_body())
        with traced() as path:
            run_send(stack)
    return measure_path(path)


def rows(result: dict[str, Any]) -> list[Any]:
    from bench.figures import Row

    shown = " > ".join(m.split(".")[-1] for m in result["path"])
    return [Row(FIGURES[0][0], FIGURES[0][1],
                f"{result['modules']} modules, {result['steps']} steps, {result['returns']} "
                f"returns, {result['up_a_layer']} up a layer: {shown}",
                result["returns"] < RETURNS_MAX,
                {k: v for k, v in result.items() if k != "path"})]  # fmt: skip


if __name__ == "__main__":
    env.prepare_process()
    result = measure()
    print(f"{result['modules']} modules, {result['steps']} steps, {result['returns']} returns, "
          f"{result['up_a_layer']} up a layer")
    print(" > ".join(m for m in result["path"]))
