"""Forward-mode derivatives of a user's function, made from its source.

From ``fun(t, y, p) -> tuple`` (the tuple form of `solve_ivp`), `transform`
writes a twin ``fun(t, y, p) -> (value, J)`` whose ``J`` is the Jacobian
d fun / d y, flat and row-major (``J[k * n + j] = d fun_k / d y_j``), as
straight-line code: every arithmetic operation of the body becomes its value
and, for each component ``y_j`` it depends on, its derivative (dual numbers
unrolled in the AST, one scalar per nonzero partial: components known to be
zero are never computed). No jit, target or solver here: the factory that
compiles the twin is `hapsira_core.ivp.jacobian`.

What is differentiated: ``+ - * / **`` (int, float or computed exponents),
unary minus, ``%`` and ``//``; ``math``'s (and numpy's) ``sqrt exp log log2
log10 sin cos tan asin acos atan sinh cosh tanh atan2 hypot pow fabs`` and
``abs min max float``; tuples (``x, y, z = rr``, ``y[0]``, ``y[0:3]``,
constant indices); ``if``/``else`` statements and expressions on any values
(each branch differentiated; the derivatives of the names they assign
merged); local names assigned any number of times; reads of ``p`` and of
globals (constants with respect to ``y``); and calls to other `hjit`
functions, differentiated the same way with respect to the arguments that
depend on ``y`` (their own twin returns ``(value, J)``; the caller applies the
chain rule). Anything else that depends on ``y`` raises `NotDifferentiable`
naming the construct, the function and the line: loops (``for``/``while``)
over values that depend on ``y`` are not supported in this version (a loop
that touches neither ``y`` nor anything computed from it is kept as is), nor
``y`` indexed at a computed index, nor the array form ``fun(t, y, p, dydt)``.
"""

import ast
import builtins
import inspect
import math

import numpy as np

from . import twins
from .twins import SourceUnavailable  # noqa: F401  (raised here)

#: The name the generated code calls ``math`` by (bound by the factory).
MATH = "_hapsira_math"

#: An active argument is a scalar (``SCALAR``) or a tuple of specs; None: inactive.
SCALAR = "s"


class NotDifferentiable(ValueError):
    """A construct the source transformation cannot differentiate, named with the
    function and the line."""


# --- values: a scalar (primal and its nonzero partials) or a tuple of values ------------

class Scalar:
    __slots__ = ("p", "d")

    def __init__(self, p, d=None):
        self.p = p  # an ast.Name or ast.Constant
        self.d = d or {}  # direction -> ast.Name or ast.Constant


class Tup:
    __slots__ = ("items",)

    def __init__(self, items):
        self.items = list(items)


def leaves(value):
    if isinstance(value, Tup):
        return [leaf for item in value.items for leaf in leaves(item)]
    return [value]


def structure(value):
    if isinstance(value, Tup):
        return tuple(structure(item) for item in value.items)
    return SCALAR


def spec_leaves(spec):
    if spec is None:
        return 0
    if spec == SCALAR:
        return 1
    return sum(spec_leaves(s) for s in spec)


def _active(value):
    return any(leaf.d for leaf in leaves(value))


def _const(x):
    return ast.Constant(float(x))


def _is_const(node, x):
    return isinstance(node, ast.Constant) and node.value == x and type(node.value) is float


def _mul(a, b):
    if _is_const(a, 1.0):
        return b
    if _is_const(b, 1.0):
        return a
    if _is_const(a, -1.0):
        return ast.UnaryOp(ast.USub(), b)
    if _is_const(b, -1.0):
        return ast.UnaryOp(ast.USub(), a)
    return ast.BinOp(a, ast.Mult(), b)


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return ast.BinOp(a, ast.Add(), b)


def _expr(text, **names):
    """An expression from ``text`` with ``{a}``-style holes filled by names' source."""
    return ast.parse(text.format(M=MATH, **{k: ast.unparse(v) for k, v in names.items()}),
                     mode="eval").body


