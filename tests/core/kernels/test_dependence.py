"""`hapsira_core.kernels.dependence`: what a function gives depends on t and y or not,
read from its source (independent: a proof; dependent: possibly a false alarm)."""

import ast
import textwrap

import pytest

from hapsira_core.kernels.dependence import depends


def reads_t_or_y(source, **options):
    definition = ast.parse(textwrap.dedent(source)).body[0]
    return depends(definition, ["t", "y"], **options)


@pytest.mark.parametrize("source, expected", [
    ("def f(t, y, p):\n    return (p[0], 2.0)", False),
    ("def f(t, y, p):\n    a = y[0]\n    a = p[1]\n    return (a,)", False),  # reassigned
    ("def f(t, y, p):\n    a = p[0]\n    b = a * t\n    return (b,)", True),
    ("def f(t, y, p):\n    a, b = y[0], p[0]\n    return (b,)", False),  # item by item
    ("def f(t, y, p):\n    a, b = y[0], p[0]\n    b, a = a, b\n    return (b,)", True),
    ("def f(t, y, p):\n    a, b = g(y)\n    return (b,)", True),  # a call passed y
    ("def f(t, y, p):\n    a = 0.0\n    if y[0] > 0:\n        a = 1.0\n    return (a,)", True),
    ("def f(t, y, p):\n    a = 0.0\n    if p[0] > 0:\n        a = 1.0\n    return (a,)", False),
    ("def f(t, y, p):\n    if y[0] > 0:\n        return (1.0,)\n    return (2.0,)", True),
    # a loop: b depends from the second pass on
    ("def f(t, y, p):\n    a = y[0]\n    b = 0.0\n    for i in range(3):\n        b = c\n"
     "        c = a\n    return (b,)", True),
    ("def f(t, y, p):\n    b = 0.0\n    for i in range(3):\n        b += p[i]\n    return (b,)",
     False),
    ("def f(t, y, p):\n    b = 0.0\n    while b < y[0]:\n        b += 1.0\n    return (b,)", True),
    ("def f(t, y, p):\n    with g():\n        a = 1.0\n    return (a,)", True),  # not followed
])
def test_returned_values(source, expected):
    assert reads_t_or_y(source) is expected


def test_only_the_returned_item_asked_for():
    twin = "def f(t, y, p):\n    v = y[0] * p[0]\n    return ((v,), (p[0],))"
    assert reads_t_or_y(twin, returned_item=1) is False
    assert reads_t_or_y(twin, returned_item=0) is True
    assert reads_t_or_y(twin) is True


@pytest.mark.parametrize("source, expected", [
    ("def j(t, y, p, J):\n    J[0, 0] = -p[0]\n    J[0, 1] = 1.0", False),
    ("def j(t, y, p, J):\n    J[0, 0] = -p[0]\n    J[1, 1] = y[1]", True),
    ("def j(t, y, p, J):\n    K = J\n    K[1, 1] = y[1]", True),  # through an alias
    ("def j(t, y, p, J):\n    i = int(y[0])\n    J[i, 0] = 1.0", True),  # a dependent index
    ("def j(t, y, p, J):\n    fill(y, J)", True),  # a call that writes J
    ("def j(t, y, p, J):\n    fill(p, J)", False),
    ("def j(t, y, p, J):\n    J[0, 0] = 2.0\n    return J", False),
    ("def j(t, y, p, J):\n    s = y[0]\n    J[0, 0] = 2.0\n    return s", True),  # returned
])
def test_values_written_through_an_argument(source, expected):
    assert reads_t_or_y(source, written=["J"]) is expected
