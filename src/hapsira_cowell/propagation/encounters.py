"""The two objects of each close approach at its time of closest approach: their states,
their covariances propagated from the epoch with the state transition matrix, and the
relative state in the first object's RTN frame: what a CCSDS Conjunction Data Message
reports (`hapsira_cowell.outputs.cdm`; docs/screening.md).

The states come from a second propagation of the approach's two objects from the
epoch to the TCA, with the force model and tolerances of the screen and
``stm=True``: the miss distance of those states equals the table's to the solver's
accuracy (the tests hold it to 1 m), and ``P(tca) = Phi P0 Phi^T`` is the linear
covariance of `hapsira_cowell.covariance.propagate`.
"""

import warnings

import numpy as np
from astropy import units as u

from ..constants import K_EARTH
from ..units import UnitsWarning, to_value
from .conjunctions import ConjunctionTable, _rows, two_body_j2
from .covariance import covariances_in_km, propagate, rtn_basis, to_rtn
from .forms import check_gm, check_states

__all__ = ["Encounters", "encounters"]


class Encounters:
    """What `encounters` returns: one row per approach of the table, in its order.

    ``i``, ``j``, ``tca`` (s), ``miss`` (km), ``speed`` (km/s): the table's columns.
    ``rr1``, ``vv1``, ``rr2``, ``vv2`` ``(K, 3)``: the states of objects ``i`` and
    ``j`` at ``tca`` (km, km/s, the frame of ``r0``). ``P1``, ``P2`` ``(K, 6, 6)``:
    their covariances there in that frame; ``P1_rtn``, ``P2_rtn``: the same in each
    object's own RTN frame (km and km/s blocks). ``relative`` ``(K, 6)``: object
    ``j``'s position and velocity minus object ``i``'s, along object ``i``'s R, T, N
    axes. ``status`` ``(K, 2)``: the second propagation's status of both objects
    (0 where it reached the TCA; rows of a failed one are NaN). ``epoch``: what
    ``probability(..., method="monte_carlo_epoch")`` propagates again (a dict: ``k``,
    ``t0``, the objects' ``r0``, ``v0``, ``P0``, params ``rows``, ``f``, ``rtol``,
    ``atol``); ``epoch_rows`` ``(K, 2)``: the rows of ``r0`` of each approach's two
    objects (the table's ``i``, ``j``).
    """

    def __init__(self, **columns):
        self.__dict__.update(columns)

    def __len__(self):
        return len(self.tca)

    def probability(self, hbr, method="foster", *, full=False, k=K_EARTH, samples=None,
                    seed=None, hbr_shape="circle", window=None):
        """The probability of collision of each approach from these states and covariances
        (`hapsira_cowell.propagation.probability.probability`; ``hbr`` the combined
        hard-body radius, km, a number or one per approach). NaN for approaches whose
        objects did not reach the TCA (``status``).

        ``method="monte_carlo_epoch"`` draws clones from the covariances at the epoch
        instead and propagates them (`probability_epoch`, with `encounters`' force model
        and tolerances), over ``window`` ``(K, 2)`` (s, on the axis of ``tca``; default
        `epoch_windows`); its flags and plane numbers are ``"foster"``'s at the TCA."""
        from .probability import Probability, probability

        ok = np.flatnonzero((self.status == 0).all(axis=1))
        hbr = np.asarray(to_value(hbr, u.km, "hbr"), dtype=np.float64)
        if hbr.ndim == 1 and hbr.shape[0] != len(self):
            raise ValueError(f"hbr: expected a number or shape ({len(self)},), got {hbr.shape}")
        epoch = method == "monte_carlo_epoch"
        if window is not None and not epoch:
            raise ValueError(f"window: only used with method='monte_carlo_epoch', got "
                             f"method={method!r}")
        if epoch:
            if hbr_shape != "circle":
                raise ValueError(f"hbr_shape: method='monte_carlo_epoch' counts hits in the "
                                 f"sphere of radius hbr, got {hbr_shape!r}")
            result = self._epoch_probability(ok, hbr, k, samples, seed, window)
        else:
            result = probability(self.rr1[ok], self.vv1[ok], self.P1[ok], self.rr2[ok],
                                 self.vv2[ok], self.P2[ok], hbr[ok] if hbr.ndim else hbr,
                                 method, full=True, k=k, samples=samples, seed=seed,
                                 hbr_shape=hbr_shape)
        columns = {}
        for name, value in vars(result).items():
            if isinstance(value, np.ndarray) and name != "window":
                # NaN where skipped; counts (monte_carlo's hits) become floats for it
                dtype = float if value.dtype.kind in "iu" else value.dtype
                column = np.full((len(self), *value.shape[1:]),
                                 False if value.dtype == bool else np.nan, dtype=dtype)
                column[ok] = value
                value = column
            columns[name] = value
        return Probability(**columns) if full else columns["pc"]

    def epoch_windows(self, k=K_EARTH):
        """The default windows of ``method="monte_carlo_epoch"``, ``(K, 2)`` s on the
        axis of ``tca``: ``tca`` plus or minus the encounter's duration of the
        long-encounter flag (``2 (5 s_v + hbr) / |v|``, so 10 combined standard
        deviations along the relative velocity each way; `probability`'s
        ``duration``, here without ``hbr``), at most a quarter of the shorter orbital
        period (nearly co-orbital objects pass close twice an orbit: one window, one
        encounter), and from the epoch on."""
        from .probability import _period_of

        rel = np.asarray(self.vv2) - np.asarray(self.vv1)
        speed = np.linalg.norm(rel, axis=1)
        axis = rel / np.where(speed > 0, speed, 1.0)[:, None]
        total = np.asarray(self.P1)[:, :3, :3] + np.asarray(self.P2)[:, :3, :3]
        along = np.sqrt(np.maximum(np.einsum("ki,kij,kj->k", axis, total, axis), 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            half = 10.0 * along / speed
        gm = float(to_value(k, u.km ** 3 / u.s ** 2, "k"))
        quarter = 0.25 * np.minimum(_period_of(self.rr1, self.vv1, gm),
                                    _period_of(self.rr2, self.vv2, gm))
        half = np.where(np.isfinite(half), np.minimum(half, quarter), quarter)
        t0 = self.epoch["t0"]
        return np.stack([np.maximum(self.tca - half, t0), self.tca + half], axis=1)

    def _epoch_probability(self, ok, hbr, k, samples, seed, window):
        import warnings as _warnings

        from .probability import (EPOCH_SAMPLES, CovarianceRepairedWarning,
                                  LongEncounterWarning, Probability, probability,
                                  probability_epoch)

        epoch = getattr(self, "epoch", None)
        if epoch is None:
            raise ValueError("method: 'monte_carlo_epoch' needs the states and covariances "
                             "at the epoch, which encounters() keeps; these Encounters were "
                             "made otherwise")
        if window is None:
            window = self.epoch_windows(k)
        window = np.asarray(to_value(window, u.s, "window"), dtype=np.float64)
        if window.shape != (len(self), 2):
            raise ValueError(f"window: expected (start, end) of each approach, shape "
                             f"({len(self)}, 2), s on the axis of tca, got {window.shape}")
        radius = hbr[ok] if hbr.ndim else hbr
        with _warnings.catch_warnings():  # the flags of the 2D model, kept as columns
            _warnings.simplefilter("ignore", LongEncounterWarning)
            _warnings.simplefilter("ignore", CovarianceRepairedWarning)
            flags = probability(self.rr1[ok], self.vv1[ok], self.P1[ok], self.rr2[ok],
                                self.vv2[ok], self.P2[ok], radius, "foster", full=True, k=k)
        i, j = self.epoch_rows[ok, 0], self.epoch_rows[ok, 1]
        params = None if epoch["rows"] is None else np.stack([epoch["rows"][i],
                                                              epoch["rows"][j]])
        sampled = probability_epoch(
            epoch["k"], epoch["r0"][i], epoch["v0"][i], epoch["P0"][i], epoch["r0"][j],
            epoch["v0"][j], epoch["P0"][j], radius, window[ok] - epoch["t0"],
            samples=EPOCH_SAMPLES if samples is None else samples, seed=seed,
            f=epoch["f"], params=params, rtol=epoch["rtol"], atol=epoch["atol"], full=True)
        columns = dict(vars(flags))
        columns.update(vars(sampled))
        columns["repaired"] = np.zeros(len(ok), dtype=bool)
        columns["window"] = window
        return Probability(**columns)


def encounters(k, r0, v0, table, P0, *, t0=0.0, f=None, params=None, rtol=1e-11,
               atol=1e-12):
    """States and covariances of both objects of every approach of ``table`` at its TCA.

    Parameters
    ----------
    k : float or Quantity
        GM of the attractor, km^3/s^2.
    r0, v0 : array_like or Quantity, (N, 3)
        The states `screen` was given (km, km/s), at ``t0``.
    table : ConjunctionTable
        `screen`'s result for them (its ``i``, ``j`` index ``r0``).
    P0 : array_like or Quantity, (6, 6) or (N, 6, 6)
        Covariance of each object's ``(r0, v0)`` in the frame of ``r0``, shared or one
        per object (plain numbers in km and km/s, or a Quantity of length squared as
        for `hapsira_cowell.covariance.propagate`); `hapsira_cowell.covariance.from_rtn`
        makes one from RTN standard deviations.
    t0 : float or Quantity
        The time of ``r0`` on the axis of the table's ``tca`` (``t_span[0]`` of the
        screen), s.
    f, params, rtol, atol :
        As given to `screen` (default `two_body_j2`).

    Returns
    -------
    Encounters
    """
    if not isinstance(table, ConjunctionTable):
        raise ValueError(f"table: expected the ConjunctionTable screen returned, got "
                         f"{type(table).__name__}")
    k = float(check_gm(k))
    r0, v0, _ = check_states(r0, v0)
    n = r0.shape[0]
    values = covariances_in_km(P0, n)
    t0 = float(to_value(t0, u.s, "t0"))
    i, j, tca = table.i, table.j, table.tca
    if len(table) and (max(i.max(), j.max()) >= n or min(i.min(), j.min()) < 0):
        raise ValueError(f"table: object indices up to {max(i.max(), j.max())} for {n} "
                         "states; give the r0, v0 the table was screened from")
    tofs = np.concatenate([tca, tca]) - t0
    if np.any(tofs < 0):
        raise ValueError(f"table: a TCA {tofs.min():g} s before t0; give the t0 of the "
                         "screen's t_span")
    objects = np.concatenate([i, j])
    states = np.full((2 * len(table), 6), np.nan)
    stm = np.full((2 * len(table), 6, 6), np.nan)
    status = np.zeros(2 * len(table), dtype=np.int64)
    at_epoch = tofs == 0  # cowell's times of flight start after 0: these need no step
    states[at_epoch] = np.concatenate([r0, v0], axis=1)[objects[at_epoch]]
    stm[at_epoch] = np.eye(6)
    moving = np.flatnonzero(~at_epoch)
    if moving.size:
        from .propagator import cowell

        rows = None if params is None else _rows(params, n)[objects[moving]]
        with warnings.catch_warnings():  # the TCAs are the screen's seconds, whatever
            warnings.simplefilter("ignore", UnitsWarning)  # they look like
            res = cowell(k, r0[objects[moving]], v0[objects[moving]], tofs[moving, None],
                         rtol, atol, f=two_body_j2 if f is None else f, params=rows,
                         stm=True)
        states[moving] = np.concatenate([res.rr[:, 0], res.vv[:, 0]], axis=1)
        stm[moving] = res.stm[:, 0]
        status[moving] = res.status
    P = propagate(stm[:, None], values[objects])[:, 0]
    P_rtn = to_rtn(states[:, :3], states[:, 3:], P)  # NaN rows stay NaN
    half = len(table)
    basis = rtn_basis(states[:half, :3], states[:half, 3:])  # object i's axes
    difference = states[half:] - states[:half]
    relative = np.concatenate([np.einsum("kij,kj->ki", basis, difference[:, :3]),
                               np.einsum("kij,kj->ki", basis, difference[:, 3:])], axis=1)
    return Encounters(i=i, j=j, tca=tca, miss=table.miss, speed=table.speed,
                      rr1=states[:half, :3], vv1=states[:half, 3:], rr2=states[half:, :3],
                      vv2=states[half:, 3:], P1=P[:half], P2=P[half:], P1_rtn=P_rtn[:half],
                      P2_rtn=P_rtn[half:], relative=relative,
                      status=np.stack([status[:half], status[half:]], axis=1),
                      epoch_rows=np.stack([i, j], axis=1),
                      epoch=dict(k=k, t0=t0, r0=r0, v0=v0, P0=values,
                                 rows=None if params is None else _rows(params, n),
                                 f=two_body_j2 if f is None else f, rtol=rtol, atol=atol))
