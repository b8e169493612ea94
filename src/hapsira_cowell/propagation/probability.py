"""Probability of collision of close approaches from their states and covariances at the
TCA (docs/screening.md): one `hjit` kernel over approaches, on every target.

The 2D methods make the short-encounter assumption: the relative motion is a straight line
during the encounter, the two position errors are Gaussian, independent and constant over
it. The combined position covariance ``C = C1 + C2`` (the 3 x 3 position blocks) is
projected on the encounter plane (normal to the relative velocity ``v = v2 - v1``) and the
probability is the 2D Gaussian's mass over the hard-body disc of radius ``hbr`` centred
``|r2 - r1|`` from the mean, along the relative position's component in that plane (as
CARA's ``Pc2D_Foster`` does: at the TCA the relative position lies in the plane).

``foster``
    The integral itself, computed as a quadrature (Foster and Estes 1992; CARA's
    ``Pc2D_Foster``). In the principal axes of the projected covariance (``s1 >= s2``),
    the inner integral along the major axis is done analytically (two ``erf``), the outer
    one along the minor axis with ``y = hbr sin(theta)`` (no square-root endpoint
    singularity) by composite 16-point Gauss-Legendre over a band of the disc's heights,
    in panels of at most `PANEL` times ``s2 / hbr`` radians (the narrowest scale of the
    integrand in ``theta``), at least `MIN_PANELS` and at most `MAX_PANELS` of them.
    The band: where the disc's point nearest the mean along the minor axis is within
    ``BAND / sqrt(2)`` standard deviations of it, the heights within `BAND` standard
    deviations ``s2`` of that point (the mass left out is below ``2 Phi(-12) < 4e-33`` of
    the Gaussian's, and far below the part kept); else (the disc far out in the tail) the
    heights whose chord comes within `BAND` standard deviations of the disc's nearest
    point (`_band`: squared Mahalanobis distance at most its least value plus
    ``BAND^2``), so that tiny probabilities keep their relative accuracy where that point
    lies off the minor axis too. The rule agrees with adaptive integration to better than 1e-9 relative,
    and with CARA's 53 conjunctions of 1e-168 to 2e-2 to 1e-8 (52 of them; an
    ill-conditioned one to 2.4e-8: tests/cowell/propagation/test_probability.py). The small eigenvalue of the
    projected covariance is computed as ``det / l1``, which keeps its relative accuracy
    where the ellipse is long and thin along the miss.
``chan``
    Chan's series (Chan 1997; *Spacecraft Collision Probability*, 2008, ch. 5): the
    covariance ellipse made a circle of equal area, ``u = hbr^2 / (s1 s2)``,
    ``v = (x / s1)^2 + (y / s2)^2`` for the miss ``(x, y)`` in the principal axes, and
    ``Pc = sum_m Poisson(m; v / 2) P(Poisson(u / 2) > m)``, summed for
    ``m = 0 .. M`` with ``M = floor(v / 2 + 12 sqrt(v / 2)) + 24`` terms (the Poisson
    weights left out are below 1e-20 of the sum), at most `MAX_TERMS`. Exact for a
    circular projected covariance (``s1 = s2``); an approximation otherwise, good where
    ``hbr`` is small against ``s2`` and the ellipse not too elongated.
``max``
    The maximum probability over the covariance's size (Alfano 2005, "Relating position
    uncertainty to maximum conjunction probability"): ``max_k Pc_foster(k^2 C)`` over
    ``k > 0``, the shape and orientation of the projected covariance kept, its scale
    unknown. Found by golden-section search over ``ln k`` (`MAX_ITERATIONS` steps in a
    bracket around the small-disc optimum ``k^2 = v / 2``). Where the miss is inside the
    disc the supremum is 1 (``k -> 0``), returned as such.
``monte_carlo``
    Samples of the relative state's error at the TCA, straight-line motion through the
    encounter and the fraction of samples whose closest approach is within ``hbr``, with
    a Clopper-Pearson interval (`monte_carlo`). Where the covariances are 3 x 3 (or their
    velocity blocks 0) this samples the 2D methods' own model, so the estimate brackets
    `foster`'s value; 6 x 6 ones add velocity errors. It is not CARA's SDMC (which
    propagates each sample on two-body orbits): a long encounter is flagged as for the
    2D methods. `probability_epoch` (``Encounters.probability(...,
    "monte_carlo_epoch")``) is the Monte Carlo for those: clones drawn at the epoch and
    propagated with the force model, each clone pair's closest approach near the TCA.

Hard-body squares (``hbr_shape``, `HBR_SHAPES`; ``foster`` only): the square of side ``2
hbr`` or of the disc's area, centred where the disc is, its sides along the miss and its
normal in the plane (CARA's ``Pc2D_Foster`` ``HBRType`` ``square`` and ``squareEquArea``).
Its corners are taken into the principal axes; the inner integral along the major axis is
closed form between the ends of the square's chord, the outer one along the minor axis is
composite Gauss-Legendre on each piece between the corners' heights (where the chord's
ends are linear), panels of at most `PANEL` times the narrower of ``s2`` and ``s1`` over
the chord ends' slope, over the heights whose chord's nearest point is within ``BAND^2``
of the square's smallest squared Mahalanobis distance (found by golden section: it is
convex in the height), so that a square far out in the tail keeps its relative accuracy.

Non-positive-definite covariances are repaired as CARA's ``Pc2D_Foster`` does: the
eigenvalues of the projected 2 x 2 covariance below ``(1e-4 hbr)^2`` are raised to it
(eigenvalue clipping, Hall et al. 2017); the approaches repaired are flagged
(`Probability.repaired`) and named in a `CovarianceRepairedWarning`.

The short-encounter assumption is flagged doubtful (`Probability.long_encounter`, named
in a `LongEncounterWarning`) where the encounter lasts longer than `LONG_ENCOUNTER` of
the shorter orbital period of the two objects: the duration is the time the relative
motion takes to cross ``+-5`` combined standard deviations along the relative velocity
plus the disc, ``2 (5 s_v + hbr) / |v|`` (so a slow encounter, or one whose covariance is
long along the relative velocity); the period is Keplerian, from each state and ``k``.
Over such a time the relative path bends and the covariances change, which the 2D methods
ignore. This criterion is hapsira-cowell's own (a plain, documented rule of thumb), not
CARA's.
"""

import math
import warnings

