"""`CowellResult`: the core's result fields with the orbit's ``rr``, ``vv`` in place of ``y``.

Every cowell front returns this type or a view of it (the JAX front's pytree, the
Dask front's lazy arrays), as `hapsira_core.ivp.results` does for ``solve_ivp``:
the shared fields (``status``, ``t_events``, ``n_events``, ``nfev``, ``nsteps``)
and their documentation are the core's.
"""

from astropy import units as u

from hapsira_core import ivp
from hapsira_core.ivp import results as core
from hapsira_core.ivp.layout import INFO

__all__ = ["RR", "STATUS_MESSAGES", "STM", "VV", "CowellResult"]

#: What each ``status`` code means.
STATUS_MESSAGES = {
    ivp.SUCCESS: "reached the last time of flight",
    ivp.TERMINATED: "stopped by a terminal event",
    ivp.STEP_TOO_SMALL: "step size fell below 10 ulp of t (a singularity, e.g. "
                        "a collision with the attractor's centre)",
    ivp.MAX_STEPS: "max_steps accepted steps were not enough",
    ivp.BAD_INITIAL_STATE: "initial state or its derivative is not finite "
                           "(NaN or inf input, or r = 0)",
    ivp.JACOBIAN_NOT_FINITE: ivp.STATUS_MESSAGES[ivp.JACOBIAN_NOT_FINITE],
}

RR = core.Field("rr", core.ROWS, "``(N, M, 3)``: positions at ``tofs``, km (NaN where the "
                                 "object had stopped)")
VV = core.Field("vv", core.ROWS, "``(N, M, 3)``: velocities at ``tofs``, km/s (NaN where "
                                 "the object had stopped)")
STM = core.Field("stm", core.ROWS, "``(N, M, 6, 6)`` with ``stm=True``: d(rr, vv)(tofs[j]) / "
                                   "d(r0, v0), km and s (NaN where the object had stopped), "
                                   "else None")


class CowellResult(core.BatchResult):
    """What `cowell()` returns.

    ``success``, ``messages()`` (`STATUS_MESSAGES`), ``res[i]`` (object i: its
    ``rr``, ``vv`` rows, counts as ints, events as the recorded occurrences).
    Quantities (km, km/s, s) where the call was given any.
    """

    FIELDS = (RR, VV, core.STATUS, core.T_EVENTS, core.N_EVENTS, core.NFEV, core.NSTEPS, STM)
    MESSAGES = STATUS_MESSAGES

    @classmethod
    def from_kernel(cls, raw, single=False, quantities=False):
        """The result from the kernel's trimmed outputs (``y`` ``(N, M, 6)``, or
        ``(N, M, 42)`` with the matrix after the state; ``info``, ``t_events``,
        ``n_events``; numpy or JAX arrays); ``quantities``: in astropy units."""
        y, info = raw["y"], raw["info"]
        rr, vv = y[:, :, :3], y[:, :, 3:6]
        stm = y[:, :, 6:].reshape(y.shape[0], y.shape[1], 6, 6) if y.shape[2] > 6 else None
        t_events = [raw["t_events"][:, e] for e in range(raw["t_events"].shape[1])]
        if quantities:
            rr, vv, t_events = rr << u.km, vv << (u.km / u.s), [t << u.s for t in t_events]
        return cls.of_objects(single, rr=rr, vv=vv, status=info[:, INFO.status],
                              t_events=t_events, n_events=raw["n_events"],
                              nfev=info[:, INFO.nfev], nsteps=info[:, INFO.nsteps], stm=stm)
