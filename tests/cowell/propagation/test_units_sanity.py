"""Plain numbers in the wrong unit warn (issue 25 item 4): a GM in m^3/s^2, positions in metres
(or AU), velocities in m/s; and a call whose every object failed says what to check.

Before the check, hapsira's ``Earth.k.value`` (3.986e14 m^3/s^2) as ``k`` gave every object
status -1 with no word on why, and r0, v0 in metres gave status 0 and no warning. Legitimate
inputs (low orbits to heliocentric ones, the Moon, a small asteroid, Quantities in any unit)
stay quiet. The JAX and Dask fronts give the same warnings: see test_fronts_agree.py.
"""

import time
import warnings

import numpy as np
import pytest
from astropy import units as u

from hapsira_cowell import UnitsWarning, cowell
from hapsira_cowell.constants import K_EARTH, K_MOON, K_SUN

R0 = np.array([[7000.0, 0.0, 0.0], [0.0, 8000.0, 100.0]])
V0 = np.array([[0.0, 7.5, 0.1], [-7.0, 0.0, 0.2]])
TOFS = np.array([600.0])  # above a year in days: no tofs warning (see the last tests)
AU = 1.495978707e8  # km


def units_warnings(*args, **kwargs):
    """The UnitsWarning messages of one cowell call, and its result."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = cowell(*args, **kwargs)
    return [str(w.message) for w in caught if issubclass(w.category, UnitsWarning)], res


def quiet(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnitsWarning)
        return cowell(*args, **kwargs)


def test_a_gm_in_m3_per_s2_warns_and_names_k():
    messages, res = units_warnings(K_EARTH * 1e9, R0, V0, TOFS)
    assert any(m.startswith("k: 3.986e+14 km^3/s^2 is above any solar-system body's GM")
               and "looks like m^3/s^2" in m and "expects km^3/s^2" in m for m in messages)


def test_the_warnings_point_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cowell(K_EARTH * 1e9, R0, V0, TOFS)
    assert [w.category for w in caught] == [UnitsWarning] * 2  # k, then all failed
    assert all(w.filename == __file__ for w in caught)


def test_velocities_in_m_per_s_warn_and_name_v0():
    messages, res = units_warnings(K_EARTH, R0 * 1e3, V0 * 1e3, TOFS)
    assert messages == [
        "v0: 2 of 2 object(s) faster than 1e+03 km/s (v0[0]: |v| = 7501 km/s), faster than "
        "any orbit in the solar system: it looks like m/s; hapsira_cowell expects km/s (or "
        "pass an astropy Quantity)"]
    assert np.all(res.status == 0)  # statuses as they were: the warning is the only change


def test_heliocentric_positions_in_metres_warn_and_name_r0():
    r0 = np.array([[AU, 0.0, 0.0], [0.0, 0.72 * AU, 0.0]]) * 1e3  # the Earth's, Venus's in m
    v0 = np.array([[0.0, 29.8, 0.0], [-35.0, 0.0, 0.0]])
    messages, _ = units_warnings(K_SUN, r0, v0, TOFS)
    assert len(messages) == 1 and messages[0].startswith(
        "r0: 2 of 2 object(s) farther than 6.93e+10 km from the attractor (r0[0]: |r| = "
        "1.496e+11 km), beyond any orbit about a body of GM 1.32712e+11 km^3/s^2: it looks "
        "like metres")


def test_positions_in_au_warn_as_too_near_the_centre():
    messages, _ = units_warnings(K_SUN, [1.0, 0.0, 0.0], [0.0, 29.8, 0.0], TOFS)
    assert any(m.startswith("r0: 1 of 1 object(s) nearer than 69.3 km to the attractor's centre")
               and "AU" in m for m in messages)


def test_only_the_implausible_objects_are_counted():
    r0 = np.vstack([R0, [[7e9, 0.0, 0.0]], [[np.nan, 0.0, 0.0]], [[0.0, 0.0, 0.0]]])
    v0 = np.vstack([V0] + [[[0.0, 7.5, 0.0]]] * 3)
    messages, res = units_warnings(K_EARTH, r0, v0, TOFS)
    # NaN and r = 0 are not counted: their status -3 says what is wrong
    assert len(messages) == 1 and messages[0].startswith("r0: 1 of 5 object(s) farther than "
                                                         "1e+09 km from the attractor (r0[2]")
    assert list(res.status[3:]) == [-3, -3]


@pytest.mark.parametrize("case", ["LEO", "GEO", "lunar distance", "Earth-Moon L2 region",
                                  "low lunar orbit", "heliocentric Neptune",
                                  "Voyager-like", "sun-grazer", "small asteroid"])
def test_legitimate_orbits_stay_quiet(case):
    k, r, v = {
        "LEO": (K_EARTH, [6578.0, 0.0, 0.0], [0.0, 7.78, 0.0]),
        "GEO": (K_EARTH, [42164.0, 0.0, 0.0], [0.0, 3.07, 0.0]),
        "lunar distance": (K_EARTH, [384400.0, 0.0, 0.0], [0.0, 1.02, 0.0]),
        "Earth-Moon L2 region": (K_EARTH, [1.5e6, 0.0, 0.0], [0.0, 0.3, 0.0]),
        "low lunar orbit": (K_MOON, [1837.4, 0.0, 0.0], [0.0, 1.63, 0.0]),
        "heliocentric Neptune": (K_SUN, [30.07 * AU, 0.0, 0.0], [0.0, 5.43, 0.0]),
        "Voyager-like": (K_SUN, [165 * AU, 0.0, 0.0], [17.0, 0.0, 0.0]),
        "sun-grazer": (K_SUN, [7.0e5 + 5e4, 0.0, 0.0], [0.0, 590.0, 0.0]),
        "small asteroid": (4.9e-9, [0.5, 0.0, 0.0], [0.0, 1e-4, 0.0]),  # Bennu's GM
    }[case]
    quiet(k, r, v, TOFS)


def test_quantities_are_converted_never_warned_about():
    res = quiet(K_EARTH * 1e9 * u.m ** 3 / u.s ** 2, R0 * 1e3 * u.m, V0 * 1e3 * u.m / u.s, TOFS)
    # (m -> km rounds the inputs' last bits: 3e-14 after 600 s)
    np.testing.assert_allclose(res.rr.to_value(u.km), quiet(K_EARTH, R0, V0, TOFS).rr,
                               rtol=1e-12)


def test_every_object_failing_says_which_inputs_to_check():
    # the Earth's GM in m^3/s^2 with km: every object ends with status -1
    messages, res = units_warnings(K_EARTH * 1e9, R0, V0, TOFS)
    assert list(res.status) == [-1, -1]
    assert messages[-1] == (
        "all 2 object(s) failed (2 with status -1; see STATUS_MESSAGES): if that is not "
        "expected, check the units of the plain numbers given: k in km^3/s^2 (not m^3/s^2: "
        "the Earth's is 398600.4418), r0 in km, v0 in km/s, tofs in s")


def test_one_object_that_survives_or_bad_initial_states_give_no_hint():
    fall = np.array([[7000.0, 0.0, 0.0], [0.0, 7000.0, 0.0]]), np.zeros((2, 3))
    tofs = [2000.0]  # a radial fall from 7000 km reaches the centre after ~1030 s
    messages, res = units_warnings(K_EARTH, *fall, tofs)
    assert list(res.status) == [-1, -1] and messages[0].startswith("all 2 object(s) failed")
    # one that reaches the end: no hint
    messages, res = units_warnings(K_EARTH, np.vstack([fall[0], R0[:1]]),
                                   np.vstack([fall[1], V0[:1]]), tofs)
    assert list(res.status) == [-1, -1, 0] and messages == []
    # NaN states: status -3 explains itself
    messages, res = units_warnings(K_EARTH, np.full((2, 3), np.nan), V0, TOFS)
    assert list(res.status) == [-3, -3] and messages == []


def test_earth_positions_in_metres_with_velocities_in_km_per_s_warn():
    # a LEO state with r0 in metres: 7e6 "km" at 7.5 km/s (22 times escape there)
    messages, res = units_warnings(K_EARTH, R0 * 1e3, V0, TOFS)
    assert (res.status == 0).all()          # it integrates: only the warning tells
    assert any("r0" in m and "metres" in m and "escape" in m for m in messages), messages
    # a real hyperbolic departure at lunar distance, and a state beyond the Hill sphere at
    # a few times escape, stay quiet
    quiet(K_EARTH, np.array([[384400.0, 0.0, 0.0]]), np.array([[0.0, 3.0, 0.0]]), TOFS)
    quiet(K_EARTH, np.array([[4e6, 0.0, 0.0]]), np.array([[0.0, 1.5, 0.0]]), TOFS)


@pytest.mark.parametrize("tofs, unit", [([1.0, 2.0, 7.0], "days"), ([6.0, 12.0, 24.0], "hours"),
                                         ([30.0], "minutes"), ([-3.0], "days, backward")])
def test_times_of_flight_meant_as_days_warn_and_name_tofs(tofs, unit):
    """Before the check a "7 days" LEO run ended after 7 s with status 0 and no word."""
    messages, res = units_warnings(K_EARTH, R0, V0, tofs)
    assert (res.status == 0).all()  # the run is as it was: the warning is the only change
    longest = max(abs(t) for t in tofs)
    energy = 0.5 * np.sum(V0 ** 2, axis=1) - K_EARTH / np.linalg.norm(R0, axis=1)
    period = min(2 * np.pi * np.sqrt((-K_EARTH / (2 * energy)) ** 3 / K_EARTH))  # vis-viva
    assert len(messages) == 1 and messages[0].startswith(
        f"tofs: the longest time of flight is {longest:.6g} s, ")
    assert "it looks like days, hours or minutes" in messages[0]
    shortest = float(messages[0].split("shortest orbital period (")[1].split(" s)")[0])
    assert shortest == pytest.approx(period, rel=1e-5)


@pytest.mark.parametrize("k, r, v, tofs", [
    (K_EARTH, [6578.0, 0.0, 0.0], [0.0, 7.78, 0.0], [60.0]),          # 1.1% of a LEO period
    (K_EARTH, [6578.0, 0.0, 0.0], [0.0, 7.78, 0.0], [400.0]),         # above a year in days
    (K_SUN, [30.07 * AU, 0.0, 0.0], [0.0, 5.43, 0.0], [86400.0]),     # a day of Neptune
    (K_EARTH, [6578.0, 0.0, 0.0], [0.0, 20.0, 0.0], [10.0]),          # hyperbolic: no period
])
def test_short_arcs_that_are_not_days_stay_quiet(k, r, v, tofs):
    quiet(k, r, v, tofs)


def test_tofs_as_quantities_are_never_warned_about():
    res = quiet(K_EARTH, R0, V0, [1.0, 7.0] * u.s)
    assert (res.status == 0).all()


def check_messages(*args, **kwargs):
    from hapsira_cowell.propagation import forms
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        forms.check_units(*args, **kwargs)
    return [str(w.message) for w in caught if issubclass(w.category, UnitsWarning)]


def many_leo_states(rng, n):
    """``n`` LEO-like states (km, km/s), each row a different orbit."""
    direction = rng.normal(size=(n, 3))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    r = direction * rng.uniform(6600.0, 8000.0, size=(n, 1))
    v = np.cross(direction, rng.normal(size=(n, 3)))
    v *= rng.uniform(6.5, 8.0, size=(n, 1)) / np.linalg.norm(v, axis=1, keepdims=True)
    return r, v


@pytest.mark.parametrize("bad", ["metres", "au", "m_per_s", "earth_metres", "none"])
def test_many_objects_warn_as_few_do(bad, monkeypatch):
    """From `EXTREMES_MIN_OBJECTS` objects on one compiled pass decides that nothing can
    fire; the warnings, when one can, are those of the full passes, word for word."""
    from hapsira_cowell.propagation import forms
    rng = np.random.default_rng(29)
    n = forms.EXTREMES_MIN_OBJECTS + 7
    r, v = many_leo_states(rng, n)
    r[5], v[5] = np.nan, np.nan  # not finite: a failing object, no unit mistake
    r[9, 0] = np.inf
    i = int(rng.integers(10, n))
    if bad == "metres":
        r[i] *= 1e3 * 1e6  # heliocentric-sized in metres about the Earth
    elif bad == "au":
        r[i] /= 1e6
    elif bad == "m_per_s":
        v[i] *= 1e3
    elif bad == "earth_metres":
        r[i] *= 1e3
    assert forms._all_plausible(K_EARTH, r, v, TOFS) == (bad == "none")
    fast = check_messages(K_EARTH, r, v, tofs=TOFS)
    monkeypatch.setattr(forms, "EXTREMES_MIN_OBJECTS", 10 * n)
    assert not forms._all_plausible(K_EARTH, r, v, TOFS)
    assert fast == check_messages(K_EARTH, r, v, tofs=TOFS)
    assert (fast == []) == (bad == "none")
    if bad != "none":
        assert f"[{i}]" in fast[0]


def test_the_compiled_pass_gives_numpys_extremes():
    from hapsira_cowell.propagation import forms
    rng = np.random.default_rng(7)
    r, v = many_leo_states(rng, 5000)
    r[3] = [0.0, 0.0, 0.0]  # a zero radius counts in no minimum
    r[4, 1] = np.nan
    v[8, 2] = -np.inf
    r2, v2 = np.sum(r * r, axis=1), np.sum(v * v, axis=1)
    finite_r2, finite_v2 = r2[np.isfinite(r2)], v2[np.isfinite(v2)]
    got = forms._extremes(r, v)
    assert got[0] == pytest.approx(finite_r2.max(), rel=1e-15)
    assert got[1] == pytest.approx(finite_r2[finite_r2 > 0].min(), rel=1e-15)
    assert got[2] == pytest.approx(finite_v2.max(), rel=1e-15)


def test_short_tofs_take_the_full_passes():
    """A plain-number ``tofs`` under a year (``_tofs_too_short`` needs every period):
    no shortcut, the warning as before."""
    from hapsira_cowell.propagation import forms
    r, v = many_leo_states(np.random.default_rng(3), forms.EXTREMES_MIN_OBJECTS)
    assert not forms._all_plausible(K_EARTH, r, v, np.array([7.0]))
    messages = check_messages(K_EARTH, r, v, tofs=np.array([7.0]))
    assert len(messages) == 1 and messages[0].startswith("tofs: the longest time of flight")


@pytest.mark.parametrize("bad", ["metres", "m_per_s", "none"])
def test_a_check_beside_the_propagation_warns_as_the_check_before_it(bad):
    """`UnitsCheck(background=True)` (the cuda target's calls) decides in a helper thread
    and warns in `finish`, from the caller's line: the same messages, once."""
    from hapsira_cowell.propagation import forms
    r, v = many_leo_states(np.random.default_rng(11), forms.EXTREMES_MIN_OBJECTS + 3)
    i = 1000
    if bad == "metres":
        r[i] *= 1e9
    elif bad == "m_per_s":
        v[i] *= 1e3
    want = check_messages(K_EARTH, r, v, tofs=TOFS)
    check = forms.UnitsCheck(K_EARTH, r, v, tofs=TOFS, background=True)
    assert check.background
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check.finish(stacklevel=3)
        check.finish(stacklevel=3)  # once
    assert [str(w.message) for w in caught] == want
    assert all(w.filename == __file__ for w in caught)
    assert (want == []) == (bad == "none")
    assert not forms.UnitsCheck(K_EARTH, r, v, tofs=TOFS).background  # the host targets'


@pytest.mark.parametrize("fails", [False, True])
def test_cowell_on_a_waiting_target_warns_after_the_run_and_when_it_raises(fails, monkeypatch):
    """Where the target's calls wait on a device (``HOST_WAITS``), `cowell` checks its
    states beside the kernels: the warnings still point at the caller's line, and come
    also when the propagation raises."""
    from hapsira_core import targets
    from hapsira_cowell.propagation import forms, propagator
    monkeypatch.setattr(targets.active, "HOST_WAITS", True, raising=False)
    monkeypatch.setattr(forms, "EXTREMES_MIN_OBJECTS", 2)  # R0's two objects are many
    if fails:
        def broken(*args, **kwargs):
            raise RuntimeError("the propagation broke")
        monkeypatch.setattr(propagator, "orbit_call", broken)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if fails:
            with pytest.raises(RuntimeError, match="the propagation broke"):
                cowell(K_EARTH, R0 * 1e3, V0, TOFS)
        else:
            cowell(K_EARTH, R0 * 1e3, V0, TOFS)
    units = [w for w in caught if issubclass(w.category, UnitsWarning)]
    assert units and str(units[0].message).startswith("r0: 2 of 2 object(s)")
    assert all(w.filename == __file__ for w in units)


def test_a_check_beside_the_propagation_waits_for_its_signal():
    """`UnitsCheck(after=signal)` begins its pass only when ``signal`` calls back (the
    cuda target's first kernel queued: `kernels_started`); `finish` begins it where
    nothing did (a call that raised before its first kernel) and warns as ever."""
    from hapsira_cowell.propagation import forms
    r, v = many_leo_states(np.random.default_rng(5), forms.EXTREMES_MIN_OBJECTS)
    r[7] *= 1e9  # metres

    class Signal:
        def __init__(self):
            self.callbacks = []

        def then(self, callback):
            self.callbacks.append(callback)

    signal = Signal()
    check = forms.UnitsCheck(K_EARTH, r, v, tofs=TOFS, background=True, after=signal)
    time.sleep(0.1)
    assert check._plausible is None and not check._thread.is_alive()  # not begun
    assert len(signal.callbacks) == 1
    signal.callbacks[0]()
    signal.callbacks[0]()  # (once)
    check._thread.join(timeout=30)
    assert check._plausible is False  # decided: a full pass will name the object
    never = forms.UnitsCheck(K_EARTH, r, v, tofs=TOFS, background=True, after=Signal())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        never.finish(stacklevel=3)
    assert [str(w.message) for w in caught] == check_messages(K_EARTH, r, v, tofs=TOFS)
    assert len(caught) == 1 and caught[0].filename == __file__