import numpy as np
from astropy import units as u

from hapsira_core.ivp import checks
from hapsira_core.jit import Arg, ObjectKernel, hjit

from ..constants import K_EARTH
from ..units import is_quantity, to_value
from . import monte_carlo

__all__ = ["CovarianceRepairedWarning", "EPOCH_SAMPLES", "HBR_SHAPES", "LongEncounterWarning",
           "METHODS", "Probability", "WindowEdgeWarning", "probability", "probability_epoch"]

#: Methods and their codes in the kernel (``monte_carlo`` samples outside it and takes
#: its flags from foster's run); the name each gets in a CDM's
#: ``COLLISION_PROBABILITY_METHOD``: SANA's registry names for Foster's and Chan's;
#: the registry has no Monte Carlo method, which is written ``MONTE-CARLO`` in its
#: style, from the TCA or from the epoch (`probability_epoch`) alike (a free text;
#: Orekit, for one, reads an unregistered name as it is); the
#: maximum over the covariance's size is no CDM's probability and has none.
METHODS = {"foster": 0, "chan": 1, "max": 2, "monte_carlo": 0}
CDM_METHODS = {"foster": "FOSTER-1992", "chan": "CHAN-1997", "monte_carlo": "MONTE-CARLO",
               "monte_carlo_epoch": "MONTE-CARLO"}
#: Hard-body regions (``hbr_shape``) and the half-side of their square over ``hbr`` (0:
#: the disc of radius ``hbr``): CARA's ``Pc2D_Foster`` ``HBRType`` ``circle``, ``square``
#: (side ``2 hbr``) and ``squareEquArea`` (the square of the disc's area, side
#: ``sqrt(pi) hbr``)
HBR_SHAPES = {"circle": 0.0, "square": 1.0, "square_equal_area": 0.5 * math.sqrt(math.pi)}
#: Half-width of the band of the outer (minor-axis) integral, in standard deviations
BAND = 12.0
#: Golden-section and bisection steps of the band about a region's nearest point (each
#: shrinks the bracket to 0.62 or 0.5 of it: 40 golden ones to 4e-9 of the region's
#: extent)
BAND_STEPS = 40
#: Widest panel, in units of ``s2 / hbr`` radians of ``theta``
PANEL = 2.0
MIN_PANELS = 4
MAX_PANELS = 4096
#: Most terms of Chan's series
MAX_TERMS = 4000
#: Golden-section steps of ``method="max"``
MAX_ITERATIONS = 60
#: Eigenvalue floor of the projected covariance, as a fraction of ``hbr`` (CARA's)
CLIP = 1e-4
#: Encounters longer than this fraction of the shorter orbital period are flagged
LONG_ENCOUNTER = 0.01
#: Gauss-Legendre rule of each panel: nodes on [-1, 1] and weights
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(16)
_RULE = np.ascontiguousarray(np.stack([_NODES, _WEIGHTS]))


class CovarianceRepairedWarning(UserWarning):
    """Approaches whose projected 2 x 2 covariance was not positive definite (or had an
    eigenvalue below ``(1e-4 hbr)^2``) and was repaired by eigenvalue clipping, as
    CARA's tools do."""


class LongEncounterWarning(UserWarning):
    """Approaches where the short-encounter assumption of the 2D methods is doubtful
    (`LONG_ENCOUNTER`)."""


@hjit
def _foster(d1, d2, s1, s2, hbr, rule):
    """Mass of the 2D Gaussian of standard deviations ``s1 >= s2`` (principal axes) over
    the disc of radius ``hbr`` whose centre is ``(d1, d2)`` from the mean (those axes)."""
    mx = abs(d1)
    my = d2
    # the band of heights about the disc's point nearest the mean along the minor axis;
    # where that point is more than BAND / sqrt(2) standard deviations out, the band
    # about the disc's nearest point (the disc's centre at 0, the mean at (mx, my))
    disc = (mx, my, hbr, 0.0, 0.0, 0.0, 0.0, 0.0)
    near = max(-hbr, min(hbr, my))
    if _reach(near, disc, s1, s2, True) <= 0.5 * BAND * BAND:
        lo = max(-hbr, near - BAND * s2)
        hi = min(hbr, near + BAND * s2)
    else:
        lo, hi = _band(-hbr, hbr, disc, s1, s2, True)
    if not lo < hi:
        return 0.0
    t_lo = math.asin(max(-1.0, min(1.0, lo / hbr)))
    t_hi = math.asin(max(-1.0, min(1.0, hi / hbr)))
    width = t_hi - t_lo
    panels = int(math.ceil(width * hbr / (PANEL * s2)))
    panels = min(MAX_PANELS, max(MIN_PANELS, panels))
    step = width / panels
    root2s1 = math.sqrt(2.0) * s1
    root2s2 = math.sqrt(2.0) * s2
    total = 0.0
    for p in range(panels):
        middle = t_lo + (p + 0.5) * step
        part = 0.0
        for q in range(rule.shape[1]):
            theta = middle + 0.5 * step * rule[0, q]
            c = math.cos(theta)
            y = hbr * math.sin(theta)
            h = hbr * c
            a = (h + mx) / root2s1
            b = (h - mx) / root2s1
            if b < 0.0:
                inner = math.erfc(-b) - math.erfc(a)
            else:
                inner = math.erf(a) + math.erf(b)
            g = (y - my) / root2s2
            part += rule[1, q] * math.exp(-g * g) * inner * h
        total += part
    # 1/2 of the inner erf sum, the outer Gaussian's 1/(sqrt(2 pi) s2), dtheta = step/2
    return total * 0.5 * step * 0.5 / (math.sqrt(2.0 * math.pi) * s2)


@hjit
def _edge(w, ua, wa, ub, wb, lo, hi):
    """``(lo, hi)`` widened by the point at height ``w`` of the edge from ``(ua, wa)`` to
    ``(ub, wb)`` (principal coordinates), where the edge reaches that height."""
    if wa == wb or w < min(wa, wb) or w > max(wa, wb):
        return lo, hi
    u = ua + (w - wa) * (ub - ua) / (wb - wa)
    return min(lo, u), max(hi, u)


