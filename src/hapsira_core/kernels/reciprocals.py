"""A user function's twin whose divisions share reciprocals: ``x / r**3``
written three times becomes one reciprocal and three products.

On a GPU a float64 division is a reciprocal refined by Newton steps, with a
slow path: tens of instructions, and numba-cuda neither combines repeated
divisors nor turns ``1 / sqrt`` into a reciprocal square root. A right-hand
side written as in a textbook (``-k * x / r3``, ``-k * y / r3``, ...) runs
much slower than the library's own, written with one ``rsqrt`` (issue 29).

The rewrite reads the function's source (as `hapsira_core.kernels.guard`
does) and, for the names that divisions divide by (``a / d``, ``a / (r2 * r)``,
``a / r**3``: any product of integer powers of names), defines each name's
reciprocal once, right after the name is known:

* ``r = sqrt(e)`` gives ``_inv_r = rsqrt(e)``, and a name ``e`` itself then
  gets ``_inv_e = _inv_r * _inv_r``;
* ``r3 = r**3`` (a product of powers of such names) gets the product of
  their reciprocals;
* any other name ``d`` (an argument, or assigned once at the top of the
  body) gets ``_inv_d = 1.0 / d``;

and each such division becomes a product by reciprocals. Only names
assigned exactly once, in a plain top-level ``name = ...`` (or arguments),
take part, and a division is rewritten only after every reciprocal it needs
is defined. The function is left alone unless the rewrite saves a division
or uses ``rsqrt``. Results change by rounding only (a few ulp per
evaluation).
"""

import ast
import weakref

from . import twins
from .twins import SourceUnavailable  # noqa: F401  (raised here, caught by callers)

PREFIX = "_hapsira_inv_"
RSQRT = "_hapsira_rsqrt"
_SQRT_NAMES = {"sqrt"}


def _monomial(node, names):
    """``{name: power}`` if ``node`` is a product of positive integer powers of
    ``names`` (``d``, ``r2 * r``, ``r**3``, ``(a * b)**2``), else None."""
    if isinstance(node, ast.Name):
        return {node.id: 1} if node.id in names else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _monomial(node.left, names), _monomial(node.right, names)
        if left is None or right is None:
            return None
        for name, power in right.items():
            left[name] = left.get(name, 0) + power
        return left
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow)
            and isinstance(node.right, ast.Constant) and type(node.right.value) is int
            and 1 <= node.right.value <= 8):
        base = _monomial(node.left, names)
        if base is None:
            return None
        return {name: power * node.right.value for name, power in base.items()}
    return None


def _is_sqrt(node):
    """``sqrt(e)``, ``math.sqrt(e)`` or ``np.sqrt(e)``: its argument, else None."""
    if not (isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords):
        return None
    func = node.func
    name = func.id if isinstance(func, ast.Name) else \
        func.attr if isinstance(func, ast.Attribute) else None
    return node.args[0] if name in _SQRT_NAMES else None


def _pure(node):
    """Arithmetic on names, constants and subscripts only: evaluating it twice (the
    square root and its reciprocal) does nothing twice that LLVM would not merge."""
    return all(isinstance(n, (ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Subscript,
                              ast.Attribute, ast.operator, ast.unaryop, ast.expr_context))
               for n in ast.walk(node))


def _product(factors):
    """The expression ``f1 * f2 * ...`` (factors repeated by power), in a fixed order."""
    terms = [ast.Name(PREFIX + name, ast.Load())
             for name, power in sorted(factors.items()) for _ in range(power)]
    expression = terms[0]
    for term in terms[1:]:
        expression = ast.BinOp(expression, ast.Mult(), term)
    return expression


class _Plan:
    """Which names get a reciprocal, how, and after which top-level statement."""

    def __init__(self, definition):
        self.definition = definition
        stores = {}
        for node in ast.walk(definition):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                stores[node.id] = stores.get(node.id, 0) + 1
        arguments = [a.arg for a in definition.args.args]
        #: name -> index of the top-level statement that defines it (-1: an argument)
        self.defined = {name: -1 for name in arguments if name not in stores}
        #: name -> its value's expression (single top-level assignments)
        self.values = {}
        for index, statement in enumerate(definition.body):
            if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                    and isinstance(statement.targets[0], ast.Name)
                    and stores.get(statement.targets[0].id) == 1):
                name = statement.targets[0].id
                self.defined[name] = index
                self.values[name] = statement.value
        #: sqrt(e) with e a name: e -> the name of its square root
        self.root_of = {}
        for name, value in self.values.items():
            argument = _is_sqrt(value)
            if isinstance(argument, ast.Name) and argument.id in self.defined:
                self.root_of.setdefault(argument.id, name)
        #: name -> (expression of its reciprocal, index after which it is known, kind)
        self.inverses = {}

    def inverse(self, name, _depth=0):
        """Plan the reciprocal of ``name``; returns the index after which it is known."""
        if name in self.inverses:
            return self.inverses[name][1]
        value = self.values.get(name)
        argument = _is_sqrt(value) if value is not None else None
        if argument is not None and _pure(argument):
            plan = (ast.Call(ast.Name(RSQRT, ast.Load()), [argument], []),
                    self.defined[name], "rsqrt")
        elif name in self.root_of and _depth < 8:
            root = self.root_of[name]
            ready = self.inverse(root, _depth + 1)
            plan = (_product({root: 2}), max(ready, self.defined[name]), "square")
        else:
            factors = _monomial(value, self.defined) if value is not None and _depth < 8 \
                else None
            if factors and name not in factors:
                ready = max([self.inverse(f, _depth + 1) for f in factors]
                            + [self.defined[name]])
                plan = (_product(factors), ready, "product")
            else:
                plan = (ast.BinOp(ast.Constant(1.0), ast.Div(), ast.Name(name, ast.Load())),
                        self.defined[name], "division")
        self.inverses[name] = plan
        return plan[1]


