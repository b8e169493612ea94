"""The ``cpu`` target: ``numba.njit`` code and a loop over objects on one core."""

import numba

from .. import kernel
from .host import KEEP_STAGES, hjit, rsqrt  # noqa: F401

VECTORIZE_TARGET = "cpu"


class ObjectKernel(kernel.ObjectKernel):
    TARGET = "cpu"

    def _source(self):
        names = ", ".join(a.name for a in self.args)
        rows = ", ".join(self._row(a) for a in self.args)
        first_out = self.args[self.n_inputs].name
        return (f"def kernel({names}):\n"
                f"    for i in range({first_out}.shape[0]):\n"
                f"        body({rows})\n")

    def _compile(self, function, cached):
        return numba.njit(error_model="numpy", cache=cached)(function)

    def _run(self, compiled, arrays):
        compiled(*arrays)