@hjit
def _chord(w, c):
    """The square's chord at height ``w`` along the minor axis: ``(lo, hi)`` along the
    major axis (``lo > hi`` where the line misses it); ``c`` its corners in order, ``(u0,
    w0, u1, w1, u2, w2, u3, w3)``, relative to the mean."""
    lo, hi = math.inf, -math.inf
    lo, hi = _edge(w, c[0], c[1], c[2], c[3], lo, hi)
    lo, hi = _edge(w, c[2], c[3], c[4], c[5], lo, hi)
    lo, hi = _edge(w, c[4], c[5], c[6], c[7], lo, hi)
    lo, hi = _edge(w, c[6], c[7], c[0], c[1], lo, hi)
    return lo, hi


@hjit
def _reach(w, c, s1, s2, disc):
    """The squared Mahalanobis distance of the point of the region's chord at height ``w``
    (along the minor axis) nearest the mean: convex in ``w``, the region being convex.
    ``disc``: the disc of radius ``c[2]`` centred at 0, the mean at ``(c[0] >= 0,
    c[1])``; else the square of corners ``c`` relative to the mean (`_chord`)."""
    if disc:
        half = math.sqrt(max(0.0, c[2] * c[2] - w * w))
        return ((w - c[1]) / s2) ** 2 + (max(0.0, c[0] - half) / s1) ** 2
    lo, hi = _chord(w, c)
    gap = max(0.0, max(lo, -hi))
    return (w / s2) ** 2 + (gap / s1) ** 2


@hjit
def _crossing(end, nearest, level, c, s1, s2, disc):
    """Where `_reach` comes down to ``level`` between ``end`` (either end of a region's
    extent along the minor axis) and the ``nearest`` height (`_band`'s least reach, below
    the level): ``end`` where its reach is not above the level, else the bisection's
    last height whose reach is above it (`BAND_STEPS` halvings)."""
    outside = end
    if _reach(end, c, s1, s2, disc) > level:
        inside = nearest
        for _ in range(BAND_STEPS):
            middle = 0.5 * (outside + inside)
            if _reach(middle, c, s1, s2, disc) > level:
                outside = middle
            else:
                inside = middle
    return outside


@hjit
def _band(lo, hi, c, s1, s2, disc):
    """The heights within ``[lo, hi]`` (the region's extent along the minor axis) whose
    chord comes within `BAND` standard deviations of the region's point nearest the mean
    (`_reach` at most its least value plus ``BAND^2``): the least found by golden section
    (`_reach` is convex), each end of the band by bisection (`_crossing`). The mass left
    out is below ``exp(-BAND^2 / 2)`` of the density at the nearest point times the
    region's extent, far below the part kept however far out the region lies."""
    ratio = 0.5 * (math.sqrt(5.0) - 1.0)
    a = lo
    b = hi
    x1 = b - ratio * (b - a)
    x2 = a + ratio * (b - a)
    f1 = _reach(x1, c, s1, s2, disc)
    f2 = _reach(x2, c, s1, s2, disc)
    for _ in range(BAND_STEPS):
        if f1 > f2:
            a = x1
            x1 = x2
            f1 = f2
            x2 = a + ratio * (b - a)
            f2 = _reach(x2, c, s1, s2, disc)
        else:
            b = x2
            x2 = x1
            f2 = f1
            x1 = b - ratio * (b - a)
            f1 = _reach(x1, c, s1, s2, disc)
    nearest = 0.5 * (a + b)
    level = min(f1, f2, _reach(nearest, c, s1, s2, disc)) + BAND * BAND
    return (_crossing(lo, nearest, level, c, s1, s2, disc),
            _crossing(hi, nearest, level, c, s1, s2, disc))


@hjit
def _mass(lo, hi, s1):
    """The mass of ``N(0, s1^2)`` between ``lo <= hi``, with relative accuracy in the
    tails (the difference of the smaller ``erfc``)."""
    a = lo / (math.sqrt(2.0) * s1)
    b = hi / (math.sqrt(2.0) * s1)
    if a >= 0.0:
        return 0.5 * (math.erfc(a) - math.erfc(b))
    if b <= 0.0:
        return 0.5 * (math.erfc(-b) - math.erfc(-a))
    return 1.0 - 0.5 * (math.erfc(b) + math.erfc(-a))


@hjit
def _square(d1, d2, s1, s2, ux, uy, half, rule):
    """Mass of the 2D Gaussian of standard deviations ``s1 >= s2`` (principal axes ``u``
    and ``u`` rotated +90 degrees, ``u = (ux, uy)`` in the encounter frame) over the
    square of half-side ``half`` whose centre is ``(d1, d2)`` from the mean (principal
    axes) and whose sides lie along the encounter frame's axes (the miss and its normal,
    as CARA's ``Pc2D_Foster`` places them): the inner integral along the major axis in
    closed form between the chord's ends, the outer one along the minor axis by
    composite Gauss-Legendre on each piece between the corners' heights, over the heights
    whose chord comes within `BAND` standard deviations (squared Mahalanobis distance
    ``+ BAND^2``) of the square's nearest point."""
    # corners (+-half, +-half) of the encounter frame, turned into the principal axes
    # (+h, +h), (-h, +h), (-h, -h), (+h, -h): u = e ux + f uy, w = f ux - e uy
    c = (d1 + half * (ux + uy), d2 + half * (ux - uy),
         d1 + half * (uy - ux), d2 + half * (ux + uy),
         d1 - half * (ux + uy), d2 + half * (uy - ux),
         d1 + half * (ux - uy), d2 - half * (ux + uy))
    # the corners' heights, sorted
    h0, h1, h2, h3 = c[1], c[3], c[5], c[7]
    if h0 > h1:
        h0, h1 = h1, h0
    if h2 > h3:
        h2, h3 = h3, h2
    if h0 > h2:
        h0, h2 = h2, h0
    if h1 > h3:
        h1, h3 = h3, h1
    if h1 > h2:
        h1, h2 = h2, h1
    start, stop = _band(h0, h3, c, s1, s2, False)
    total = 0.0
    for piece in range(3):
        if piece == 0:
            a, b = h0, h1
        elif piece == 1:
            a, b = h1, h2
        else:
            a, b = h2, h3
        a = max(a, start)
        b = min(b, stop)
        if not a < b:
            continue
        # the chord's ends are linear on the piece: its panels follow both scales
        lo_a, hi_a = _chord(a + 1e-9 * (b - a), c)
        lo_b, hi_b = _chord(b - 1e-9 * (b - a), c)
        scale = max((b - a) / s2, max(abs(lo_b - lo_a), abs(hi_b - hi_a)) / s1)
        panels = min(MAX_PANELS, max(MIN_PANELS, int(math.ceil(scale / PANEL))))
        step = (b - a) / panels
        for p in range(panels):
            middle = a + (p + 0.5) * step
            part = 0.0
            for q in range(rule.shape[1]):
                w = middle + 0.5 * step * rule[0, q]
                lo, hi = _chord(w, c)
                if lo < hi:
                    g = w / (math.sqrt(2.0) * s2)
                    part += rule[1, q] * math.exp(-g * g) * _mass(lo, hi, s1)
            total += part * 0.5 * step
    return total / (math.sqrt(2.0 * math.pi) * s2)


