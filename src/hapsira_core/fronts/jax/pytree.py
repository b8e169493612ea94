"""The JAX view of a result type: the same class and fields, JAX arrays, a pytree.

`view` makes ``hapsira_core.jax.IVPResult`` from `hapsira_core.ivp.IVPResult` (and
``hapsira_cowell.jax.CowellResult`` from ``CowellResult``): a subclass whose fields
are JAX arrays (tuples of them per event), registered with JAX so that ``jax.jit``
and ``jax.vmap`` return it. Field names and their documentation are the base's.
"""

import jax
import numpy as np

__all__ = ["JaxView", "view"]


def _traced(value):
    return isinstance(value, jax.core.Tracer)


class JaxView:
    """What a JAX result adds to its base: tuples per event (fixed-length pytree
    nodes), a ``repr`` and ``res[i]`` that read the numbers back only where they
    exist (outside ``jax.jit``)."""

    EVENTS_TYPE = tuple
    #: The result class this one is a view of (its fields, as numpy arrays).
    BASE = None

    def _summary(self):
        if _traced(self.status):
            return f"objects={len(self)}, traced"
        return super()._summary()

    def _object(self, i):
        if _traced(self.status):
            raise TypeError("res[i] reads the result's numbers, which a traced result "
                            "has not got: index it outside jax.jit (or index its arrays)")
        numbers = {name: np.asarray(array) for name, array in self.arrays().items()}
        return self.with_arrays(numbers, self.BASE)._object(i)


def view(base, module):
    """``base`` (a `~hapsira_core.ivp.results.BatchResult` class) as a JAX pytree
    class of the same name, defined in ``module``: the fields are its children
    (None, a JAX array, or a tuple of them), ``single`` its static part."""
    names = [field.name for field in base.FIELDS]
    doc = (f"{base.__name__} of JAX arrays (per-event fields: tuples), a pytree that "
           f"``jax.jit`` and ``jax.vmap`` return: the fields of `{base.__module__}."
           f"{base.__name__}`, {', '.join(names)}; ``res[i]`` reads object i back as "
           "numpy numbers (outside ``jax.jit``).")
    cls = type(base.__name__, (JaxView, base),
               {"__doc__": doc, "__module__": module, "BASE": base})
    keys = [jax.tree_util.GetAttrKey(name) for name in names]

    def flatten_with_keys(result):
        return [(k, getattr(result, n)) for k, n in zip(keys, names)], result.single

    def flatten(result):
        return [getattr(result, n) for n in names], result.single

    def unflatten(single, children):
        return cls(*children, single=single)

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
    return cls
