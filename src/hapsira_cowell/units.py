"""Conversion of user inputs (floats, arrays, astropy Quantities) to the internal units.

Internally everything is km, s, km/s, km^3/s^2, rad. Plain numbers are taken
to be in those units already.
"""

import numpy as np
from astropy import units as u
from astropy.time import TimeDelta

__all__ = ["UnitsWarning", "is_quantity", "to_value", "to_float"]


class UnitsWarning(UserWarning):
    """Plain numbers that look like another unit than hapsira_cowell's (km, km/s, s,
    km^3/s^2): a GM in m^3/s^2, positions in metres, velocities in m/s; and every
    object of a call failing, which such a mistake usually causes.

    Issued by `cowell` (numpy, JAX and Dask fronts alike) for plain numbers
    only: a Quantity carries its unit and is converted. Silence it with
    ``warnings.filterwarnings("ignore", category=UnitsWarning)`` where the
    values are meant.
    """


def is_quantity(value):
    return isinstance(value, (u.Quantity, TimeDelta))


def to_value(value, unit, name):
    """``value`` in ``unit`` as float64 (a scalar or an array).

    Quantities are converted; anything else is taken to be in ``unit``
    already. An incompatible unit raises ``ValueError`` naming ``name``.
    """
    if isinstance(value, TimeDelta):
        value = value.to(u.s)
    if isinstance(value, u.Quantity):
        try:
            value = value.to_value(unit, equivalencies=u.dimensionless_angles())
        except u.UnitConversionError as error:
            raise ValueError(f"{name}: expected a quantity in {unit} or a compatible unit, "
                             f"got {value.unit}") from error
    from hapsira_core.ivp.checks import real_array

    # complex, bool, text and masked input is refused, never silently converted
    return real_array(value, name)


def to_float(value, unit, name):
    """A scalar in ``unit`` as a Python float; see `to_value()`."""
    array = to_value(value, unit, name)
    if array.ndim != 0:
        raise ValueError(f"{name}: expected a scalar, got shape {array.shape}")
    result = float(array)
    if not np.isfinite(result):
        raise ValueError(f"{name}: expected a finite number, got {result}")
    return result
