"""Linear covariance propagation with the state transition matrix of ``cowell(..., stm=True)``,
and Monte-Carlo clones to check it against (docs/covariance.md).

Units: a state covariance ``P`` is 6 x 6 over ``(rr, vv)``. Plain numbers are in
km and km/s (blocks km^2, km^2/s, km^2/s^2), as everywhere in hapsira_cowell. A
Quantity ``P`` carries one unit of length squared ``L^2`` and means a state in
``L`` and ``L/s`` (blocks ``L^2``, ``L^2/s``, ``L^2/s^2``): ``P0 << u.m**2`` is a
covariance in metres and m/s. Such a matrix converts to km and km/s by one factor,
``(L/km)^2``, for every block; and ``Phi P0 Phi^T`` needs no conversion at all (the
blocks of ``Phi`` are 1, s, 1/s and 1 whatever the length unit), so `propagate`
returns ``P(t)`` in the unit ``P0`` came in.
"""

import numpy as np
from astropy import units as u

from hapsira_core import memory
from hapsira_core.ivp import checks

from ..units import is_quantity, to_value
from .forms import check_states

__all__ = ["carry", "from_rtn", "propagate", "rtn_basis", "sample", "sample_covariance",
           "to_rtn"]

#: Relative tolerances of the checks of a covariance: ``|P - P^T| <= SYMMETRY * max|P|``
#: and eigenvalues ``>= -DEFINITENESS * max|eigenvalue|`` (rounding, e.g. of a matrix
#: converted or propagated in float64, passes; a sign error does not)
SYMMETRY = 1e-10
DEFINITENESS = 1e-10


def _length_squared(P, name):
    """``(values, unit)``: a Quantity of length squared as its values and unit; plain
    numbers as they are, unit None."""
    if not is_quantity(P):
        return checks.real_array(P, name), None
    if not P.unit.is_equivalent(u.km ** 2):
        raise ValueError(f"{name}: expected plain numbers (km and km/s: blocks km^2, "
                         f"km^2/s, km^2/s^2) or a Quantity of length squared (L^2: a state "
                         f"in L and L/s, e.g. u.m**2 for m and m/s), got {P.unit}")
    return checks.real_array(P.value, name), P.unit


def check_covariance(P, name, n=None):
    """``P`` as float64 ``(N, 6, 6)`` (``(1, 6, 6)`` for one matrix, with True): finite,
    symmetric and positive semidefinite within rounding (`SYMMETRY`, `DEFINITENESS`);
    ``n``: the number of objects a stack of matrices must have."""
    P = np.asarray(P, dtype=np.float64)
    single = P.ndim == 2
    if P.shape[-2:] != (6, 6) or P.ndim not in (2, 3):
        raise ValueError(f"{name}: expected shape (6, 6) or (N, 6, 6), got {P.shape}")
    P = P[None] if single else P
    if n is not None and not single and P.shape[0] != n:
        raise ValueError(f"{name}: expected one matrix per object ({n}), got {P.shape[0]}")
    if not np.all(np.isfinite(P)):
        raise ValueError(f"{name}: expected finite numbers, got NaN or inf")
    scale = np.abs(P).max(axis=(1, 2))
    asymmetry = np.abs(P - P.transpose(0, 2, 1)).max(axis=(1, 2))
    bad = np.flatnonzero(asymmetry > SYMMETRY * scale)
    if bad.size:
        where = "" if single else f"[{bad[0]}]"
        raise ValueError(f"{name}{where}: expected a symmetric matrix, got |P - P^T| = "
                         f"{asymmetry[bad[0]]:.3g} for max |P| = {scale[bad[0]]:.3g}")
    eigenvalues = np.linalg.eigvalsh(P)
    low = eigenvalues[:, 0] < -DEFINITENESS * np.abs(eigenvalues).max(axis=1)
    if low.any():
        i = int(np.flatnonzero(low)[0])
        where = "" if single else f"[{i}]"
        raise ValueError(f"{name}{where}: expected a positive semidefinite matrix (a "
                         f"covariance), got the eigenvalue {eigenvalues[i, 0]:.3g}")
    return P, single


