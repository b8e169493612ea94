"""A user function's twin whose reads of its params row at a computed index are guarded.

For targets that cannot raise inside a kernel (a GPU: numba-cuda has no
bounds checks): ``p[i]`` with ``i`` not a constant becomes ``read(p, i)``,
which gives NaN past either end of the row. A NaN derivative stops that
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
import inspect
import textwrap

#: The name the rewritten source calls the guarded read by.
READ = "_hapsira_guarded_read"


class SourceUnavailable(ValueError):
    """The function's source cannot be read (made by ``exec``, a lambda inside an expression)."""


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


def guarded_source(py_func, position):
    """``(source, guarded)``: the source of ``py_func`` (a plain Python function,
    without decorators) with each read of its argument at ``position`` at a
    computed index through ``READ``, and how many reads were rewritten."""
    try:
        source = textwrap.dedent(inspect.getsource(py_func))
    except (OSError, TypeError) as error:
        raise SourceUnavailable(f"{py_func.__qualname__}: its source cannot be read "
                                f"({error})") from None
    tree = ast.parse(source)
    definition = tree.body[0]
    if not isinstance(definition, ast.FunctionDef) or definition.name != py_func.__name__:
        raise SourceUnavailable(f"{py_func.__qualname__}: not a def statement")
    definition.decorator_list = []
    guard = _GuardReads(definition.args.args[position].arg)
    tree = ast.fix_missing_locations(guard.visit(tree))
    return ast.unparse(tree) + "\n", guard.guarded


def guarded_function(py_func, position, read, names=None):
    """The plain Python twin of ``py_func`` whose computed reads of argument
    ``position`` call ``read(row, index)``; compile it like the original.
    ``names``: global or closure names bound to other objects in the twin
    (the guarded twins of helpers it hands the row to)."""
    source, _ = guarded_source(py_func, position)
    namespace = dict(py_func.__globals__)
    code = py_func.__code__
    for name, cell in zip(code.co_freevars, py_func.__closure__ or ()):
        namespace[name] = cell.cell_contents
    namespace.update(names or {})
    namespace[READ] = read
    exec(compile(source, f"<guarded reads of {py_func.__qualname__}>", "exec"), namespace)
    twin = namespace[py_func.__name__]
    twin.__defaults__ = py_func.__defaults__
    twin.__kwdefaults__ = py_func.__kwdefaults__
    twin.__module__ = py_func.__module__
    twin.__qualname__ = py_func.__qualname__
    return twin