@hjit
def _poisson(m, mean):
    """``exp(-mean) mean^m / m!`` (0 for ``mean = 0`` and ``m > 0``)."""
    if mean <= 0.0:
        return 1.0 if m == 0 else 0.0
    return math.exp(-mean + m * math.log(mean) - math.lgamma(m + 1.0))


@hjit
def _chan(d1, d2, s1, s2, hbr):
    """Chan's series: ``sum_m Poisson(m; v/2) P(Poisson(u/2) > m)``, m = 0 .. M."""
    a = 0.5 * hbr * hbr / (s1 * s2)
    b = 0.5 * ((d1 / s1) ** 2 + (d2 / s2) ** 2)
    terms = min(MAX_TERMS, int(b + 12.0 * math.sqrt(b)) + 24)
    # P(Poisson(a) > M): the tail summed where it is small, else 1 - the head
    if a > terms + 1.0:
        head = 0.0
        for k in range(terms + 1):
            head += _poisson(k, a)
        tail = 1.0 - head
    else:
        tail = 0.0
        k = terms + 1
        while True:
            term = _poisson(k, a)
            tail += term
            k += 1
            if term <= 1e-18 * tail or k > terms + 1 + MAX_TERMS:
                break
    total = 0.0
    for m in range(terms, -1, -1):  # downward: P(> m - 1) = P(> m) + P(= m), no cancelling
        total += _poisson(m, b) * tail
        tail += _poisson(m, a)
    return total


@hjit
def _max(d1, d2, s1, s2, hbr, rule):
    """``max_k`` of `_foster` with standard deviations ``k s1``, ``k s2``."""
    d = math.sqrt(d1 * d1 + d2 * d2)
    if d <= hbr:
        return 1.0
    centre = math.log(math.sqrt(0.5 * ((d1 / s1) ** 2 + (d2 / s2) ** 2)))
    lo = centre + math.log((d - hbr) / d) - 3.0
    hi = centre + 3.0
    ratio = 0.5 * (math.sqrt(5.0) - 1.0)
    x1 = hi - ratio * (hi - lo)
    x2 = lo + ratio * (hi - lo)
    f1 = _foster(d1, d2, s1 * math.exp(x1), s2 * math.exp(x1), hbr, rule)
    f2 = _foster(d1, d2, s1 * math.exp(x2), s2 * math.exp(x2), hbr, rule)
    for _ in range(MAX_ITERATIONS):
        if f1 < f2:
            lo = x1
            x1 = x2
            f1 = f2
            x2 = lo + ratio * (hi - lo)
            f2 = _foster(d1, d2, s1 * math.exp(x2), s2 * math.exp(x2), hbr, rule)
        else:
            hi = x2
            x2 = x1
            f2 = f1
            x1 = hi - ratio * (hi - lo)
            f1 = _foster(d1, d2, s1 * math.exp(x1), s2 * math.exp(x1), hbr, rule)
    return max(f1, f2)


@hjit
def _quadratic(c, ax, ay, az, bx, by, bz):
    """``a^T C b`` for the 3 x 3 ``C`` in ``c[0:9]`` (row-major)."""
    return (ax * (c[0] * bx + c[1] * by + c[2] * bz)
            + ay * (c[3] * bx + c[4] * by + c[5] * bz)
            + az * (c[6] * bx + c[7] * by + c[8] * bz))


@hjit
def _period(rx, ry, rz, vx, vy, vz, k):
    """Keplerian period (s); inf where the orbit is not closed."""
    energy = 0.5 * (vx * vx + vy * vy + vz * vz) - k / math.sqrt(rx * rx + ry * ry + rz * rz)
    if energy >= 0.0:
        return math.inf
    a = -0.5 * k / energy
    return 2.0 * math.pi * math.sqrt(a * a * a / k)


