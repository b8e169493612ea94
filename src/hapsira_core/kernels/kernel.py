"""A per-object kernel, described independently of the target that runs it.

`Arg` describes one array argument; `ObjectKernel` holds the
body and the arguments, writes the kernel's source (each backend says how
the body is called per object) and leaves compiling and running to the
backend's subclass.
"""

import warnings

import numba
import numpy as np

from .. import progress, settings
from . import cache


class Arg:
    """One array argument of an `ObjectKernel`.

    ``core``: the names of the per-object dimensions (``()`` for none).
    ``per_object``: the array has a leading object axis of length N (or 1,
    then broadcast to every object); otherwise it is shared by all objects.
    ``output``: written by the kernel; outputs are per-object, and the body
    must write every element of its rows. ``scratch``: an output that is
    working memory only: on the GPU it is never copied back to the host.
    ``interleaved``: scratch that a target may lay out with the object axis
    last, ``core + (N,)``, so that neighbouring objects' elements are
    neighbours in memory (the cuda target does: a warp's loads of one row then
    coalesce); the body sees the same per-object view either way, strided.
    """

    def __init__(self, name, dtype, core, per_object=True, output=False, scratch=False,
                 interleaved=False):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.core = tuple(core)
        self.per_object = per_object or output or scratch
        self.output = output or scratch
        self.scratch = scratch
        if interleaved and not scratch:
            raise ValueError(f"{name}: only scratch arrays can be interleaved (an output's "
                             "rows are copied back object by object)")
        self.interleaved = bool(interleaved)

    def numba_type(self):
        scalar = numba.from_dtype(self.dtype)
        return scalar[(slice(None),) * len(self.core)] if self.core else scalar

    def __repr__(self):
        return f"Arg({self.name!r}, {self.dtype}, {self.core})"


class Columns:
    """An ``(N, k_1 + k_2 + ...)`` input given as blocks of columns ``(N, k_i)``.

    Rows are joined only where a kernel reads them: the cuda target copies
    each block's rows of a chunk to the GPU and joins them there; the host
    targets join them all before the call. (``cowell``'s states are
    ``(r0 | v0)``: joining 10^6 of them on the host costs as long as a
    quarter of the GPU's kernel.) Blocks may be device arrays on cuda.
    ``columns[a:b]`` is the joined rows a to b of host blocks, a C-ordered array.
    """

    def __init__(self, *blocks):
        self.blocks = blocks
        self.dtype = np.result_type(*(np.dtype(b.dtype) for b in blocks))
        self.shape = (blocks[0].shape[0], sum(b.shape[1] for b in blocks))

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, rows):
        if not isinstance(rows, slice):
            raise TypeError("Columns: only a slice of rows can be taken")
        return np.concatenate([b[rows] for b in self.blocks], axis=1)

    def __array__(self, dtype=None, copy=None):
        joined = self[:]
        return joined if dtype is None else joined.astype(dtype, copy=False)


