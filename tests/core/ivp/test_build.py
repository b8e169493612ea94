"""The kernel's body is written from `build.arguments`: one argument list."""

import ast

import pytest

from hapsira_core.ivp import build


@pytest.mark.parametrize("records", [False, True])
@pytest.mark.parametrize("lanes", [False, True])
def test_the_body_takes_the_kernels_arguments_in_order_and_hands_them_to_the_loop(records,
                                                                                  lanes):
    source = build.body_source(records, lanes).format(
        method="DOP853", n=3, keep=False, fun="f", events="()", g="g", event_states=True,
        jac="None", lanes=8)
    body = next(node for node in ast.parse(source).body
                if isinstance(node, ast.FunctionDef) and node.name == "body")
    parameters = [a.arg for a in body.args.args]
    names = [{"params": "p"}.get(a.name, a.name) for a in build.arguments(records=records)]
    assert parameters == names + (["first", "last"] if lanes else [])
    call = next(node for node in ast.walk(body) if isinstance(node, ast.Call))
    handed = [a.id for a in call.args]
    # every argument reaches the loop, the step records (or their stand-ins) after
    # the working rows
    assert set(parameters) <= set(handed)
    records_at = handed.index("work") + 1
    assert handed[records_at:records_at + 2] == (["steps", "dense"] if records
                                                 else ["scratch", "y_events"])
    assert len(handed) == len(parameters) + (0 if records else 2)
