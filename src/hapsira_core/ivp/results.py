"""The result types of ``solve_ivp``, one per problem kind, shared by every front.

`IVPResult` (N objects) and `ObjectResult` (one object, scipy's names) are what the
numpy front returns; the Dask front's ``DaskIVPResult`` is `IVPResult` with Dask
arrays (a subclass), and ``hapsira_cowell``'s ``CowellResult`` shares `Statuses`.
"""

import numpy as np

from . import dense as dense_output_module
from .layout import INFO, STATUS_MESSAGES

__all__ = ["IVPResult", "ObjectResult", "Statuses"]


class Statuses:
    """Per-object status codes and what they mean: ``success``, ``messages()``
    and a summary ``repr``, for the result classes of every front."""

    #: What each ``status`` code means (a front may word them for its users).
    MESSAGES = STATUS_MESSAGES

    @property
    def success(self):
        """True where the object reached the end or a terminal event."""
        return np.asarray(self.status) >= 0

    def messages(self):
        """The meaning of each object's status (a list, or a str for one object)."""
        status = np.asarray(self.status)
        if status.ndim == 0:
            return self.MESSAGES[int(status)]
        return [self.MESSAGES[int(s)] for s in status]

    def __repr__(self):
        status = np.atleast_1d(self.status)
        counts = {int(s): int((status == s).sum()) for s in np.unique(status)}
        return f"{type(self).__name__}(objects={status.size}, status counts={counts})"


class IVPResult(Statuses):
    """What `solve_ivp()` returns, for N objects.

    ``t`` ``(M,)``, or ``(N, M)`` with per-object output times or spans
    (``res.t[i]`` object i's times, trailing NaN as given); ``y`` ``(N, n, M)`` (``res.y[i]`` is laid out as scipy's
    ``sol.y``), NaN after a terminal event or a failure; ``status`` ``(N,)``
    (`STATUS_MESSAGES`); ``t_events`` per event
    ``(N, C)`` and ``y_events`` per event ``(N, C, n)``, NaN-padded;
    ``n_events`` ``(N, E)``; ``nfev``, ``njev``, ``nlu`` (0 for these explicit
    methods, as scipy's), ``nsteps`` ``(N,)``. For one object
    (``y0`` of shape ``(n,)``) the leading N axis is dropped. ``res[i]`` is
    object ``i`` with scipy's attribute names.
    """

    def __init__(self, t, raw, single=False):
        info = raw["info"]
        self.t = t[0] if single and t.ndim == 2 else t
        #: states as written by the kernel, ``(N, M, n)``
        self.y_rows = raw["y"]
        self.y = raw["y"].transpose(0, 2, 1)
        self.status = info[:, INFO.status]
        self.nfev = info[:, INFO.nfev]
        self.nsteps = info[:, INFO.nsteps]
        #: Jacobian evaluations and LU decompositions: 0 for the explicit methods, as scipy's
        self.njev = info[:, INFO.njev]
        self.nlu = info[:, INFO.nlu]
        self.t_events = [raw["t_events"][:, e] for e in range(raw["t_events"].shape[1])]
        self.y_events = [raw["y_events"][:, e] for e in range(raw["y_events"].shape[1])]
        self.n_events = raw["n_events"]
        self.single = single
        #: scipy's ``sol`` with ``dense_output=True`` (`set_dense`); None otherwise
        self.sol = None
        if single:
            self.y, self.status, self.nfev, self.nsteps, self.njev, self.nlu = (
                self.y[0], self.status[0], self.nfev[0], self.nsteps[0], self.njev[0],
                self.nlu[0])
            self.t_events = [t[0] for t in self.t_events]
            self.y_events = [y[0] for y in self.y_events]
            self.n_events = self.n_events[0]

    def set_dense(self, records):
        """Keep the step records of ``dense_output=True`` (``(method, n, fun, steps,
        dense, info)``, `.dense`): ``sol(t)`` gives ``(N, n, len(t))`` (``(N, n)``
        for a number; without the N axis for one object)."""
        self.sol = dense_output_module.BatchSolution(records, self.single)

    def __len__(self):
        return 1 if self.single else len(self.status)

    def __getitem__(self, i):
        if self.single:
            if i not in (0, -1):
                raise IndexError(f"one object, index {i}")
            return ObjectResult(self, None)
        return ObjectResult(self, range(len(self.status))[i])


class ObjectResult:
    """One object of an `IVPResult`, with the attribute names of scipy's
    ``OdeResult``: ``t``, ``y`` ``(n, M)``, ``t_events`` (a list of 1-D arrays
    holding the recorded occurrences), ``y_events`` (a list of ``(k, n)``),
    ``status``, ``message``, ``success``, ``nfev``, ``njev``, ``nlu`` (0: explicit
    methods), ``nsteps``."""

    def __init__(self, result, i):
        pick = (lambda a: a) if i is None else (lambda a: a[i])
        self.t = result.t if result.t.ndim == 1 else pick(result.t)
        self.y = pick(result.y)
        if self.t.ndim == 1 and np.isnan(self.t[-1]):  # an (N, M) row's NaN padding
            kept = int(np.count_nonzero(~np.isnan(self.t)))
            self.t, self.y = self.t[:kept], self.y[..., :kept]
        self.status = int(pick(result.status))
        self.nfev = int(pick(result.nfev))
        self.nsteps = int(pick(result.nsteps))
        self.njev = int(pick(result.njev))
        self.nlu = int(pick(result.nlu))
        counts = np.atleast_1d(pick(result.n_events))
        self.t_events = []
        self.y_events = []
        for e, (times, states) in enumerate(zip(result.t_events, result.y_events)):
            times = pick(times)
            kept = min(int(counts[e]), times.shape[0])
            self.t_events.append(times[:kept])
            self.y_events.append(pick(states)[:min(kept, pick(states).shape[0])])
        self.message = STATUS_MESSAGES[self.status]
        self.success = self.status >= 0
        #: scipy's ``OdeSolution`` of this object (``dense_output=True``), else None
        self.sol = None if result.sol is None else result.sol.object(0 if i is None else i)
        if getattr(result, "stm", None) is not None:  # solve_ivp(..., stm=True)
            self.stm = pick(result.stm)[..., :self.t.shape[-1]]
            self.stm_events = [pick(m)[:len(t)] for m, t in zip(result.stm_events,
                                                                 self.t_events)]
        if getattr(result, "stm_events_total", None) is not None:
            self.stm_events_total = [pick(m)[:len(t)] for m, t in
                                     zip(result.stm_events_total, self.t_events)]
            self.dt_events_dy0 = [pick(m)[:len(t)] for m, t in
                                  zip(result.dt_events_dy0, self.t_events)]

    def __repr__(self):
        return f"ObjectResult(status={self.status}, nfev={self.nfev}, nsteps={self.nsteps})"