class ObjectKernel:
    """Run ``body(row_0, ..., row_n)`` once per object on the active target.

    ``body`` is an `hjit()` function taking one
    argument per `Arg`: a per-object argument arrives as that
    object's row, a shared one whole. Inputs come first in ``args``, outputs
    last. Calling the kernel with numpy arrays (or, on cuda, arrays exposing
    ``__cuda_array_interface__``, used in place) fills the output arrays.
    """

    TARGET = None  # set by each target's subclass: its name
    #: what the kernel is, in the user's words (the notice of a long compile)
    description = "a solver kernel"

    @staticmethod
    def code_options():
        """The target's settings that change the generated code (part of the cache
        key), read when a key is made; each target's subclass says which."""
        return ()
    #: whether `_run` takes `Columns` inputs and joins their rows itself
    JOINS_COLUMNS = False

    def __init__(self, body, args, recipe=None):
        self.body = body
        self.args = list(args)
        #: ``(key, prelude)``: the cache key (`hapsira_core.kernels.cache.key`: what the
        #: body reads and the settings that change its code) and the source that
        #: defines ``body`` by import, for the on-disk cache; None: in memory.
        #: Without one, a body that a new process can import gets one made here.
        self.recipe = recipe if recipe is not None else self._importable_body()
        outputs = [a.output for a in self.args]
        if not any(outputs) or outputs != sorted(outputs):
            raise ValueError("ObjectKernel args: inputs first, then at least one output")
        self.n_inputs = outputs.index(True)
        self._compiled = None
        #: cuda: seconds during which the last call's kernels ran on the GPU
        #: (chunks that overlap on two streams counted once).
        self.last_kernel_seconds = None

    def _row(self, arg, index="i"):
        if not arg.per_object:
            return arg.name
        if arg.output:
            return f"{arg.name}[{index}]"
        return f"{arg.name}[{index} if {arg.name}.shape[0] != 1 else 0]"

    def _call_parts(self):
        """``(parameters, rows, first output)`` for a kernel's source: the arguments'
        names, ``body``'s arguments for object ``i`` (`_row`), and the output whose
        first axis is the number of objects."""
        return (", ".join(a.name for a in self.args),
                ", ".join(self._row(a) for a in self.args),
                self.args[self.n_inputs].name)

    def _source(self):
        """The kernel's Python source: defines ``kernel`` calling ``body``."""
        raise NotImplementedError

    def _compile(self, kernel, cached):
        """The compiled form of the Python function ``kernel`` (``cached``: with
        numba's on-disk cache, the function's file being a cache module)."""
        raise NotImplementedError

    def compile(self):
        if self._compiled is None:
            self._compiled = self._build()
        return self._compiled

    def _build(self):
        """Compile the kernel; from the on-disk cache where it has a recipe.

        An entry that numba cannot load (truncated or garbage index or data
        files) is removed and rebuilt once, with a warning; a genuine compile
        error (the user's code) is raised as it is.
        """
        for attempt in range(2):
            function, cached = self._kernel_function()
            try:
                # (a target may compile as it makes the function: parallel's gufunc)
                with progress.compiling(self.description):
                    compiled = self._compile(function, cached)
                    if cached:  # load (or compile and save) now, where errors are ours
                        self._eager(compiled)
                return compiled
            except Exception as error:
                if not cached or attempt or not cache.is_corruption(error):
                    raise
                warnings.warn(f"hapsira cache: the entry {self.cache_name} could not be "
                              f"loaded ({type(error).__name__}: {error}); rebuilding it",
                              cache.CacheWarning, stacklevel=4)
                cache.remove(self.cache_name)

    def _importable_body(self):
        imports = {}
        body = cache.expression(self.body, imports)
        if body is None:
            return None
        prelude = f"{cache.import_lines(imports)}\n\nbody = {body}\n"
        arguments = repr([(a.name, a.dtype.str, a.core, a.per_object, a.output) for a in self.args])
        key = cache.key(self.body, prelude, arguments, code_options=self.code_options())
        return key, prelude

    def on_disk(self):
        """Whether a compiled form of this kernel is in the on-disk cache (so that
        the first call loads it instead of compiling)."""
        if (self._compiled is not None or not settings.CACHE or self.recipe is None
                or cache._UNUSABLE.get(settings.CACHE_DIR) is not None):
            return self._compiled is not None
        return any(f.endswith((".nbi", ".nbc")) for f in cache._entry_files(self.cache_name))

    @property
    def cache_name(self):
        return None if self.recipe is None else f"hapsira_kernel_{self.TARGET}_{self.recipe[0]}"

    def _signature(self):
        """The numba types of the arguments (C-ordered arrays)."""
        return tuple(numba.types.Array(numba.from_dtype(a.dtype),
                                       len(a.core) + (1 if a.per_object else 0), "C")
                     for a in self.args)

    def _eager(self, compiled):
        compiled.compile(self._signature())

    def _kernel_function(self):
        """``(kernel as a Python function, whether it comes from a cache file)``.

        With a recipe and caching on, the kernel lives in a generated module
        under ``HAPSIRA_CACHE_DIR`` whose name holds the recipe's fingerprint
        (`hapsira_core.kernels.cache`); otherwise it is made in memory.
        """
        source = self._source()
        if settings.CACHE and self.recipe is not None:
            key, prelude = self.recipe
            module = cache.load_module(f"{self.TARGET}_{key}", prelude + "\n\n" + source)
            if module is not None:  # None: the folder cannot be used (warned once)
                return module.kernel, True
        namespace = self._globals()
        exec(compile(source, "<hapsira object kernel>", "exec"), namespace)
        return namespace["kernel"], False

    def _globals(self):
        return {"body": self.body}

    def __call__(self, *arrays):
        if len(arrays) != len(self.args):
            raise TypeError(f"expected {len(self.args)} arrays, got {len(arrays)}")
        if not self.JOINS_COLUMNS:
            arrays = [np.asarray(a) if isinstance(a, Columns) else a for a in arrays]
        self._run(self.compile(), arrays)

    def _run(self, kernel, arrays):
        raise NotImplementedError

    def resources(self):
        """Registers and local memory per thread (cuda only; ``{}`` elsewhere)."""
        return {}