def covariances_in_km(P0, n, name="P0"):
    """``P0`` (`check_covariance`'d, shared or one per object) as ``(n, 6, 6)`` plain
    numbers in km and km/s: a Quantity of length squared converted by one factor."""
    values, unit = _length_squared(P0, name)
    values, _ = check_covariance(values, name, n)
    if unit is not None:
        values = values * unit.to(u.km ** 2)
    return np.broadcast_to(values, (n, 6, 6))


def congruence(stm, P0):
    """``Phi P0 Phi^T`` of ``stm`` ``(N, M, 6, 6)`` and ``P0`` ``(N, 6, 6)`` (plain
    numbers, unchecked: NaN in, NaN out), made symmetric to the last bit."""
    P = np.einsum("nmij,njk,nmlk->nmil", stm, P0, stm)
    return 0.5 * (P + P.swapaxes(-1, -2))


def propagate(res, P0):
    """The linear covariance ``P(t) = Phi(t) P0 Phi(t)^T`` of each object at each time of
    flight.

    Parameters
    ----------
    res : CowellResult or array_like
        What ``cowell(..., stm=True)`` returned (or its ``stm``):
        ``(N, M, 6, 6)``, ``(M, 6, 6)`` for one object.
    P0 : array_like or Quantity, (6, 6) or (N, 6, 6)
        The covariance of ``(r0, v0)``, shared or one per object: plain numbers in km
        and km/s, or a Quantity of length squared (see the module's units).

    Returns
    -------
    ndarray or Quantity, (N, M, 6, 6)
        ``(M, 6, 6)`` for one object; NaN where the object had stopped; in the unit
        of ``P0``.
    """
    stm = getattr(res, "stm", res)
    if stm is None:
        raise ValueError("res: has no state transition matrices; propagate with "
                         "cowell(..., stm=True)")
    stm = np.asarray(stm, dtype=np.float64)
    if stm.ndim not in (3, 4) or stm.shape[-2:] != (6, 6):
        raise ValueError(f"res: expected state transition matrices of shape (N, M, 6, 6) "
                         f"or (M, 6, 6), got {stm.shape}")
    one_object = stm.ndim == 3
    stm = stm[None] if one_object else stm
    values, unit = _length_squared(P0, "P0")
    values, single = check_covariance(values, "P0", stm.shape[0])
    if one_object and not single and values.shape[0] != 1:
        raise ValueError(f"P0: expected shape (6, 6) for one object, got {values.shape}")
    P = congruence(stm, np.broadcast_to(values, (stm.shape[0], 6, 6)))
    P = P[0] if one_object else P
    return P if unit is None else P << unit


def carry(k, r0, v0, P0, tofs, which, f=None, params=None, rtol=1e-11, atol=1e-12):
    """The covariances ``P0`` (N, 6, 6) of the objects ``which`` (indices) of the states
    ``r0``, ``v0`` (N, 3) carried over their times of flight ``tofs`` (N,) s, none 0,
    forward or backward, as ``Phi P0 Phi^T`` with the state transition matrix of
    ``cowell(..., stm=True)`` (``f`` default `conjunctions.two_body_j2`; ``params`` the
    rows of all N objects). Returns the carried matrices (NaN where the propagation
    failed), the path's positions and velocities at the end, and ``cowell``'s status,
    each for ``which``."""
    import warnings

    from ..units import UnitsWarning
    from .conjunctions import _rows, two_body_j2
    from .propagator import cowell

    rows = None if params is None else _rows(params, len(r0))[which]
    with warnings.catch_warnings():  # seconds, whatever they look like; failures
        warnings.simplefilter("ignore", UnitsWarning)  # are the status's to say
        res = cowell(k, r0[which], v0[which], tofs[which, None], rtol, atol,
                     f=two_body_j2 if f is None else f, params=rows, stm=True)
    stm = np.asarray(res.stm, dtype=np.float64)
    stm[res.status != 0] = np.nan
    return congruence(stm, P0[which])[:, 0], res.rr[:, 0], res.vv[:, 0], res.status


