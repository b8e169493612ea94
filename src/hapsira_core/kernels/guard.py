"""A user function's twin whose reads of its params row at a computed index are guarded.

For targets that cannot raise inside a kernel (a GPU: numba-cuda has no
bounds checks): ``p[i]`` with ``i`` not a constant becomes ``read(p, i)``,
which gives NaN past either end of the row; in the array form
``fun(t, y, p, dydt)`` every store into ``dydt`` is checked too, and one past
its end fills ``dydt`` with NaN when the function returns. A NaN derivative stops that
object alone (status -3 at the first evaluation, -1 later, with NaN rows),
instead of reading a neighbour's memory and returning garbage with status 0.
The host targets compile a twin with numba's bounds checks instead
(`hapsira_core.ivp.checks.bounds_checked`), which raises a named error.

The twin is made from the function's source (``inspect.getsource``), with the
function's globals and the values of its closure cells; helpers it hands
``p`` to that read it at a computed index are replaced by their own guarded
twins (`hapsira_core.ivp.checks.checked_helpers`).
"""

import ast

from . import twins
from .twins import SourceUnavailable  # noqa: F401  (raised here, caught by callers)

#: The names the rewritten source calls the guarded read, the guarded store and
#: the poisoning of ``dydt`` by, and its flag of a store past the end.
READ = "_hapsira_guarded_read"
STORE = "_hapsira_guarded_store"
POISON = "_hapsira_poison"
FLAG = "_hapsira_stored_past"


class _GuardReads(ast.NodeTransformer):
    def __init__(self, name):
        self.name = name
        self.guarded = 0

    def visit_Subscript(self, node):
        self.generic_visit(node)
        index = node.slice
        constant = isinstance(index, ast.Constant) and type(index.value) is int
        if (isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                and node.value.id == self.name and not constant
                and not isinstance(index, (ast.Slice, ast.Tuple))):
            self.guarded += 1
            call = ast.Call(func=ast.Name(READ, ast.Load()),
                            args=[ast.Name(self.name, ast.Load()), index], keywords=[])
            return ast.copy_location(call, node)
        return node


class _GuardStores(ast.NodeTransformer):
    """Every store into the array ``name`` (``dydt[i] = v``, ``dydt[i] += v``) goes
    through ``STORE``, which refuses one past either end and says so; the function
    then fills its output with NaN before it returns (a derivative that is not
    finite: the object fails alone), whatever it wrote afterwards."""

    def __init__(self, name):
        self.name = name
        self.guarded = 0

    def _target(self, node):
        return (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id == self.name and not isinstance(node.slice, (ast.Slice,
                                                                              ast.Tuple)))

    def _store(self, target, value, node):
        self.guarded += 1
        call = ast.Call(func=ast.Name(STORE, ast.Load()),
                        args=[ast.Name(self.name, ast.Load()), target.slice, value],
                        keywords=[])
        flag = ast.BoolOp(op=ast.Or(), values=[call, ast.Name(FLAG, ast.Load())])
        return ast.copy_location(ast.Assign(targets=[ast.Name(FLAG, ast.Store())],
                                            value=flag), node)

    def visit_Assign(self, node):
        self.generic_visit(node)
        if len(node.targets) == 1 and self._target(node.targets[0]):
            return self._store(node.targets[0], node.value, node)
        return node

    def visit_AugAssign(self, node):
        self.generic_visit(node)
        if self._target(node.target):
            current = ast.Call(func=ast.Name(READ, ast.Load()),
                               args=[ast.Name(self.name, ast.Load()), node.target.slice],
                               keywords=[])
            return self._store(node.target, ast.BinOp(current, node.op, node.value), node)
        return node

    def visit_Return(self, node):
        return [self._poison(node), node]

    def _poison(self, node):
        call = ast.Call(func=ast.Name(POISON, ast.Load()),
                        args=[ast.Name(self.name, ast.Load()), ast.Name(FLAG, ast.Load())],
                        keywords=[])
        return ast.copy_location(ast.Expr(call), node)

    def wrap(self, definition):
        """The flag set first, the poisoning before the end (and each return)."""
        start = ast.Assign(targets=[ast.Name(FLAG, ast.Store())], value=ast.Constant(False))
        definition.body = [ast.copy_location(start, definition)] + definition.body
        if not isinstance(definition.body[-1], ast.Return):
            definition.body.append(self._poison(definition))


def guarded_source(py_func, position, output=None):
    """``(source, guarded)``: the source of ``py_func`` (a plain Python function,
    without decorators) with each read of its argument at ``position`` at a
    computed index through ``READ``, and how many reads were rewritten; with
    ``output`` (the position of an output array, ``dydt``) every store into it
    through ``STORE`` too (counted with the reads)."""
    _, tree, definition = twins.definition(py_func)
    definition.decorator_list = []
    guard = _GuardReads(definition.args.args[position].arg)
    tree = guard.visit(tree)
    guarded = guard.guarded
    if output is not None:
        stores = _GuardStores(definition.args.args[output].arg)
        stores.visit(definition)
        stores.wrap(definition)
        guarded += stores.guarded
    tree = ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n", guarded


def guarded_function(py_func, position, read, names=None, output=None, store=None,
                     poison=None):
    """The plain Python twin of ``py_func`` whose computed reads of argument
    ``position`` call ``read(row, index)``; compile it like the original.
    ``names``: global or closure names bound to other objects in the twin
    (the guarded twins of helpers it hands the row to); ``output``, ``store``,
    ``poison``: the output array's position and the functions `guarded_source`
    calls for it (``store(row, i, v) -> bool``, true past the end;
    ``poison(row, flag)``, NaN into the row where the flag is set)."""
    source, _ = guarded_source(py_func, position, output)
    namespace = twins.namespace(py_func)
    namespace.update(names or {})
    namespace[READ] = read
    namespace[STORE], namespace[POISON] = store, poison
    return twins.twin(py_func, source, f"<guarded reads of {py_func.__qualname__}>", namespace)
