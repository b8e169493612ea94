"""Run an :class:`~hapsira_core.jit.ObjectKernel` inside ``jax.jit`` on XLA's own buffers.

The kernel becomes a target of XLA's typed FFI (custom-call API version 4,
``jax.ffi.ffi_call``). XLA hands the handler a call frame with its argument
and result buffers; the handler runs our per-object loop on those buffers
in place, so a jitted program calls the solver with no host round trip and
no copy of inputs or outputs.

* ``cpu``/``parallel``: the handler is a numba ``cfunc`` (C ABI, no Python,
  no GIL) that wraps the buffers as arrays and runs the per-object loop
  (``prange`` on ``parallel``) on JAX's CPU platform.
* ``cuda``: the handler takes XLA's CUDA stream and launches the cuda kernel
  on it, on JAX's GPU platform (a Python callback: numba-cuda launches from
  Python).

The other platform gets a handler that only returns an error saying that
``HAPSIRA_TARGET`` does not match it. Derivatives are not defined (a clear
error under ``jax.grad``/``jax.jvp``); ``jax.vmap`` folds its batch axis into
the object axis.

Only this module knows XLA's C structures; they follow
``xla/ffi/api/c_api.h`` (shipped in ``jax.ffi.include_dir()``).
"""

import itertools
import threading

import numpy as np

try:
    import jax
    import jax.numpy as jnp
    from jax.custom_batching import custom_vmap
except ImportError as _error:  # pragma: no cover - depends on the install
    raise ImportError("hapsira's JAX layer needs JAX: pip install 'hapsira-cowell[jax]'") \
        from _error

from ... import xla_ffi as ffi
from ...targets import active as target

__all__ = ["XlaKernel", "xla_kernel", "PLATFORM", "DerivativeError"]

#: The JAX platform the active target runs on (``device.platform``); None
#: under the CUDA simulator, which has no XLA platform of its own.
PLATFORM = {"cpu": "cpu", "CUDA": "gpu"}.get(target.XLA_PLATFORM)
#: XLA's names of the platforms a kernel may be called from.
_XLA_PLATFORMS = ("cpu", "CUDA")


class DerivativeError(NotImplementedError):
    """``jax.grad``/``jax.jvp`` through a hapsira kernel: not supported."""


# --------------------------------------------------------------------------
# The kernel as an XLA FFI target, and as a JAX function.
# --------------------------------------------------------------------------

_NAMES = itertools.count()
_REGISTER_LOCK = threading.Lock()


