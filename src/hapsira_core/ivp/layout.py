"""Where each number sits in the rows the solve loop reads and writes, written once.

The kernel takes a few small rows instead of many scalar arguments (a
gufunc or a GPU kernel wants arrays): the host fills them with
`Row.pack()`, the loop reads them at the offsets below, which are
compile-time constants in its code.
"""

import numpy as np


class Row:
    """Named fields of a 1-D row; a field has a width (default 1)."""

    def __init__(self, dtype, *fields):
        self.dtype = np.dtype(dtype)
        self.offsets = {}
        self.widths = dict(fields)
        offset = 0
        for name, width in fields:
            self.offsets[name] = offset
            offset += width
        self.size = offset

    def __getattr__(self, name):
        try:
            return self.__dict__["offsets"][name]
        except KeyError:
            raise AttributeError(name) from None

    def pack(self, **values):
        """A new row with each field set (scalars or arrays of the field's width)."""
        row = np.zeros(self.size, dtype=self.dtype)
        for name, value in values.items():
            start = self.offsets[name]
            row[start:start + self.widths[name]] = value
        return row


def config_row(n):
    """Floats shared by all objects: the time span, the tolerances, scipy's
    ``max_step`` (inf: no cap) and ``first_step`` (0: chosen as scipy does)."""
    return Row(np.float64, ("t0", 1), ("tf", 1), ("rtol", n), ("atol", n), ("max_step", 1),
               ("first_step", 1))


#: Integers shared by all objects. ``end_states``: 1 where an output time equal to a
#: step's end takes the step's end state instead of the interpolant (the default
#: ``t_eval``, ``[tf]``: scipy's ``t_eval=None`` returns the last step's state and
#: builds no interpolant for it); 0 for explicit output times (scipy interpolates).
#: ``records``: what a kernel with step records (`.loop.make_solve`'s ``records``) writes,
#: the sum of the flags below (0 in the pass that only counts steps).
ICONF = Row(np.int64, ("max_steps", 1), ("n_events", 1), ("y_event_records", 1),
            ("end_states", 1), ("records", 1))
#: Record the state at each breakpoint (scipy's ``t_eval=None``; ``t_eval="steps"`` here).
RECORD_STATES = 1
#: Record each step's interpolant (scipy's ``dense_output=True``).
RECORD_DENSE = 2
#: What the loop reports per object (``njev``/``nlu``: Jacobians evaluated and LU
#: decompositions made, scipy's counts; 0 for the explicit methods).
INFO = Row(np.int64, ("status", 1), ("nfev", 1), ("nsteps", 1), ("njev", 1), ("nlu", 1))
#: Per event and object, between steps: g at the last step's end, the root in this step.
SCRATCH = Row(np.float64, ("g", 1), ("root", 1))

#: Status codes written to ``info[INFO.status]``.
SUCCESS = 0  # reached the end of the time span
TERMINATED = 1  # stopped by a terminal event
STEP_TOO_SMALL = -1  # step size fell below 10 ulp of t: a singularity
MAX_STEPS = -2  # max_steps accepted steps were not enough
BAD_INITIAL_STATE = -3  # initial state or its derivative not finite
JACOBIAN_NOT_FINITE = -4  # an implicit method's Jacobian (the user's jac=) had NaN or inf

STATUS_MESSAGES = {
    SUCCESS: "reached the end of the time span",
    TERMINATED: "stopped by a terminal event",
    STEP_TOO_SMALL: "step size fell below 10 ulp of t (a singularity, or a state that "
                    "is no longer finite)",
    MAX_STEPS: "max_steps accepted steps were not enough",
    BAD_INITIAL_STATE: "initial state or its derivative is not finite",
    JACOBIAN_NOT_FINITE: "the Jacobian (jac, or the one derived from fun) returned a "
                         "matrix with NaN or inf entries",
}


class WorkRows:
    """Rows of the per-object ``work`` array (``(rows, n)``) and what each holds.

    The first ``stage_rows`` rows are the derivatives of a step (stage ``c`` in
    row ``c``; the step's end after the step's stages; DOP853's extra stages of
    its dense output after that), on every target that keeps stages. With
    array-shaped states (`hapsira_core.ivp.state`) every state of the loop is a
    row too, named below; the tuple shape holds them in registers and ignores
    these names. The rows are sized per call, one more output of the kernel:
    nothing is allocated inside the loop.
    """

    NAMES = ("y", "f", "y_new", "stage_in", "weight", "tmp", "tmp2", "eval")

    def __init__(self, stage_rows, sums, coeffs):
        self.stage_rows = stage_rows
        next_row = stage_rows
        for name in self.NAMES:
            setattr(self, name, next_row)
            next_row += 1
        #: first of the rows the method's generated sums write (`stages.compile_stages`)
        self.sums = next_row
        next_row += sums
        #: first of the rows of the dense output's coefficient states
        self.coeffs = next_row
        next_row += coeffs
        self.total = next_row

    def __repr__(self):
        return f"WorkRows(stage_rows={self.stage_rows}, total={self.total})"