def sample(r0, v0, P0, clones, seed=None):
    """``clones`` draws of each object's state from the normal distribution
    N((r0, v0), P0), as one batch for `cowell`.

    Parameters
    ----------
    r0, v0 : array_like or Quantity, (3,) or (N, 3)
        The mean states, km and km/s.
    P0 : array_like or Quantity, (6, 6) or (N, 6, 6)
        Their covariance (see the module's units); a singular one is fine.
    clones : int
        Draws per object, at least 2. Clones that would not fit in memory are refused
        (`hapsira_core.memory.OutputTooLargeError`) before anything is drawn.
    seed : int, numpy Generator or None
        For ``numpy.random.default_rng``.

    Returns
    -------
    (r, v) : (N * clones, 3) each
        Object ``i``'s clones are rows ``i * clones`` to ``(i + 1) * clones - 1``; km
        and km/s, Quantities if ``r0`` or ``v0`` was one. `sample_covariance` of the
        propagated clones is the number to set beside `propagate`'s.
    """
    quantities = is_quantity(r0) or is_quantity(v0)
    r0 = to_value(r0, u.km, "r0")
    v0 = to_value(v0, u.km / u.s, "v0")
    r0, v0, _ = check_states(r0, v0)
    n = r0.shape[0]
    clones = checks.integer(clones, "clones", 2)
    values = covariances_in_km(P0, n)
    # three (N, clones, 6) arrays live at once: the draws, the states, and the states'
    # offsets from the mean (then r and v)
    rows = (n, clones, 6)
    memory.check({"draws": (rows, np.float64), "states": (rows, np.float64),
                  "offsets, r and v": (rows, np.float64)}, n, None,
                 what=f"{n} objects x {clones} clones",
                 way_out="Ask for fewer clones (clones) or fewer objects per call")
    # P0 = V diag(w) V^T: x = mean + V sqrt(w) z (a semidefinite P0 has no Cholesky factor)
    w, V = np.linalg.eigh(values)
    factor = V * np.sqrt(np.clip(w, 0.0, None))[:, None, :]
    z = np.random.default_rng(seed).standard_normal((n, clones, 6))
    states = np.concatenate([r0, v0], axis=1)[:, None, :] + np.einsum("nij,ncj->nci", factor, z)
    states = states.reshape(n * clones, 6)
    r, v = np.ascontiguousarray(states[:, :3]), np.ascontiguousarray(states[:, 3:])
    if quantities:
        return r << u.km, v << (u.km / u.s)
    return r, v