@hjit
def _approach(x, conf, rule, out):
    """One approach: ``x`` = r1, v1, r2, v2 (12), C1 and C2 position blocks (9 each,
    row-major), hbr; ``conf`` = method code, GM, the square's half-side over ``hbr`` (0:
    the disc; `HBR_SHAPES`). ``out`` = Pc, repaired (0/1), duration
    (s), duration / shorter period, |r2 - r1| (km), s1, s2 (km)."""
    rx = x[6] - x[0]
    ry = x[7] - x[1]
    rz = x[8] - x[2]
    vx = x[9] - x[3]
    vy = x[10] - x[4]
    vz = x[11] - x[5]
    hbr = x[30]
    c = (x[12] + x[21], x[13] + x[22], x[14] + x[23], x[15] + x[24], x[16] + x[25],
         x[17] + x[26], x[18] + x[27], x[19] + x[28], x[20] + x[29])
    speed = math.sqrt(vx * vx + vy * vy + vz * vz)
    zx = vx / speed
    zy = vy / speed
    zz = vz / speed
    along = rx * zx + ry * zy + rz * zz
    px = rx - along * zx
    py = ry - along * zy
    pz = rz - along * zz
    miss = math.sqrt(px * px + py * py + pz * pz)
    if miss > 0.0:
        ex = px / miss
        ey = py / miss
        ez = pz / miss
    else:  # any axis normal to v: z crossed with the coordinate axis it is least along
        if abs(zx) <= abs(zy) and abs(zx) <= abs(zz):
            ex, ey, ez = 0.0, zz, -zy
        elif abs(zy) <= abs(zz):
            ex, ey, ez = -zz, 0.0, zx
        else:
            ex, ey, ez = zy, -zx, 0.0
        norm = math.sqrt(ex * ex + ey * ey + ez * ez)
        ex /= norm
        ey /= norm
        ez /= norm
    fx = zy * ez - zz * ey
    fy = zz * ex - zx * ez
    fz = zx * ey - zy * ex
    a = _quadratic(c, ex, ey, ez, ex, ey, ez)
    b = 0.5 * (_quadratic(c, ex, ey, ez, fx, fy, fz) + _quadratic(c, fx, fy, fz, ex, ey, ez))
    d = _quadratic(c, fx, fy, fz, fx, fy, fz)
    # eigen-decomposition of [[a, b], [b, d]]; l1 >= l2
    mean = 0.5 * (a + d)
    radius = math.sqrt(0.25 * (a - d) * (a - d) + b * b)
    l1 = mean + radius
    # the small eigenvalue as det / l1: mean - radius cancels where l2 << l1
    l2 = (a * d - b * b) / l1 if l1 > 0.0 else mean - radius
    if a >= d:
        ux = l1 - d
        uy = b
    else:
        ux = b
        uy = l1 - a
    norm = math.sqrt(ux * ux + uy * uy)
    if norm > 0.0:
        ux /= norm
        uy /= norm
    else:
        ux = 1.0
        uy = 0.0
    floor = (CLIP * hbr) ** 2
    repaired = 0.0
    if l1 < floor:
        l1 = floor
        repaired = 1.0
    if l2 < floor:
        l2 = floor
        repaired = 1.0
    s1 = math.sqrt(l1)
    s2 = math.sqrt(l2)
    # the disc's centre at (|r|, 0), as CARA's Pc2D_Foster places it (|r| is the plane's
    # miss where r is normal to v, at the TCA), in the principal axes (u, u rotated +90 deg)
    distance = math.sqrt(rx * rx + ry * ry + rz * rz)
    d1 = distance * ux
    d2 = -distance * uy
    method = conf[0]
    if conf[2] > 0.0:  # a square of half-side conf[2] hbr
        pc = _square(d1, d2, s1, s2, ux, uy, conf[2] * hbr, rule)
    elif method == 0.0:
        pc = _foster(d1, d2, s1, s2, hbr, rule)
    elif method == 1.0:
        pc = _chan(d1, d2, s1, s2, hbr)
    else:
        pc = _max(d1, d2, s1, s2, hbr, rule)
    along_sigma = math.sqrt(max(0.0, _quadratic(c, zx, zy, zz, zx, zy, zz)))
    duration = 2.0 * (5.0 * along_sigma + hbr) / speed
    period = min(_period(x[0], x[1], x[2], x[3], x[4], x[5], conf[1]),
                 _period(x[6], x[7], x[8], x[9], x[10], x[11], conf[1]))
    out[0] = min(1.0, max(0.0, pc))
    out[1] = repaired
    out[2] = duration
    out[3] = duration / period
    out[4] = distance
    out[5] = s1
    out[6] = s2


_KERNEL = ObjectKernel(_approach, [Arg("x", np.float64, ("columns",)),
                                   Arg("conf", np.float64, ("three",), per_object=False),
                                   Arg("rule", np.float64, ("two", "nodes"), per_object=False),
                                   Arg("out", np.float64, ("seven",), output=True)])
_KERNEL.description = "the collision probability kernel"


class Probability:
    """What ``probability(..., full=True)`` returns: one entry per approach.

    ``pc``: the probabilities. ``method``: the method's name. ``repaired``: bool, the
    projected covariance was repaired by eigenvalue clipping (``"monte_carlo"``: ``C1 +
    C2`` had negative eigenvalues, clipped to 0). ``long_encounter``: bool, the
    short-encounter assumption is doubtful (`LONG_ENCOUNTER`). ``duration`` (s): the
    encounter's duration that flag is based on. ``miss`` (km): the distance ``|r2 - r1|``
    placed in the encounter plane. ``sigma`` ``(N, 2)`` (km): the standard deviations of
    the (repaired) projected covariance along its principal axes, larger first.

    ``"monte_carlo"`` adds ``hits`` ``(N,)`` (int), ``samples`` (per approach; ``pc`` is
    ``hits / samples``) and ``interval`` ``(N, 2)``: the Clopper-Pearson 95% interval of
    each probability (`monte_carlo.clopper_pearson`).
    """

    def __init__(self, **columns):
        self.__dict__.update(columns)

    def __len__(self):
        return len(self.pc)


def _vectors(value, name, unit):
    array = np.asarray(to_value(value, unit, name), dtype=np.float64)
    if array.ndim not in (1, 2) or array.shape[-1] != 3:
        raise ValueError(f"{name}: expected shape (3,) or (N, 3), got {array.shape}")
    if not np.all(np.isfinite(array)):
        row = int(np.flatnonzero(~np.isfinite(array.reshape(-1, 3)).all(axis=1))[0])
        raise ValueError(f"{name}: expected finite numbers, got NaN or inf in approach {row}")
    return array


def _covariance(value, name, whole):
    """The symmetric position block ``(..., 3, 3)`` of a covariance, or with ``whole`` the
    covariance as given (``(..., 3, 3)`` or ``(..., 6, 6)``)."""
    if is_quantity(value):
        if not value.unit.is_equivalent(u.km ** 2):
            raise ValueError(f"{name}: expected plain numbers (km^2, or km and km/s for 6 x 6) "
                             f"or a Quantity of length squared, got {value.unit}")
        array = checks.real_array(value.to_value(u.km ** 2), name)
    else:
        array = checks.real_array(value, name)
    if array.ndim not in (2, 3) or array.shape[-2:] not in ((3, 3), (6, 6)):
        raise ValueError(f"{name}: expected shape (3, 3), (6, 6), (N, 3, 3) or (N, 6, 6), "
                         f"got {array.shape}")
    block = array if whole else array[..., :3, :3]
    if not np.all(np.isfinite(block)):
        where = "" if whole else " in the position block"
        raise ValueError(f"{name}: expected finite numbers{where}, got NaN or inf")
    return 0.5 * (block + np.swapaxes(block, -1, -2))


def _named(rows, shown=10):
    listed = ", ".join(str(int(x)) for x in rows[:shown])
    return listed + (f" and {len(rows) - shown} more" if len(rows) > shown else "")