# d f(a) / d a, with q = f(a)
_UNARY = {
    "sqrt": "0.5 / {q}", "exp": "{q}", "log": "1.0 / {a}",
    "log2": "1.0 / ({a} * 0.6931471805599453)", "log10": "1.0 / ({a} * 2.302585092994046)",
    "sin": "{M}.cos({a})", "cos": "-{M}.sin({a})", "tan": "1.0 + {q} * {q}",
    "asin": "1.0 / {M}.sqrt(1.0 - {a} * {a})", "acos": "-1.0 / {M}.sqrt(1.0 - {a} * {a})",
    "atan": "1.0 / (1.0 + {a} * {a})", "sinh": "{M}.cosh({a})", "cosh": "{M}.sinh({a})",
    "tanh": "1.0 - {q} * {q}", "abs": "(1.0 if {a} >= 0.0 else -1.0)", "float": "1.0",
    "rsqrt": "-0.5 * {q} * {q} * {q}",
}
# (d f / d a, d f / d b), with q = f(a, b)
_BINARY = {
    "atan2": ("{b} / ({a} * {a} + {b} * {b})", "-{a} / ({a} * {a} + {b} * {b})"),
    "hypot": ("{a} / {q}", "{b} / {q}"),
    "min": ("(1.0 if {a} <= {b} else 0.0)", "(0.0 if {a} <= {b} else 1.0)"),
    "max": ("(1.0 if {a} >= {b} else 0.0)", "(0.0 if {a} >= {b} else 1.0)"),
}


def _known_functions():
    table = []
    for name in ("sqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
                 "atan", "sinh", "cosh", "tanh", "atan2", "hypot", "pow", "fabs"):
        table.append((getattr(math, name), "abs" if name == "fabs" else name))
    for np_name, name in (("sqrt", "sqrt"), ("exp", "exp"), ("log", "log"), ("log2", "log2"),
                          ("log10", "log10"), ("sin", "sin"), ("cos", "cos"), ("tan", "tan"),
                          ("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"),
                          ("sinh", "sinh"), ("cosh", "cosh"), ("tanh", "tanh"),
                          ("arctan2", "atan2"), ("hypot", "hypot"), ("power", "pow"),
                          ("abs", "abs"), ("absolute", "abs"), ("fabs", "abs")):
        table.append((getattr(np, np_name), name))
    table += [(builtins.abs, "abs"), (builtins.min, "min"), (builtins.max, "max"),
              (builtins.float, "float"), (builtins.pow, "pow")]
    return table


_KNOWN = _known_functions()


class Derivative:
    """What `transform` made: ``source`` defines ``name(same arguments) -> (value,
    J)``, ``J`` flat, row-major over (leaves of the value, leaves of the active
    arguments); ``out`` the value's structure; ``calls``: ``(name, callee, spec)``
    for each differentiated helper the source calls by ``name``; ``zeros``: the
    entries of ``J`` known to be zero."""

    def __init__(self, source, name, out, n_in, calls, zeros, filename):
        self.source, self.name, self.out, self.n_in = source, name, out, n_in
        self.calls, self.zeros, self.filename = calls, zeros, filename


def _source_tree(py_func):
    return twins.definition(py_func)[2]


#: The names a function reads (`twins.namespace`).
namespace = twins.namespace


def transform(py_func, spec, known=(), _depth=0):
    """The `Derivative` of plain Python function ``py_func`` with respect to the
    arguments ``spec`` marks active (one entry per argument: None, `SCALAR`, or a
    tuple of specs for a tuple argument); ``known``: ``(function, rule)`` pairs of
    functions differentiated by a rule of `_UNARY` rather than their source
    (``hapsira_core.jit.rsqrt``: "rsqrt")."""
    if _depth > 16:
        raise NotDifferentiable(f"{py_func.__qualname__}: calls nested more than 16 deep "
                                "(a recursive function?)")
    definition = _source_tree(py_func)
    args = definition.args
    if args.vararg or args.kwarg or args.kwonlyargs or len(args.args) != len(spec):
        raise NotDifferentiable(f"{py_func.__qualname__}: expected {len(spec)} positional "
                                "arguments and no *args, **kwargs or keyword-only ones")
    builder = _Builder(py_func, definition, spec, known, _depth)
    return builder.build()