class _Divisions(ast.NodeTransformer):
    """``a / monomial`` -> ``a * product of reciprocals`` in statement ``index``,
    where every reciprocal is known before it."""

    def __init__(self, plan, index):
        self.plan, self.index, self.rewritten = plan, index, 0

    def visit_BinOp(self, node):
        self.generic_visit(node)
        if not isinstance(node.op, ast.Div):
            return node
        factors = _monomial(node.right, self.plan.defined)
        if not factors:
            return node
        if any(self.plan.inverse(name) >= self.index for name in factors):
            return node
        self.rewritten += 1
        return ast.copy_location(ast.BinOp(node.left, ast.Mult(), _product(factors)), node)


#: `rewritten_source`'s answers by function (while it lives), with the code object they
#: were made from: each ``cowell()`` call on cuda asks for its ``f`` again, and reading,
#: parsing and rewriting the source each time would add to every call.
_REWRITTEN = weakref.WeakKeyDictionary()


def rewritten_source(py_func):
    """``(source, divisions rewritten)``: ``py_func``'s source (without decorators)
    with shared reciprocals; ``0`` and the source unchanged where that would
    save no division and use no ``rsqrt``. Remembered per function and code object
    (the source a function was compiled from does not change under it)."""
    try:
        code, answer = _REWRITTEN[py_func]
    except (KeyError, TypeError):  # TypeError: an object no weak reference can name
        pass
    else:
        if code is getattr(py_func, "__code__", None):
            return answer
    answer = _rewrite(py_func)
    try:
        _REWRITTEN[py_func] = (getattr(py_func, "__code__", None), answer)
    except TypeError:
        pass
    return answer


def _rewrite(py_func):
    source, tree, definition = twins.definition(py_func)
    definition.decorator_list = []
    plan = _Plan(definition)
    divisions = 0
    for index, statement in enumerate(definition.body):
        visitor = _Divisions(plan, index)
        definition.body[index] = visitor.visit(statement)
        divisions += visitor.rewritten
    used = _used_inverses(definition, plan)
    kinds = [plan.inverses[name][2] for name in used]
    if not divisions or (kinds.count("division") >= divisions and "rsqrt" not in kinds):
        return source, 0
    by_index = {}
    for name in used:
        by_index.setdefault(plan.inverses[name][1], []).append(name)
    body = [ast.Assign([ast.Name(PREFIX + name, ast.Store())], plan.inverses[name][0])
            for name in _ordered(by_index.get(-1, []), plan)]
    for index, statement in enumerate(definition.body):
        body.append(statement)
        body += [ast.Assign([ast.Name(PREFIX + name, ast.Store())], plan.inverses[name][0])
                 for name in _ordered(by_index.get(index, []), plan)]
    definition.body = body
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n", divisions


def _used_inverses(definition, plan):
    """The reciprocals the rewritten body reads, with those they are made of."""
    used, pending = set(), [node.id[len(PREFIX):] for node in ast.walk(definition)
                            if isinstance(node, ast.Name) and node.id.startswith(PREFIX)]
    while pending:
        name = pending.pop()
        if name in used:
            continue
        used.add(name)
        pending += [node.id[len(PREFIX):] for node in ast.walk(plan.inverses[name][0])
                    if isinstance(node, ast.Name) and node.id.startswith(PREFIX)]
    return used


def _ordered(names, plan):
    """Reciprocals known after the same statement, each after those it reads."""
    done, out = set(), []

    def visit(name):
        if name in done:
            return
        done.add(name)
        for node in ast.walk(plan.inverses[name][0]):
            if isinstance(node, ast.Name) and node.id.startswith(PREFIX):
                inner = node.id[len(PREFIX):]
                if inner in names:
                    visit(inner)
        out.append(name)

    for name in sorted(names):
        visit(name)
    return out


def twin(py_func, rsqrt):
    """The plain Python twin of ``py_func`` with shared reciprocals (``rsqrt``: the
    target's), or None where nothing would change. Its source is registered
    with ``linecache``, so that `hapsira_core.kernels.guard` can read it too."""
    source, divisions = rewritten_source(py_func)
    if not divisions:
        return None
    filename = f"<hapsira reciprocals of {py_func.__module__}.{py_func.__qualname__}>"
    namespace = twins.namespace(py_func)
    namespace[RSQRT] = rsqrt
    return twins.twin(py_func, source, filename, namespace)


def as_written(function):
    """Mark an `hjit` function to be compiled as written: its divisions are not
    rewritten into shared reciprocals whatever ``HAPSIRA_FASTMATH`` says."""
    function.hapsira_as_written = True
    return function