def probability(r1, v1, c1, r2, v2, c2, hbr, method="foster", *, full=False, k=K_EARTH,
                samples=None, seed=None, hbr_shape="circle"):
    """Probability of collision of each approach from both objects' states and covariances
    at its TCA (see the module's notes for the methods and flags).

    Parameters
    ----------
    r1, v1, r2, v2 : array_like or Quantity, (N, 3) or (3,)
        Positions (km) and velocities (km/s) of the two objects at the TCA, one inertial
        frame.
    c1, c2 : array_like or Quantity, (N, 3, 3), (N, 6, 6), (3, 3) or (6, 6)
        Their covariances in that frame (km^2; a 6 x 6 in km and km/s), one per approach or
        one shared. The 2D methods use the position blocks; ``"monte_carlo"`` also the
        velocity blocks of 6 x 6 ones. A Quantity of length squared is converted (as
        `hapsira_cowell.covariance` reads one).
    hbr : float, array_like or Quantity, (N,)
        The combined hard-body radius (km): the sum of the two objects' radii.
    method : str
        ``"foster"`` (default), ``"chan"``, ``"max"`` or ``"monte_carlo"`` (`METHODS`).
    full : bool
        Return a `Probability` (flags, encounter duration, plane miss and sigmas; for
        ``"monte_carlo"`` also the hits, samples and 95% interval) instead of the
        probabilities alone.
    k : float or Quantity
        GM of the attractor (km^3/s^2), for the orbital periods of the long-encounter
        flag (default the Earth's).
    samples : int
        ``"monte_carlo"`` only: samples per approach (default `monte_carlo.SAMPLES`,
        10^6).
    seed : None, int or numpy.random.Generator
        ``"monte_carlo"`` only: the random numbers' source (``numpy.random.default_rng``
        of it); None draws fresh entropy, so that two calls differ.
    hbr_shape : str
        The hard-body region in the encounter plane (`HBR_SHAPES`): ``"circle"``
        (default), the disc of radius ``hbr``; ``"square"``, the square of side
        ``2 hbr``; ``"square_equal_area"``, the square of the disc's area (side
        ``sqrt(pi) hbr``). A square is centred where the disc is, its sides along the miss
        and its normal in the plane, as in CARA's ``Pc2D_Foster`` (``HBRType``); squares
        with ``"foster"`` only.

    Returns
    -------
    ndarray (N,) or Probability
        A 0-d array where every state was given as ``(3,)``.
    """
    if method == "monte_carlo_epoch":
        raise ValueError("method: 'monte_carlo_epoch' samples the states at the epoch, which "
                         "probability() (states at the TCA) does not have; use "
                         "encounters(...).probability(hbr, method='monte_carlo_epoch') or "
                         "probability_epoch(k, r1, v1, P1, r2, v2, P2, hbr, window)")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    if hbr_shape not in HBR_SHAPES:
        raise ValueError(f"hbr_shape: expected one of {sorted(HBR_SHAPES)}, got "
                         f"{hbr_shape!r}")
    if hbr_shape != "circle" and method != "foster":
        raise ValueError(f"hbr_shape: {hbr_shape!r} is integrated by method='foster' only, "
                         f"got method={method!r}")
    sampled = method == "monte_carlo"
    if not sampled:
        for name, value in (("samples", samples), ("seed", seed)):
            if value is not None:
                raise ValueError(f"{name}: only used with method='monte_carlo', got "
                                 f"method={method!r}")
    else:
        samples = monte_carlo.SAMPLES if samples is None else samples
        if (isinstance(samples, bool) or not isinstance(samples, (int, np.integer))
                or samples < 1):
            raise ValueError(f"samples: expected a whole number of samples >= 1, got "
                             f"{samples!r}")
        try:
            rng = np.random.default_rng(seed)
        except (TypeError, ValueError) as error:
            raise ValueError(f"seed: expected None, an int or a numpy.random.Generator, got "
                             f"{seed!r} ({error})") from None
    vectors = [_vectors(value, name, unit) for value, name, unit in
               ((r1, "r1", u.km), (v1, "v1", u.km / u.s), (r2, "r2", u.km),
                (v2, "v2", u.km / u.s))]
    single = all(a.ndim == 1 for a in vectors)
    counts = {a.shape[0] for a in vectors if a.ndim == 2}
    if len(counts) > 1:
        shapes = ", ".join(f"{name} {a.shape}" for name, a in zip(("r1", "v1", "r2", "v2"),
                                                                   vectors))
        raise ValueError(f"r1, v1, r2, v2: expected one number of approaches, got {shapes}")
    n = counts.pop() if counts else 1
    vectors = [np.broadcast_to(a.reshape(-1, 3), (n, 3)) for a in vectors]
    covariances = []
    for value, name in ((c1, "c1"), (c2, "c2")):
        whole = _covariance(value, name, sampled)
        if whole.ndim == 3 and whole.shape[0] != n:
            raise ValueError(f"{name}: expected one covariance per approach ({n}), got "
                             f"{whole.shape[0]}")
        covariances.append(whole)
    blocks = [np.broadcast_to(c[..., :3, :3].reshape(-1, 9), (n, 9)) for c in covariances]
    radius = _radii(hbr, n)
    speed = np.linalg.norm(vectors[3] - vectors[1], axis=1)
    if np.any(speed == 0):
        raise ValueError(f"v1, v2: equal velocities in approach "
                         f"{_named(np.flatnonzero(speed == 0))}: no encounter plane")
    gm = float(to_value(k, u.km ** 3 / u.s ** 2, "k"))
    table = np.concatenate(vectors + blocks + [radius[:, None]], axis=1)
    out = np.empty((n, 7))
    if n:
        # Monte Carlo takes the flags and the plane's numbers from the kernel (foster's)
        _KERNEL(np.ascontiguousarray(table),
                np.array([METHODS[method], gm, HBR_SHAPES[hbr_shape]]), _RULE, out)
    extra = {}
    if sampled:
        c6 = [c.reshape(-1, *c.shape[-2:]) for c in covariances]
        total, repaired = monte_carlo.relative_covariance(c6[0], c6[1])
        total = np.broadcast_to(total, (n, 6, 6))
        repaired = np.broadcast_to(repaired, (n,)).copy()
        count = monte_carlo.hits(vectors[2] - vectors[0], vectors[3] - vectors[1], total,
                                 radius, int(samples), rng)
        lower, upper = monte_carlo.clopper_pearson(count, int(samples))
        out[:, 0] = count / samples
        extra = dict(hits=count, samples=int(samples), interval=np.stack([lower, upper], 1))
        subject, what = "covariance C1 + C2", "had negative eigenvalues, clipped to 0"
    else:
        repaired = out[:, 1] > 0
        subject, what = "projected covariance", ("was not positive definite and was repaired "
                                                 "by eigenvalue clipping (to (1e-4 hbr)^2, as "
                                                 "CARA does)")
    long_encounter = out[:, 3] > LONG_ENCOUNTER
    if repaired.any():
        warnings.warn(f"probability: the {subject} of approach(es) "
                      f"{_named(np.flatnonzero(repaired))} {what}", CovarianceRepairedWarning,
                      stacklevel=2)
    if long_encounter.any():
        model = "straight-line Monte Carlo" if sampled else "2D methods"
        warnings.warn(f"probability: approach(es) {_named(np.flatnonzero(long_encounter))} "
                      f"last longer than {LONG_ENCOUNTER:g} of an orbit; the short-encounter "
                      f"assumption of the {model} is doubtful there", LongEncounterWarning,
                      stacklevel=2)
    pc = np.asarray(out[0, 0]) if single else out[:, 0].copy()
    if not full:
        return np.asarray(pc)
    return Probability(pc=pc, method=method, repaired=repaired, long_encounter=long_encounter,
                       duration=out[:, 2], miss=out[:, 4], sigma=out[:, 5:7], **extra)