class _Builder:
    def __init__(self, py_func, definition, spec, known, depth):
        self.py, self.definition, self.spec = py_func, definition, spec
        self.known, self.depth = tuple(known), depth
        self.names = namespace(py_func)
        self.qualname = py_func.__qualname__
        self.env = {}
        #: tuples that do not depend on y, by name: their shape is known
        self.tuples = {}
        self.locals = {n.id for n in ast.walk(definition) if isinstance(n, ast.Name)
                       and isinstance(n.ctx, ast.Store)} | {a.arg for a in definition.args.args}
        self.count = 0
        self.out = None
        self.n_in = sum(spec_leaves(s) for s in spec)
        self.calls = []
        self.block = []
        self.zeros = None
        try:
            self.first_line = py_func.__code__.co_firstlineno
            self.file = py_func.__code__.co_filename
        except AttributeError:
            self.first_line, self.file = 1, "?"

    # --- errors and emission ------------------------------------------------------------

    def fail(self, node, what):
        line = self.first_line + getattr(node, "lineno", 1) - 1
        shown = "" if isinstance(node, ast.FunctionDef) else f": `{ast.unparse(node)}`"
        raise NotDifferentiable(
            f"{self.qualname} ({self.file}:{line}): cannot differentiate {what}{shown}. "
            "Write it without this construct, or give the Jacobian by hand")

    def fresh(self, stem="t"):
        self.count += 1
        return f"_hd{stem}{self.count}"

    def emit(self, statement):
        self.block.append(ast.fix_missing_locations(statement))

    def let(self, expression, stem="t"):
        """A name (or the constant) holding ``expression``."""
        if isinstance(expression, (ast.Name, ast.Constant)):
            return expression
        name = self.fresh(stem)
        self.emit(ast.Assign([ast.Name(name, ast.Store())], expression))
        return ast.Name(name, ast.Load())

    def active_in(self, node):
        return any(isinstance(n, ast.Name) and n.id in self.env for n in ast.walk(node))

    # --- the function -------------------------------------------------------------------

    def build(self):
        direction = 0
        for arg, spec in zip(self.definition.args.args, self.spec):
            if spec is None:
                continue
            self.env[arg.arg], direction = self.argument(ast.Name(arg.arg, ast.Load()), spec,
                                                         direction)
        body = self.definition.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        if not self.statements(body):
            self.fail(self.definition, "a function that can end without a return statement")
        name = f"{self.definition.name}__hapsira_jacobian"
        self.definition.name = name
        self.definition.decorator_list = []
        self.definition.returns = None
        self.definition.body = self.block
        module = ast.Module([self.definition], [])
        source = ast.unparse(ast.fix_missing_locations(module)) + "\n"
        return Derivative(source, name, self.out, self.n_in, self.calls,
                          frozenset(self.zeros or ()),
                          f"<hapsira jacobian of {self.py.__module__}.{self.qualname}>")

    def argument(self, node, spec, direction):
        if spec == SCALAR:
            value = Scalar(self.let(node, "a") if not isinstance(node, ast.Name)
                           else self.copy(node), {direction: _const(1.0)})
            return value, direction + 1
        items = []
        for index, item in enumerate(spec):
            value, direction = self.argument(
                ast.Subscript(node, ast.Constant(index), ast.Load()), item, direction)
            items.append(value)
        return Tup(items), direction

    def copy(self, name):
        """A temporary holding the value of ``name`` now (the name may be assigned again)."""
        temp = self.fresh("a")
        self.emit(ast.Assign([ast.Name(temp, ast.Store())], name))
        return ast.Name(temp, ast.Load())

    # --- statements ---------------------------------------------------------------------

    def statements(self, body):
        """Differentiate ``body`` into the current block; True if it always returns."""
        for statement in body:
            if self.statement(statement):
                return True
        return False

    def statement(self, node):
        if isinstance(node, ast.Return):
            self.returns(node)
            return True
        if isinstance(node, ast.Assign):
            value = self.value(node.value)
            for target in node.targets:
                self.assign(target, value, node)
            return False
        if isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name):
                load = ast.copy_location(ast.Name(node.target.id, ast.Load()), node.target)
                value = self.value(ast.copy_location(ast.BinOp(load, node.op, node.value), node))
                self.assign(node.target, value, node)
                return False
            return self.verbatim(node, "an augmented assignment to a subscript")
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            self.assign(node.target, self.value(node.value), node)
            return False
        if isinstance(node, ast.If):
            return self.branches(node.test, node.body, node.orelse, node)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return False
        if isinstance(node, (ast.For, ast.While)):
            return self.verbatim(node, "a loop over values that depend on y (loops are not "
                                       "supported in this version)")
        if isinstance(node, (ast.Pass, ast.Assert, ast.Expr)):
            return self.verbatim(node, "a statement whose value depends on y")
        self.fail(node, f"a {type(node).__name__} statement")

    def verbatim(self, node, what):
        stored = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        if stored & set(self.env) or any(isinstance(n, ast.Return) for n in ast.walk(node)):
            self.fail(node, what)
        self.emit(node)
        return False

    def assign(self, target, value, node):
        if isinstance(target, ast.Name):
            self.tuples.pop(target.id, None)
            if not _active(value):
                self.env.pop(target.id, None)
                if isinstance(value, Tup):
                    self.tuples[target.id] = value
            else:
                self.env[target.id] = value
            self.emit(ast.Assign([ast.Name(target.id, ast.Store())], self.primal(value)))
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(t, ast.Starred) for t in target.elts):
                self.fail(node, "a starred assignment")
            if not isinstance(value, Tup):
                if _active(value):
                    self.fail(node, "unpacking a value that is not a tuple of known length")
                # an inactive value (from p, a global): unpacked as written
                names = {n.id for t in target.elts for n in ast.walk(t)
                         if isinstance(n, ast.Name)}
                for name in names:
                    self.env.pop(name, None)
                    self.tuples.pop(name, None)
                self.emit(ast.Assign([target], value.p))
                return
            if len(value.items) != len(target.elts):
                self.fail(node, f"unpacking {len(value.items)} values into "
                                f"{len(target.elts)} names")
            for item_target, item in zip(target.elts, value.items):
                self.assign(item_target, item, node)
            return
        if not _active(value) and not self.active_in(target):
            self.emit(ast.Assign([target], self.primal(value)))
            return
        self.fail(node, "an assignment to a subscript or attribute of a value that depends "
                        "on y")

    def primal(self, value):
        if isinstance(value, Tup):
            return ast.Tuple([self.primal(item) for item in value.items], ast.Load())
        return value.p

    def returns(self, node):
        if node.value is None:
            self.fail(node, "a return without a value")
        value = self.value(node.value)
        shape = structure(value)
        if self.out is None:
            self.out = shape
        elif self.out != shape:
            self.fail(node, f"returns of different shapes ({self.out} and {shape})")
        entries, zeros = [], set()
        for leaf in leaves(value):
            for j in range(self.n_in):
                entry = leaf.d.get(j)
                if entry is None:
                    zeros.add(len(entries))
                    entry = _const(0.0)
                entries.append(entry)
        self.zeros = zeros if self.zeros is None else self.zeros & zeros
        jacobian = ast.Tuple(entries, ast.Load())
        self.emit(ast.Return(ast.Tuple([self.primal(value), jacobian], ast.Load())))

    def branches(self, test, body, orelse, node):
        """``if test: body else: orelse``, both differentiated, their names merged."""
        before = dict(self.env)
        tuples_before = dict(self.tuples)
        outer = self.block
        results, tuples = [], []
        for part in (body, orelse):
            self.block, self.env, self.tuples = [], dict(before), dict(tuples_before)
            ended = self.statements(part)
            results.append((self.block, self.env, ended))
            tuples.append(self.tuples)
        self.block = outer
        # a tuple's shape stays known where neither branch changed it
        self.tuples = {name: value for name, value in tuples_before.items()
                       if all(t.get(name) is value for t in tuples)}
        (body_block, body_env, body_ended), (else_block, else_env, else_ended) = results
        if body_ended and else_ended:
            self.emit(ast.If(test, body_block or [ast.Pass()], else_block))
            return True
        if body_ended or else_ended:
            self.env = else_env if body_ended else body_env
            self.emit(ast.If(test, body_block or [ast.Pass()], else_block))
            return False
        merged = {}
        for name in set(body_env) | set(else_env):
            a, b = body_env.get(name), else_env.get(name)
            if a is b:
                merged[name] = a
                continue
            inactive = Scalar(ast.Name(name, ast.Load()))
            a, b = a or inactive, b or inactive
            if structure(a) != structure(b):
                self.fail(node, f"`{name}`, assigned values of different shapes in the "
                                "two branches")
            merged[name] = self.merge(a, b, body_block, else_block)
        self.env = merged
        self.emit(ast.If(test, body_block or [ast.Pass()], else_block or []))
        return False

    def merge(self, a, b, block_a, block_b):
        if isinstance(a, Tup):
            return Tup([self.merge(x, y, block_a, block_b) for x, y in zip(a.items, b.items)])
        primal = self.fresh("m")
        derivatives = {}
        for block, value in ((block_a, a), (block_b, b)):
            block.append(ast.Assign([ast.Name(primal, ast.Store())], value.p))
        for j in sorted(set(a.d) | set(b.d)):
            name = self.fresh("m")
            derivatives[j] = ast.Name(name, ast.Load())
            for block, value in ((block_a, a), (block_b, b)):
                block.append(ast.Assign([ast.Name(name, ast.Store())],
                                        value.d.get(j, _const(0.0))))
        for block in (block_a, block_b):
            ast.fix_missing_locations(ast.Module(block, []))
        return Scalar(ast.Name(primal, ast.Load()), derivatives)

    # --- expressions --------------------------------------------------------------------

    def value(self, node):
        if not self.active_in(node):
            if isinstance(node, ast.Name) and node.id in self.tuples:
                return self.tuples[node.id]
            constant = self.global_tuple(node)
            if constant is not None:
                return constant
            if isinstance(node, (ast.Tuple, ast.List)):
                return Tup([self.value(item) for item in node.elts])
            if isinstance(node, ast.Constant):
                return Scalar(node)
            return Scalar(self.let(node, "c"))
        if isinstance(node, ast.Name):
            return self.env[node.id]
        if isinstance(node, (ast.Tuple, ast.List)):
            if any(isinstance(item, ast.Starred) for item in node.elts):
                self.fail(node, "a starred item")
            return Tup([self.value(item) for item in node.elts])
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.BinOp):
            return self.binary(node)
        if isinstance(node, ast.UnaryOp):
            operand = self.value(node.operand)
            if isinstance(node.op, ast.UAdd):
                return operand
            if isinstance(node.op, ast.USub) and isinstance(operand, Scalar):
                primal = self.let(ast.UnaryOp(ast.USub(), operand.p))
                return Scalar(primal, {j: self.let(ast.UnaryOp(ast.USub(), d))
                                       for j, d in operand.d.items()})
            if isinstance(node.op, ast.Not):
                return Scalar(self.let(node, "c"))
            self.fail(node, "this unary operation on a value that depends on y")
        if isinstance(node, (ast.Compare, ast.BoolOp)):
            return Scalar(self.let(node, "c"))  # a truth value: no derivative
        if isinstance(node, ast.IfExp):
            return self.conditional(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        self.fail(node, f"a {type(node).__name__} expression that depends on y")

    def global_tuple(self, node):
        """A global (or closure) tuple of numbers, ``ZERO = (0.0, 0.0)``: its values."""
        if not isinstance(node, ast.Name) or node.id in self.locals:
            return None
        value = self.names.get(node.id)
        if isinstance(value, tuple) and all(
                type(v) in (int, float) for v in value):
            return Tup([Scalar(ast.Constant(v)) for v in value])
        return None

    def scalar(self, node):
        value = self.value(node)
        if not isinstance(value, Scalar):
            self.fail(node, "a tuple where a number is expected")
        return value

    def subscript(self, node):
        base = self.value(node.value)
        if not isinstance(base, Tup):
            self.fail(node, "a subscript of a value that depends on y and is not a tuple")
        index = node.slice
        if isinstance(index, ast.Slice):
            bounds = []
            for part in (index.lower, index.upper, index.step):
                if part is None:
                    bounds.append(None)
                elif isinstance(part, ast.Constant) and type(part.value) is int:
                    bounds.append(part.value)
                elif (isinstance(part, ast.UnaryOp) and isinstance(part.op, ast.USub)
                      and isinstance(part.operand, ast.Constant)
                      and type(part.operand.value) is int):
                    bounds.append(-part.operand.value)
                else:
                    self.fail(node, "a slice with computed bounds")
            return Tup(base.items[slice(*bounds)])
        constant = None
        if isinstance(index, ast.Constant) and type(index.value) is int:
            constant = index.value
        elif (isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub)
              and isinstance(index.operand, ast.Constant) and type(index.operand.value) is int):
            constant = -index.operand.value
        if constant is None:
            self.fail(node, "a subscript at a computed index (only constant indices into "
                            "values that depend on y)")
        if not -len(base.items) <= constant < len(base.items):
            self.fail(node, f"index {constant} of a tuple of {len(base.items)}")
        return base.items[constant]

    def binary(self, node):
        if isinstance(node.op, ast.Add):
            a, b = self.value(node.left), self.value(node.right)
            if isinstance(a, Tup) and isinstance(b, Tup):
                return Tup(a.items + b.items)  # tuple concatenation
        else:
            a, b = self.value(node.left), self.value(node.right)
        if not isinstance(a, Scalar) or not isinstance(b, Scalar):
            self.fail(node, "an operation on a tuple that depends on y")
        op = node.op
        q = self.let(ast.BinOp(a.p, op, b.p))
        if isinstance(op, ast.Pow):
            return self.power(a, b, q)
        if isinstance(op, (ast.Add, ast.Sub)):
            d = {}
            for j in sorted(set(a.d) | set(b.d)):
                db = b.d.get(j)
                if db is not None and isinstance(op, ast.Sub):
                    db = ast.UnaryOp(ast.USub(), db)
                d[j] = self.let(_add(a.d.get(j), db))
            return Scalar(q, d)
        if isinstance(op, ast.Mult):
            return Scalar(q, {j: self.let(_add(_mul(a.d[j], b.p) if j in a.d else None,
                                               _mul(a.p, b.d[j]) if j in b.d else None))
                              for j in sorted(set(a.d) | set(b.d))})
        if isinstance(op, ast.Div):
            # d (a / b) = (da - q db) / b
            return Scalar(q, {j: self.let(ast.BinOp(
                _add(a.d.get(j), ast.UnaryOp(ast.USub(), _mul(q, b.d[j])) if j in b.d
                     else None), ast.Div(), b.p)) for j in sorted(set(a.d) | set(b.d))})
        if isinstance(op, ast.Mod):
            # a % b = a - floor(a / b) * b: piecewise, d = da - floor(a / b) db
            floor = self.let(_expr("{M}.floor({a} / {b})", a=a.p, b=b.p)) if b.d else None
            return Scalar(q, {j: self.let(_add(a.d.get(j), ast.UnaryOp(
                ast.USub(), _mul(floor, b.d[j])) if j in b.d else None))
                for j in sorted(set(a.d) | set(b.d))})
        if isinstance(op, ast.FloorDiv):
            return Scalar(q)
        self.fail(node, f"the operator {type(op).__name__} on values that depend on y")

    def power(self, a, b, q):
        """``q = a ** b``: d q = b a^(b - 1) da + q log(a) db."""
        factor_a = None
        if a.d:
            exponent = b.p
            if isinstance(exponent, ast.Constant) and not b.d:
                c = exponent.value
                if c == 0:
                    factor_a = None
                elif c == 1:
                    factor_a = _const(1.0)
                elif c == 2:
                    factor_a = self.let(_expr("2.0 * {a}", a=a.p))
                elif c == 0.5:
                    factor_a = self.let(_expr("0.5 / {q}", q=q))
                else:
                    lower = ast.Constant(c - 1)
                    factor_a = self.let(_expr("{c} * {a} ** {e}", c=exponent, a=a.p, e=lower))
            else:
                factor_a = self.let(_expr("{b} * {a} ** ({b} - 1.0)", a=a.p, b=b.p))
        factor_b = self.let(_expr("{q} * {M}.log({a})", q=q, a=a.p)) if b.d else None
        return self.combine(q, [(a, factor_a), (b, factor_b)])

    def combine(self, q, parts):
        """``q`` with d q = sum of factor * d operand over ``parts``."""
        d = {}
        directions = sorted({j for operand, factor in parts if factor is not None
                             for j in operand.d})
        for j in directions:
            total = None
            for operand, factor in parts:
                if factor is not None and j in operand.d:
                    total = _add(total, _mul(operand.d[j], factor))
            d[j] = self.let(total)
        return Scalar(q, d)

    def conditional(self, node):
        """``a if test else b``: as an if statement, so that only one side is evaluated."""
        name = self.fresh("if")
        target = ast.Name(name, ast.Store())
        statement = ast.copy_location(ast.If(
            node.test, [ast.copy_location(ast.Assign([target], node.body), node)],
            [ast.copy_location(ast.Assign([target], node.orelse), node)]), node)
        self.branches(statement.test, statement.body, statement.orelse, node)
        if name not in self.env:
            return Scalar(ast.Name(name, ast.Load()))
        return self.env.pop(name)

    def resolve(self, func):
        if isinstance(func, ast.Name):
            if func.id in self.names:
                return self.names[func.id]
            return getattr(builtins, func.id, None)
        if isinstance(func, ast.Attribute):
            owner = self.resolve(func.value)
            return getattr(owner, func.attr, None) if owner is not None else None
        return None

    def rule(self, callee):
        for function, rule in self.known:
            if callee is function:
                return rule
        for function, rule in _KNOWN:
            if callee is function:
                return rule
        return None

    def call(self, node):
        if self.active_in(node.func):
            self.fail(node, "a call of a function computed from y")
        callee = self.resolve(node.func)
        if callee is None:
            self.fail(node, f"a call of `{ast.unparse(node.func)}`, which is not found in the "
                            "function's globals")
        if node.keywords:
            self.fail(node, "a call with keyword arguments on values that depend on y")
        rule = self.rule(callee)
        if rule is not None:
            arguments = [self.scalar(a) for a in node.args]
            if rule == "pow" and len(arguments) == 2:
                a, b = arguments
                q = self.let(ast.Call(node.func, [a.p, b.p], []))
                return self.power(a, b, q)
            q = self.let(ast.Call(node.func, [a.p for a in arguments], []))
            if rule in _UNARY and len(arguments) == 1:
                (a,) = arguments
                if not a.d:
                    return Scalar(q)
                factor = self.let(_expr(_UNARY[rule], q=q, a=a.p))
                return self.combine(q, [(a, factor)])
            if rule in _BINARY and len(arguments) == 2:
                a, b = arguments
                fa, fb = _BINARY[rule]
                factor_a = self.let(_expr(fa, q=q, a=a.p, b=b.p)) if a.d else None
                factor_b = self.let(_expr(fb, q=q, a=a.p, b=b.p)) if b.d else None
                return self.combine(q, [(a, factor_a), (b, factor_b)])
            if rule == "hypot":
                factors = [self.let(ast.BinOp(a.p, ast.Div(), q)) if a.d else None
                           for a in arguments]
                return self.combine(q, list(zip(arguments, factors)))
            self.fail(node, f"{rule} with {len(arguments)} arguments")
        py = getattr(callee, "py_func", callee)
        if not inspect.isfunction(py):
            self.fail(node, f"a call of `{ast.unparse(node.func)}` ({type(callee).__name__}), "
                            "which has no rule and no Python source, on values that depend "
                            "on y")
        return self.helper(node, callee, py)

    def helper(self, node, callee, py):
        values = [self.value(a) if self.active_in(a) else None for a in node.args]
        spec = tuple(structure(v) if v is not None and _active(v) else None for v in values)
        inner = transform(py, spec, self.known, self.depth + 1)
        name = f"_hapsira_d_{py.__name__}_{len(self.calls)}"
        self.calls.append((name, callee, spec))
        arguments = [self.primal(v) if s is not None else
                     (self.primal(v) if v is not None else a)
                     for a, v, s in zip(node.args, values, spec)]
        result = self.let(ast.Call(ast.Name(name, ast.Load()), arguments, []), "r")
        primal = ast.Subscript(result, ast.Constant(0), ast.Load())
        jacobian = self.let(ast.Subscript(result, ast.Constant(1), ast.Load()), "r")
        inputs = [leaf for v, s in zip(values, spec) if s is not None for leaf in leaves(v)]
        out_leaves = []

        def unpack(shape, expression):
            if shape == SCALAR:
                out_leaves.append(self.let(expression, "r"))
                return None
            items = [unpack(s, ast.Subscript(expression, ast.Constant(i), ast.Load()))
                     for i, s in enumerate(shape)]
            return items

        unpack(inner.out, primal)
        scalars = []
        entries = {}
        for k, leaf in enumerate(out_leaves):
            d = {}
            for j in sorted({j for x in inputs for j in x.d}):
                total = None
                for i, x in enumerate(inputs):
                    position = k * inner.n_in + i
                    if j in x.d and position not in inner.zeros:
                        if position not in entries:
                            entries[position] = self.let(ast.Subscript(
                                jacobian, ast.Constant(position), ast.Load()), "r")
                        total = _add(total, _mul(entries[position], x.d[j]))
                if total is not None:
                    d[j] = self.let(total)
            scalars.append(Scalar(leaf, d))

        def rebuild(shape):
            if shape == SCALAR:
                return scalars.pop(0)
            return Tup([rebuild(s) for s in shape])

        return rebuild(inner.out)
