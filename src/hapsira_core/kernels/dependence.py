"""Whether what a function gives depends on some of its arguments, read from its source.

A conservative data flow over the ``def`` statement: a name depends on the arguments
when it is computed from one, assigned under a condition or in a loop that reads one,
or returned by a call that is passed one. Anything this does not follow (``with``,
``try``, a nested ``def``, ...) counts as dependent. So "independent" is a proof and
"dependent" may be a false alarm, never the other way round.

The implicit methods ask it whether a Jacobian (the automatic one of
`hapsira_core.kernels.derivatives`, or a user's ``jac=``) is constant in ``t`` and
``y``: then it is evaluated once and never again (`hapsira_core.ivp.sensitivities`).
"""

import ast

__all__ = ["depends"]


def depends(definition, arguments, returned_item=None, written=()):
    """Whether ``definition`` (an ``ast.FunctionDef``) gives a result that depends on
    the arguments named in ``arguments``.

    The result: every value it returns (only item ``returned_item`` of a returned
    tuple literal, where given: the twin's ``(value, J)`` has ``J`` at 1) and every
    value it stores through the arguments named in ``written`` (``J[i, j] = ...``,
    or a call that is passed ``J``)."""
    flow = _Flow(set(written), returned_item)
    flow.block(definition.body, set(arguments), False)
    return flow.found


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _root(target):
    while isinstance(target, (ast.Subscript, ast.Attribute, ast.Starred)):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


class _Flow:
    def __init__(self, written, returned_item):
        self.written, self.returned_item = written, returned_item
        self.found = False

    def reads(self, node, varying):
        return node is not None and bool(_names(node) & varying)

    def calls_writing(self, node, varying, tainted):
        """A call in ``node`` that is passed a written array and anything dependent."""
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            passed = set().union(*(_names(a) for a in call.args), set(),
                                 *(_names(k.value) for k in call.keywords))
            if passed & self.written and (tainted or passed & varying):
                self.found = True

    def block(self, body, varying, tainted):
        for statement in body:
            varying = self.statement(statement, varying, tainted)
        return varying

    def statement(self, node, varying, tainted):
        if isinstance(node, ast.Return):
            value = node.value
            if value is None:
                return varying
            self.calls_writing(value, varying, tainted)
            if (self.returned_item is not None and isinstance(value, ast.Tuple)
                    and len(value.elts) > self.returned_item):
                value = value.elts[self.returned_item]
            if tainted or self.reads(value, varying):
                self.found = True
            return varying
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if node.value is None:  # a bare annotation
                return varying
            self.calls_writing(node.value, varying, tainted)
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            varying = set(varying)
            for target in targets:
                augmented = isinstance(node, ast.AugAssign) and self.reads(target, varying)
                self.assign(target, node.value, varying, tainted or augmented)
            return varying
        if isinstance(node, ast.If):
            inner = tainted or self.reads(node.test, varying)
            self.calls_writing(node.test, varying, tainted)
            return self.block(node.body, set(varying), inner) | self.block(
                node.orelse, set(varying), inner)
        if isinstance(node, (ast.For, ast.While)):
            head = node.iter if isinstance(node, ast.For) else node.test
            current = set(varying)
            while True:  # to a fixed point: a name may depend from the second pass on
                inner = tainted or self.reads(head, current)
                entry = set(current)
                if isinstance(node, ast.For):
                    self.assign(node.target, node.iter, entry, tainted)
                after = current | self.block(node.body, entry, inner)
                if after == current:
                    break
                current = after
            return self.block(node.orelse, current, tainted) | current
        if isinstance(node, ast.Expr):
            self.calls_writing(node.value, varying, tainted)
            return varying
        if isinstance(node, (ast.Pass, ast.Assert, ast.Break, ast.Continue)):
            return varying
        self.found = True  # not followed: counted as dependent
        return varying

    def assign(self, target, value, varying, tainted):
        """``target = value``: ``varying`` updated in place."""
        if isinstance(target, ast.Name):
            if tainted or self.reads(value, varying):
                varying.add(target.id)
            else:
                varying.discard(target.id)
            if isinstance(value, ast.Name) and value.id in self.written:
                self.written.add(target.id)  # an alias of a written array
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            if (isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                    and not any(isinstance(e, ast.Starred) for e in target.elts + value.elts)):
                # ``a, b = x, y``: item by item (all read before any is stored)
                flags = [tainted or self.reads(v, varying) for v in value.elts]
                for item, flag in zip(target.elts, flags):
                    self.assign(item, ast.Constant(0.0), varying, flag)
                return
            for item in target.elts:
                self.assign(item, value, varying, tainted)
            return
        # a subscript or attribute: what it writes depends on the value and the index
        root = _root(target)
        dependent = tainted or self.reads(value, varying) or self.reads(target, varying)
        if root in self.written and dependent:
            self.found = True
        if root is not None and dependent:
            varying.add(root)