def sample_covariance(rr, vv, clones):
    """The sample covariance of each object's clones at each time: ``(N, M, 6, 6)`` km and
    km/s (plain numbers).

    ``rr``, ``vv``: ``cowell``'s results ``(N * clones, M, 3)`` for states from `sample`
    (object-major). Clones that stopped (NaN) make their object's matrix NaN.
    """
    rr = to_value(rr, u.km, "rr")
    vv = to_value(vv, u.km / u.s, "vv")
    clones = checks.integer(clones, "clones", 2)
    if rr.ndim == 2:  # one time of flight
        rr, vv = rr[:, None, :], vv[:, None, :]
    if rr.ndim != 3 or rr.shape[-1] != 3 or vv.shape != rr.shape:
        raise ValueError(f"rr, vv: expected cowell's states (N * clones, M, 3), got "
                         f"{rr.shape} and {vv.shape}")
    if rr.shape[0] % clones:
        raise ValueError(f"clones: {rr.shape[0]} states are not a whole number of "
                         f"objects of {clones} clones each")
    x = np.concatenate([rr, vv], axis=2)
    x = x.reshape(rr.shape[0] // clones, clones, rr.shape[1], 6)
    d = x - x.mean(axis=1, keepdims=True)
    return np.einsum("ncmi,ncmj->nmij", d, d) / (clones - 1)


def rtn_basis(rr, vv):
    """Each object's radial, transverse and normal unit vectors as the rows of ``(N, 3, 3)``
    (``(3, 3)`` for one object): ``R = r/|r|``, ``N = r x v / |r x v|``, ``T = N x R``.
    A vector ``x`` has the components ``basis @ x`` along them."""
    rr = np.asarray(to_value(rr, u.km, "rr"), dtype=np.float64)
    vv = np.asarray(to_value(vv, u.km / u.s, "vv"), dtype=np.float64)
    if rr.shape[-1:] != (3,) or rr.shape != vv.shape or rr.ndim not in (1, 2):
        raise ValueError(f"rr, vv: expected positions and velocities of shape (3,) or "
                         f"(N, 3), got {rr.shape} and {vv.shape}")
    h = np.cross(rr, vv)
    r_norm = np.linalg.norm(rr, axis=-1, keepdims=True)
    h_norm = np.linalg.norm(h, axis=-1, keepdims=True)
    if np.any(h_norm == 0) or np.any(r_norm == 0):
        raise ValueError("rr, vv: an RTN frame needs a position and a velocity that are "
                         "not parallel (a zero angular momentum has no orbit plane)")
    radial, normal = rr / r_norm, h / h_norm
    return np.stack([radial, np.cross(normal, radial), normal], axis=-2)


def _rotation6(basis):
    Q = np.zeros(basis.shape[:-2] + (6, 6))
    Q[..., :3, :3] = basis
    Q[..., 3:, 3:] = basis
    return Q


def to_rtn(rr, vv, P):
    """Covariances ``P`` ``(N, 6, 6)`` (or one ``(6, 6)``) of inertial ``(r, v)`` as
    covariances in each object's RTN frame (`rtn_basis`): ``Q P Q^T`` with ``Q`` the
    rotation of both the position and the velocity block, the velocity components
    taken along the R, T, N axes (the CCSDS CDM's convention; no ``omega x r`` term of
    the rotating frame). The unit of ``P`` (plain numbers or a Quantity) is kept."""
    values, unit = _length_squared(P, "P")
    Q = _rotation6(rtn_basis(rr, vv))
    if values.shape[-2:] != (6, 6) or values.ndim != Q.ndim:
        raise ValueError(f"P: expected one (6, 6) matrix per state, shape {Q.shape}, got "
                         f"{values.shape}")
    out = Q @ values @ np.swapaxes(Q, -1, -2)
    out = 0.5 * (out + np.swapaxes(out, -1, -2))
    return out if unit is None else out << unit


def from_rtn(rr, vv, P_rtn):
    """`to_rtn` undone: covariances given in each object's RTN frame ``(N, 6, 6)`` (or
    one shared ``(6, 6)``, e.g. ``np.diag(sigma**2)`` of RTN standard deviations) as
    covariances of the inertial ``(r, v)`` of the frame ``rr``, ``vv`` are in."""
    values, unit = _length_squared(P_rtn, "P_rtn")
    Q = _rotation6(rtn_basis(rr, vv))
    if values.shape == (6, 6):
        values = np.broadcast_to(values, Q.shape)
    if values.shape != Q.shape:
        raise ValueError(f"P_rtn: expected (6, 6) or one matrix per state {Q.shape}, got "
                         f"{values.shape}")
    out = np.swapaxes(Q, -1, -2) @ values @ Q
    out = 0.5 * (out + np.swapaxes(out, -1, -2))
    return out if unit is None else out << unit
