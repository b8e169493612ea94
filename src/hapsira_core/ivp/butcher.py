"""A Butcher tableau of an explicit embedded Runge-Kutta pair, checked on creation.

Notation of Hairer, Norsett & Wanner, *Solving ODEs I*, Sec. II.1 and II.4:
stage ``i`` is ``k_i = f(t + c_i h, y + h sum_j a_ij k_j)``; the step is
``y + h sum_i b_i k_i``; ``error`` rows weight the stages and the derivative
at the step's end (the "first same as last" stage, column ``n_stages``) to
estimate the local error. ``extra`` stages (rows past ``n_stages``) exist for
the dense output only.
"""

from dataclasses import dataclass, field

#: Tolerance of the consistency checks: the published coefficients are
#: rounded to double precision, so row sums differ from c by a few ulp.
_TOLERANCE = 1e-14


def weights(row):
    """``{column: weight}`` of a tableau row, zeros left out."""
    return {column: weight for column, weight in enumerate(row) if weight}


@dataclass(frozen=True)
class ButcherTableau:
    """The coefficients of one explicit embedded pair.

    ``c``, ``a``: nodes and stage coefficients of every stage, the extra
    (dense-output) stages included: ``a[i]`` has ``i`` entries. ``b``: the
    step's weights over the ``n_stages`` main stages. ``error``: named rows
    of error weights over the main stages and the step-end derivative.
    ``order``, ``error_estimator_order``: the orders of the step and of the
    error estimate (the step-size exponent is ``-1 / (error_estimator_order + 1)``).
    """

    name: str
    c: tuple
    a: tuple
    b: tuple
    error: dict
    order: int
    error_estimator_order: int
    n_stages: int = field(default=0)

    def __post_init__(self):
        if not self.n_stages:
            object.__setattr__(self, "n_stages", len(self.b))
        self.check()

    def check(self):
        """Raise ``ValueError`` unless the tableau is consistent.

        Every row of ``a`` sums to its node ``c_i`` (the stages are
        evaluated at the times they claim), the step weights sum to 1
        (order >= 1), every error row sums to 0 (it is the difference of
        two consistent methods), and the step's last node is 1.
        """
        problems = []
        if len(self.c) != len(self.a):
            problems.append(f"{len(self.c)} nodes but {len(self.a)} rows of a")
        for i, (c, row) in enumerate(zip(self.c, self.a)):
            if len(row) != i:
                problems.append(f"row {i} of a has {len(row)} entries, expected {i}")
            if abs(sum(row) - c) > _TOLERANCE * max(1.0, sum(abs(x) for x in row)):
                problems.append(f"row {i} of a sums to {sum(row)!r}, not c = {c!r}")
        if abs(sum(self.b) - 1.0) > _TOLERANCE * sum(abs(x) for x in self.b):
            problems.append(f"b sums to {sum(self.b)!r}, not 1")
        for name, row in self.error.items():
            if len(row) != self.n_stages + 1:
                problems.append(f"error row {name!r} has {len(row)} entries, "
                                f"expected {self.n_stages + 1}")
            if abs(sum(row)) > _TOLERANCE * sum(abs(x) for x in row):
                problems.append(f"error row {name!r} sums to {sum(row)!r}, not 0")
        if problems:
            raise ValueError(f"{self.name} tableau is inconsistent: " + "; ".join(problems))

    def stage_rows(self, indices):
        """``(index, c, {column: weight})`` of the given stages, for `.stages`."""
        return [(i, self.c[i], weights(self.a[i])) for i in indices]