#: Clone pairs per approach of `probability_epoch` (default)
EPOCH_SAMPLES = 10_000


class WindowEdgeWarning(UserWarning):
    """`probability_epoch`: clone pairs whose closest approach within the window is at
    one of its ends and within the hard-body radius: the window may cut their encounter
    short (widen it)."""


def _period_of(r, v, k):
    """Keplerian periods of states ``(K, 3)`` (s; inf where unbound), as `_period`."""
    r, v = np.asarray(r, dtype=np.float64), np.asarray(v, dtype=np.float64)
    energy = 0.5 * np.einsum("ki,ki->k", v, v) - k / np.linalg.norm(r, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = -0.5 * k / energy
        return np.where(energy < 0, 2.0 * np.pi * np.sqrt(np.abs(a) ** 3 / k), np.inf)


def _radii(hbr, n):
    """The combined hard-body radii as ``(n,)`` km: positive and finite."""
    radius = np.asarray(to_value(hbr, u.km, "hbr"), dtype=np.float64)
    if radius.ndim > 1 or (radius.ndim == 1 and radius.shape[0] != n):
        raise ValueError(f"hbr: expected a number or shape ({n},), got {radius.shape}")
    if not np.all(np.isfinite(radius)) or np.any(radius <= 0):
        bad = radius.ravel()[~(np.isfinite(radius.ravel()) & (radius.ravel() > 0))][0]
        raise ValueError(f"hbr: expected positive hard-body radii (km), got {bad}")
    return np.broadcast_to(radius, (n,))


def _epoch_params(params, n):
    """``(rows1, rows2)``, each object's params rows ``(n, P)``: from None, one shared
    row ``(P,)`` or ``(2, n, P)``."""
    if params is None:
        zeros = np.zeros((n, 1))
        return zeros, zeros
    array = checks.real_array(params, "params")
    if array.ndim == 1:
        row = checks.params(array, 1)
        rows = np.ascontiguousarray(np.broadcast_to(row, (n, row.shape[1])))
        return rows, rows
    if array.ndim != 3 or array.shape[:2] != (2, n):
        raise ValueError(f"params: expected a row shared by all objects (P,) or the rows of "
                         f"objects 1 and 2 of each approach (2, {n}, P), got {array.shape}")
    if array.shape[2] == 0:
        array = np.zeros((2, n, 1))
    return np.ascontiguousarray(array[0]), np.ascontiguousarray(array[1])


def probability_epoch(k, r1, v1, P1, r2, v2, P2, hbr, window, *, samples=EPOCH_SAMPLES,
                      seed=None, f=None, params=None, rtol=1e-11, atol=1e-12, full=False):
    """Probability of collision by Monte Carlo from the epoch: clones of both objects
    drawn from their covariances at the epoch, each propagated with the force model, each
    clone pair's closest approach within the window. (CARA's SDMC, "Simple Dynamics Monte
    Carlo", draws its samples at the TCA and moves them on two-body orbits over the
    encounter; here they are drawn at the epoch and follow the force model ``f``.)

    For each approach, ``samples`` clones of object 1 and of object 2 are drawn
    (`hapsira_cowell.covariance.sample` of the ``2N`` epoch states, the objects 1 of all
    approaches first, then the objects 2, with ``seed``); clone ``s`` of object 1 meets
    clone ``s`` of object 2. All clones are propagated at once with `cowell` (one object
    each, ``f``) to both ends of their approach's window; each clone pair is then
    integrated over the window as one 12-component ODE whose distance minima are events,
    as the screen's narrow phase (`conjunctions.refine`) does. A pair's closest approach
    is the least of its minima inside the window and its distances at the window's ends;
    a hit is one below ``hbr``. No straight line, no constant covariance: this holds
    where the short-encounter assumption of the 2D methods does not (slow, long
    encounters, `LongEncounterWarning`), at the cost of propagating every clone.

    Parameters
    ----------
    k : float or Quantity
        GM of the attractor (km^3/s^2).
    r1, v1, r2, v2 : array_like or Quantity, (N, 3) or (3,)
        Both objects' states at the epoch (km, km/s), one inertial frame.
    P1, P2 : array_like or Quantity, (6, 6) or (N, 6, 6)
        Their covariances at the epoch, shared or one per approach (km and km/s, or a
        Quantity of length squared as for `hapsira_cowell.covariance.propagate`).
    hbr : float, array_like or Quantity, (N,)
        Combined hard-body radius (km).
    window : array_like or Quantity, (2,) or (N, 2)
        ``(start, end)`` of each approach's window, s after the epoch, ``0 <= start <
        end``: the span around the TCA the closest approach is sought in (a pair of
        nearly co-orbital objects passes close once or twice an orbit; one window is one
        encounter). The first `conjunctions.RECORDS` (4) minima of each pair's distance
        in it are examined, so keep it within about half an orbit (two minima at most,
        `Encounters.epoch_windows`).
    samples : int
        Clone pairs per approach, at least 2 (default `EPOCH_SAMPLES`).
    seed : None, int or numpy.random.Generator
        For ``numpy.random.default_rng``; None draws fresh entropy.
    f, params, rtol, atol :
        The force model and tolerances, as for `screen` (default `two_body_j2`);
        ``params`` a row shared by all objects ``(P,)`` or the rows of objects 1 and 2
        of each approach ``(2, N, P)``.
    full : bool
        Return a `Probability` with ``hits``, ``samples`` (clone pairs that reached the
        window's end, per approach), ``interval`` (the Clopper-Pearson 95% interval,
        `monte_carlo.clopper_pearson`), ``closest`` ``(N, samples)`` (km, each clone
        pair's closest approach in the window; NaN where a clone stopped) and
        ``window``.

    Returns
    -------
    ndarray (N,) or Probability
        A 0-d array where every state was given as ``(3,)``.
    """
    from .conjunctions import refine, two_body_j2
    from .covariance import covariances_in_km, sample
    from .forms import check_gm, check_states
    from .propagator import cowell

    gm = float(check_gm(k))
    pairs = []
    for names, (r, v) in ((("r1", "v1"), (r1, v1)), (("r2", "v2"), (r2, v2))):
        try:
            pairs.append(check_states(r, v))
        except ValueError as error:  # name the arguments as given here
            message = str(error).replace("r0", names[0]).replace("v0", names[1])
            raise ValueError(message) from None
    single = pairs[0][2] and pairs[1][2]
    counts = {pairs[0][0].shape[0], pairs[1][0].shape[0]}
    if len(counts - {1}) > 1:
        raise ValueError(f"r1, r2: expected one number of approaches, got "
                         f"{pairs[0][0].shape[0]} and {pairs[1][0].shape[0]}")
    n = max(counts)
    states = [np.broadcast_to(a, (n, 3)) for a in (pairs[0][0], pairs[0][1], pairs[1][0],
                                                     pairs[1][1])]
    for name, a in zip(("r1", "v1", "r2", "v2"), states):
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name}: expected finite numbers, got NaN or inf")
    c1 = covariances_in_km(P1, n, "P1")
    c2 = covariances_in_km(P2, n, "P2")
    radius = _radii(hbr, n)
    span = np.asarray(to_value(window, u.s, "window"), dtype=np.float64)
    if span.shape not in ((2,), (n, 2)):
        raise ValueError(f"window: expected (start, end) in s after the epoch, shape (2,) or "
                         f"({n}, 2), got {span.shape}")
    span = np.broadcast_to(span, (n, 2))
    bad = ~(np.isfinite(span).all(axis=1) & (span[:, 0] >= 0) & (span[:, 0] < span[:, 1]))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(f"window: expected finite 0 <= start < end (s after the epoch), got "
                         f"{tuple(span[row])} for approach {row}")
    samples = checks.integer(samples, "samples", 2)
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError) as error:
        raise ValueError(f"seed: expected None, an int or a numpy.random.Generator, got "
                         f"{seed!r} ({error})") from None
    rows1, rows2 = _epoch_params(params, n)
    f = two_body_j2 if f is None else f
    if n == 0:  # no approach: nothing to draw
        empty = np.empty(0)
        if not full:
            return empty
        return Probability(pc=empty, method="monte_carlo_epoch", hits=np.zeros(0, np.int64),
                           samples=np.zeros(0, np.int64), interval=np.empty((0, 2)),
                           closest=np.empty((0, samples)), window=np.empty((0, 2)))

    # clones: objects 1 of every approach, then objects 2, ``samples`` rows each
    r, v = sample(np.concatenate([states[0], states[2]]), np.concatenate([states[1], states[3]]),
                  np.concatenate([c1, c2]), samples, seed=rng)
    m = n * samples                             # clone pairs
    start = np.repeat(span[:, 0], samples)
    end = np.repeat(span[:, 1], samples)
    tofs = np.tile(np.stack([start, end], axis=1), (2, 1))
    rows = np.concatenate([np.repeat(rows1, samples, axis=0), np.repeat(rows2, samples, axis=0)])
    res = cowell(gm, r, v, tofs, rtol, atol, f=f, params=rows)
    rr, vv = np.asarray(res.rr), np.asarray(res.vv)
    ok = (np.asarray(res.status)[:m] == 0) & (np.asarray(res.status)[m:] == 0)
    ends = np.linalg.norm(rr[m:] - rr[:m], axis=2)           # (m, 2): at start and end
    closest = ends.min(axis=1)
    edge = np.ones(m, dtype=bool)                             # the least is at an end
    go = np.flatnonzero(ok)
    if go.size:
        i, j, tca, miss, _ = refine(gm, f, rows, rr[go, 0], vv[go, 0], rr[m + go, 0],
                                    vv[m + go, 0], go, m + go, start[go], end[go], np.inf,
                                    rtol, atol, t_end=np.inf, t_start=-np.inf)
        inside = (tca > start[i]) & (tca < end[i])
        i, miss = i[inside], miss[inside]
        least = np.full(m, np.inf)
        np.minimum.at(least, i, miss)
        edge = closest <= least
        closest = np.minimum(closest, least)
    closest[~ok] = np.nan
    hit = (closest < np.repeat(radius, samples)).reshape(n, samples)
    count = hit.sum(axis=1)
    done = ok.reshape(n, samples).sum(axis=1)
    at_edge = (hit.ravel() & edge).reshape(n, samples).any(axis=1)
    if (done < samples).any():
        status = np.asarray(res.status)
        warnings.warn(f"probability_epoch: clones of approach(es) "
                      f"{_named(np.flatnonzero(done < samples))} stopped before the window's "
                      f"end (status {sorted(set(status[status != 0].tolist()))}); their "
                      f"probability counts the pairs that reached it", RuntimeWarning,
                      stacklevel=2)
    if at_edge.any():
        warnings.warn(f"probability_epoch: approach(es) {_named(np.flatnonzero(at_edge))} have "
                      f"hits at an end of their window, whose encounter it may cut short; "
                      f"widen the window", WindowEdgeWarning, stacklevel=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        pc = np.where(done > 0, count / np.maximum(done, 1), np.nan)
    if not full:
        return np.asarray(pc[0]) if single else pc
    lower, upper = monte_carlo.clopper_pearson(count, np.maximum(done, 1))
    interval = np.stack([lower, upper], axis=1)
    interval[done == 0] = np.nan
    return Probability(pc=np.asarray(pc[0]) if single else pc, method="monte_carlo_epoch",
                       hits=count, samples=done, interval=interval,
                       closest=closest.reshape(n, samples), window=np.array(span))