class XlaKernel:
    """An :class:`~hapsira_core.jit.ObjectKernel` as a JAX function over XLA's buffers.

    Call it with the kernel's input arrays (JAX arrays or anything
    ``jnp.asarray`` takes; cast to each argument's dtype), the number of
    objects ``n`` and the ``sizes`` of core dimensions that only outputs
    have; it returns the output arrays (scratch ones included), each
    ``(n,) + core``. Works inside ``jax.jit``; ``jax.vmap`` merges its axis
    into the object axis; derivatives raise :class:`DerivativeError`.

    What it needs from the kernel (the coupling to :mod:`hapsira_core.jit`):
    ``kernel.body`` (the per-object ``hjit`` function), ``kernel.args`` (each
    :class:`~hapsira_core.jit.Arg`'s ``name``, ``dtype``, ``core``,
    ``per_object``, ``output``; inputs first) and, on ``cuda``,
    ``kernel.compile()`` (the ``cuda.jit`` kernel taking every array, one
    thread per object).
    """

    def __init__(self, kernel, what="hapsira kernel", *, simulator_on_cpu=False):
        self.kernel = kernel
        # A testing aid: under the CUDA simulator, register the CUDA launcher
        # on JAX's CPU platform (simulated device memory is host memory), so
        # that the GPU path's frame decoding and launch run without a GPU.
        self.simulator_on_cpu = simulator_on_cpu and target.XLA_SIMULATED
        self.args = list(kernel.args)
        self.what = what
        flags = [a.output for a in self.args]
        if not any(flags) or flags != sorted(flags):
            raise ValueError("kernel args: inputs first, then at least one output")
        self.n_inputs = flags.index(True)
        for arg in self.args:
            if not arg.per_object and not arg.core:
                raise NotImplementedError(f"{what}: shared scalar argument {arg.name} "
                                          "(pass it as a 1-element array)")
        self.inputs = self.args[:self.n_inputs]
        self.outputs = self.args[self.n_inputs:]
        self.name = f"hapsira_xla_{next(_NAMES)}"
        #: data pointers of the buffers of the last call on the CPU platform
        #: (inputs then outputs): proof that XLA's own buffers were used
        self.pointers = np.zeros(len(self.args), dtype=np.int64)
        self._messages = []
        self._handlers = []  # keeps compiled handlers (and ctypes callbacks) alive
        self._ops = {}
        self._register()

    # -- registration ------------------------------------------------------

    def _register(self):
        """Register the target's handler on its platform and, on the other, one
        that refuses with a message saying what to change."""
        mismatch = ffi._Message(target.xla_mismatch(self.what), ffi._ERROR_FAILED_PRECONDITION)
        self._messages.append(mismatch)
        refusal = ffi._refusal_handler(mismatch)
        own_platform = target.XLA_PLATFORM
        if self.simulator_on_cpu:
            own_platform = "cpu"
        own = target.xla_handler(self) if own_platform is not None else None
        self._handlers += [own, refusal]
        with _REGISTER_LOCK:
            if own is not None:
                jax.ffi.register_ffi_target(self.name, jax.ffi.pycapsule(own.address),
                                            platform=own_platform)
            for platform in _XLA_PLATFORMS:
                if platform != own_platform and not self.simulator_on_cpu:
                    jax.ffi.register_ffi_target(self.name, jax.ffi.pycapsule(refusal.address),
                                                platform=platform)

    def _shape_rules(self):
        """What the buffers' shapes must satisfy, so that no kernel reads or
        writes out of bounds: ``same`` pairs of (arg index, axis) of one named
        dimension (outputs' object axes among them), and the per-object
        inputs whose object axis is n or 1."""
        first, same, n_or_one = {}, [], []
        for index, arg in enumerate(self.args):
            axes = list(enumerate(arg.core, start=1 if arg.per_object else 0))
            if arg.output:
                axes.insert(0, (0, None))  # None: the object axis
            elif arg.per_object:
                n_or_one.append(index)
            for axis, name in axes:
                if name in first:
                    same.append((first[name], (index, axis)))
                else:
                    first[name] = (index, axis)
        return same, n_or_one

    def __call__(self, *inputs, n, sizes=None):
        if len(inputs) != self.n_inputs:
            raise TypeError(f"{self.what}: expected {self.n_inputs} input arrays, "
                            f"got {len(inputs)}")
        if not jax.config.jax_enable_x64 and any(
                a.dtype.itemsize == 8 for a in self.args):
            raise RuntimeError(
                f"{self.what} computes in 64-bit floats and integers, which JAX disables "
                "by default: call jax.config.update('jax_enable_x64', True) at start-up "
                "(or set JAX_ENABLE_X64=1)")
        inputs = [jnp.asarray(x, dtype=a.dtype) for x, a in zip(inputs, self.inputs)]
        return self._op(int(n), self._core_sizes(inputs, sizes))(*inputs)

    def output_sizes(self, shapes):
        """``sizes`` for a call, from the outputs' ``(shape, dtype)`` in argument order
        (for instance the values of :meth:`hapsira_core.ivp.Problem.output_shapes`)."""
        shapes = list(shapes)
        if len(shapes) != len(self.outputs):
            raise ValueError(f"{self.what}: {len(shapes)} output shapes for "
                             f"{len(self.outputs)} outputs")
        sizes = {}
        for arg, (shape, dtype) in zip(self.outputs, shapes):
            if np.dtype(dtype) != arg.dtype or len(shape) != len(arg.core) + 1:
                raise ValueError(f"{self.what}: output {arg.name} is {arg.dtype} (n, "
                                 f"{', '.join(arg.core)}), got {np.dtype(dtype)} {shape}")
            for name, size in zip(arg.core, shape[1:]):
                if sizes.setdefault(name, size) != size:
                    raise ValueError(f"{self.what}: outputs disagree on {name} "
                                     f"({sizes[name]} and {size})")
        return sizes

    def _core_sizes(self, inputs, sizes):
        known = dict(sizes or {})
        for arg, array in zip(self.inputs, inputs):
            shape = array.shape[1:] if arg.per_object else array.shape
            if len(shape) != len(arg.core):
                raise ValueError(f"{self.what}: {arg.name} has shape {array.shape}, "
                                 f"expected {'(n or 1, ' if arg.per_object else '('}"
                                 f"{', '.join(arg.core)})")
            for name, size in zip(arg.core, shape):
                if known.setdefault(name, size) != size:
                    raise ValueError(f"{self.what}: {arg.name} gives {name} = {size}, "
                                     f"another argument {known[name]}")
        missing = {name for a in self.outputs for name in a.core} - set(known)
        if missing:
            raise ValueError(f"{self.what}: sizes of {sorted(missing)} are needed")
        return tuple(sorted(known.items()))

    def _op(self, n, sizes):
        """The JAX function for ``n`` objects and these core sizes (built once)."""
        key = (n, sizes)
        if key in self._ops:
            return self._ops[key]
        size = dict(sizes)
        results = [jax.ShapeDtypeStruct((n,) + tuple(size[d] for d in a.core), a.dtype)
                   for a in self.outputs]
        call = jax.ffi.ffi_call(self.name, results)

        @custom_vmap
        def op(*inputs):
            return tuple(call(*inputs))

        @op.def_vmap
        def op_vmap(axis_size, in_batched, *inputs):
            return self._batched(n, sizes, axis_size, in_batched, inputs)

        @jax.custom_jvp
        def differentiable(*inputs):
            return op(*inputs)

        @differentiable.defjvp
        def _jvp(primals, tangents):
            raise DerivativeError(
                f"derivatives of the {self.what} are not supported (jax.grad, jax.jvp, "
                "jax.vjp): it runs as a foreign XLA kernel with no derivative rule. "
                "Wrap its inputs in jax.lax.stop_gradient where no derivative through "
                "it is wanted.")

        self._ops[key] = differentiable
        return differentiable

    def _batched(self, n, sizes, batch, in_batched, inputs):
        """vmap: the batch of B problems of n objects is one problem of B * n.

        A per-object input with one row is shared; a batched shared input
        (another ``tofs`` per problem, say) cannot be merged: then the
        problems run one after another (``lax.map``).
        """
        if any(b and not a.per_object for a, b in zip(self.inputs, in_batched)):
            stacked = [x for x, b in zip(inputs, in_batched) if b]

            def one(xs):
                xs = iter(xs)
                return self._op(n, sizes)(*[next(xs) if b else x
                                           for x, b in zip(inputs, in_batched)])
            return jax.lax.map(one, stacked), (True,) * len(self.outputs)
        merged = []
        for arg, x, b in zip(self.inputs, inputs, in_batched):
            if not b:
                if arg.per_object and x.shape[0] == n and n != 1:  # one row per object
                    x = jnp.broadcast_to(x[None], (batch,) + x.shape)
                    x = x.reshape((batch * n,) + x.shape[2:])
                merged.append(x)
                continue
            if x.shape[1] != n:  # one shared row in each problem
                x = jnp.broadcast_to(x, (batch, n) + x.shape[2:])
            merged.append(x.reshape((batch * n,) + x.shape[2:]))
        outputs = self._op(batch * n, sizes)(*merged)
        return tuple(y.reshape((batch, n) + y.shape[1:]) for y in outputs), \
            (True,) * len(self.outputs)


# --------------------------------------------------------------------------
# cuda: the launch on XLA's stream.
# --------------------------------------------------------------------------


_KERNELS = {}


def xla_kernel(kernel, what="hapsira kernel"):
    """The :class:`XlaKernel` of ``kernel`` (an ObjectKernel), built once per kernel."""
    key = id(kernel)
    entry = _KERNELS.get(key)
    if entry is None or entry[0] is not kernel:
        entry = (kernel, XlaKernel(kernel, what))
        _KERNELS[key] = entry
    return entry[1]
