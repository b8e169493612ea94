"""Force models chosen by name (``"j2,drag"``): the right-hand sides the command line offers.

`build_rhs` turns a set of names into one `hjit` right-hand side (two-body
plus the named terms of `hapsira_cowell.models.perturbations`), compiled once per
set. Nothing of the solver is imported at module level: the names can be
read and checked before the compilation target is chosen.
"""

from ..constants import R_EARTH
from .inputs import UsageError

__all__ = ["PERTURBATIONS", "RHO0", "H_RHO0", "H0", "parse_perturbations", "build_rhs"]

#: Perturbations selectable by name (two-body is always on).
PERTURBATIONS = {
    "j2": "Earth's oblateness, J2 = 1.08262668e-3, R = 6378.137 km",
    "j3": "Earth's third zonal harmonic, J3 = -2.5327e-6, R = 6378.137 km",
    "drag": "exponential atmosphere, 2.5e-10 kg/m^3 at 200 km altitude, scale height 40 km, "
            "at rest in the inertial frame; C_D and A/m per object",
}
#: Exponential atmosphere of ``drag``: density RHO0 (kg/km^3) at altitude H_RHO0 (km), scale
#: height H0 (km); the same model as the drag variant of the benchmarks.
RHO0 = 0.25  # kg/km^3 = 2.5e-10 kg/m^3
H_RHO0 = 200.0
H0 = 40.0


def parse_perturbations(text):
    """``"j2,drag"`` -> ``("j2", "drag")`` in a canonical order; ``"none"`` -> ``()``."""
    names = [part.strip().lower() for part in str(text).split(",") if part.strip()]
    if names in ([], ["none"]):
        return ()
    unknown = [n for n in names if n not in PERTURBATIONS]
    if unknown:
        raise UsageError(f"--perturbations: unknown perturbation {unknown[0]!r}; expected a "
                         f"comma-separated subset of {', '.join(PERTURBATIONS)} (or 'none')")
    return tuple(n for n in PERTURBATIONS if n in names)


_RHS = {}


def build_rhs(perturbations):
    """The `hjit` right-hand side for a set of perturbation names (one per set, cached).

    Two-body plus the selected terms; ``drag`` reads the object's params row
    as ``p[0]`` = C_D, ``p[1]`` = A/m in km^2/kg. Imports ``hapsira_core``:
    call it only after the target is set.
    """
    key = tuple(n for n in PERTURBATIONS if n in perturbations)
    if key in _RHS:
        return _RHS[key]
    from hapsira_core.jit import remember
    from hapsira_core.jit import hjit
    from ..models import perturbations as pert

    terms = {
        "j2": "J2_perturbation(t, rr, vv, k, J2, R)",
        "j3": "J3_perturbation(t, rr, vv, k, J3, R)",
        "drag": "atmospheric_drag_exponential(t, rr, vv, k, R_RHO0, p[0], p[1], H0, RHO0)",
    }
    name = "rhs_" + "_".join(("two_body",) + key)
    lines = [f"def {name}(t, rr, vv, k, p):",
             "    drr, dvv = two_body(t, rr, vv, k, p)",
             "    ax = dvv[0]", "    ay = dvv[1]", "    az = dvv[2]"]
    for term in key:
        lines += [f"    a = {terms[term]}", "    ax += a[0]", "    ay += a[1]", "    az += a[2]"]
    lines.append("    return drr, (ax, ay, az)")
    namespace = {
        "__name__": __name__,  # numba imports it to reload a cached kernel
        "two_body": pert.two_body, "J2": pert.J2_EARTH, "J3": pert.J3_EARTH, "R": R_EARTH,
        "R_RHO0": R_EARTH + H_RHO0, "H0": H0, "RHO0": RHO0,
    }
    for fn in ("J2_perturbation", "J3_perturbation", "atmospheric_drag_exponential"):
        if hasattr(pert, fn):
            namespace[fn] = getattr(pert, fn)
    exec(compile("\n".join(lines), f"<hapsira-cowell right-hand side "
                 f"{'+'.join(key) or 'two-body'}>", "exec"), namespace)
    _RHS[key] = hjit(namespace[name])
    # a kernel module rebuilds it as build_rhs(key): kernels using it are cached on disk
    return remember(_RHS[key], build_rhs, (key,))
