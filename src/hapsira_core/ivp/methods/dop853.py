"""DOP853: Dormand & Prince's 8(5,3) pair, as ``scipy.integrate.DOP853``.

Coefficients as published by Hairer, Norsett & Wanner, *Solving Ordinary
Differential Equations I*, 2nd ed., Sec. II.10 (code DOP853), in scipy's
arrangement: stages 0..11 make the step, row 12 is the step's end (its
weights are ``b``), rows 13..15 are the extra stages of the dense output.
The error estimate combines a 5th and a 3rd order estimate (``E5``, ``E3``)
as Hairer's code does; the dense output is the 7th order interpolant of
Sec. II.6 (4 coefficient states ``D`` on top of 3 from the step's ends).
"""

import math

from ...jit import hjit
from ..butcher import ButcherTableau, weights
from ..stages import compile_stages
from ..state import returns_a_view, rhs
from .base import ExplicitMethod

N_STAGES = 12

_C = (0.0, 0.05260015195876773, 0.0789002279381516, 0.1183503419072274, 0.2816496580927726, 0.3333333333333333, 0.25, 0.3076923076923077, 0.6512820512820513, 0.6, 0.8571428571428571, 1.0, 1.0, 0.1, 0.2, 0.7777777777777778)

_A = (
    (),
    (0.05260015195876773,),
    (0.0197250569845379, 0.0591751709536137),
    (0.02958758547680685, 0.0, 0.08876275643042054),
    (0.2413651341592667, 0.0, -0.8845494793282861, 0.924834003261792),
    (0.037037037037037035, 0.0, 0.0, 0.17082860872947386, 0.12546768756682242),
    (0.037109375, 0.0, 0.0, 0.17025221101954405, 0.06021653898045596, -0.017578125),
    (0.03709200011850479, 0.0, 0.0, 0.17038392571223998, 0.10726203044637328, -0.015319437748624402, 0.008273789163814023),
    (0.6241109587160757, 0.0, 0.0, -3.3608926294469414, -0.868219346841726, 27.59209969944671, 20.154067550477894, -43.48988418106996),
    (0.47766253643826434, 0.0, 0.0, -2.4881146199716677, -0.590290826836843, 21.230051448181193, 15.279233632882423, -33.28821096898486, -0.020331201708508627),
    (-0.9371424300859873, 0.0, 0.0, 5.186372428844064, 1.0914373489967295, -8.149787010746927, -18.52006565999696, 22.739487099350505, 2.4936055526796523, -3.0467644718982196),
    (2.273310147516538, 0.0, 0.0, -10.53449546673725, -2.0008720582248625, -17.9589318631188, 27.94888452941996, -2.8589982771350235, -8.87285693353063, 12.360567175794303, 0.6433927460157636),
    (0.054293734116568765, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003, -5.801203960010585, 0.3111643669578199, -0.1521609496625161, 0.20136540080403034, 0.04471061572777259),
    (0.056167502283047954, 0.0, 0.0, 0.0, 0.0, 0.0, 0.25350021021662483, -0.2462390374708025, -0.12419142326381637, 0.15329179827876568, 0.00820105229563469, 0.007567897660545699, -0.008298),
    (0.03183464816350214, 0.0, 0.0, 0.0, 0.0, 0.028300909672366776, 0.053541988307438566, -0.05492374857139099, 0.0, 0.0, -0.00010834732869724932, 0.0003825710908356584, -0.00034046500868740456, 0.1413124436746325),
    (-0.42889630158379194, 0.0, 0.0, 0.0, 0.0, -4.697621415361164, 7.683421196062599, 4.06898981839711, 0.3567271874552811, 0.0, 0.0, 0.0, -0.0013990241651590145, 2.9475147891527724, -9.15095847217987),
)

_B = (0.054293734116568765, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003, -5.801203960010585, 0.3111643669578199, -0.1521609496625161, 0.20136540080403034, 0.04471061572777259)

_E3 = (-0.18980075407240762, 0.0, 0.0, 0.0, 0.0, 4.450312892752409, 1.8915178993145003, -5.801203960010585, -0.4226823213237919, -0.1521609496625161, 0.20136540080403034, 0.02265179219836082, 0.0)

_E5 = (0.01312004499419488, 0.0, 0.0, 0.0, 0.0, -1.2251564463762044, -0.4957589496572502, 1.6643771824549864, -0.35032884874997366, 0.3341791187130175, 0.08192320648511571, -0.022355307863886294, 0.0)

#: Interpolant weights over the 16 derivatives (12 stages, the step end, 3 extra stages).
D = (
    (-8.428938276109013, 0.0, 0.0, 0.0, 0.0, 0.5667149535193777, -3.0689499459498917, 2.38466765651207, 2.117034582445028, -0.871391583777973, 2.2404374302607883, 0.6315787787694688, -0.08899033645133331, 18.148505520854727, -9.194632392478356, -4.436036387594894),
    (10.427508642579134, 0.0, 0.0, 0.0, 0.0, 242.28349177525817, 165.20045171727028, -374.5467547226902, -22.113666853125306, 7.733432668472264, -30.674084731089398, -9.332130526430229, 15.697238121770845, -31.139403219565178, -9.35292435884448, 35.81684148639408),
    (19.985053242002433, 0.0, 0.0, 0.0, 0.0, -387.0373087493518, -189.17813819516758, 527.8081592054236, -11.57390253995963, 6.8812326946963, -1.0006050966910838, 0.7777137798053443, -2.778205752353508, -60.19669523126412, 84.32040550667716, 11.99229113618279),
    (-25.69393346270375, 0.0, 0.0, 0.0, 0.0, -154.18974869023643, -231.5293791760455, 357.6391179106141, 93.40532418362432, -37.45832313645163, 104.0996495089623, 29.8402934266605, -43.53345659001114, 96.32455395918828, -39.17726167561544, -149.72683625798564),
)


TABLEAU = ButcherTableau(name="DOP853", c=_C, a=_A, b=_B, error={"e5": _E5, "e3": _E3},
                         order=8, error_estimator_order=7, n_stages=N_STAGES)
#: Published names, for readers of Hairer's code.
C, A, B, E3, E5 = _C, _A, _B, _E3, _E5
_EXTRA = (13, 14, 15)


def build(tableau, ops, keep, fun, rows):
    """The `.base.Functions` fields for n = ``ops.n`` (either state shape)."""
    n = ops.n
    n_err = ops.n_err  # the norm's components (all but an STM's)
    axpy, sub, scale, row = ops.axpy, ops.sub, ops.scale, ops.row
    error_scale, inverse, store_row = ops.error_scale, ops.inverse, ops.store_row
    weighted_sum_squares = ops.weighted_sum_squares
    f = rhs(fun, ops.shape)
    array_rows = rows if ops.is_array else None
    is_array = ops.is_array
    keep = keep or is_array
    W, Y_NEW, TMP = rows.weight, rows.y_new, rows.tmp
    C0 = rows.coeffs
    step_sums = compile_stages(
        "dop853_step_sums", tableau.stage_rows(range(1, N_STAGES)),
        {"b": weights(B), "e5": weights(E5), "e3": weights(E3)}, (0,), fun, n, store=keep,
        rows=array_rows, out_row=rows.sums)
    d_rows = {f"d{r}": weights(D[r]) for r in range(len(D))}
    if keep:  # the 13 derivatives of the step are in work: 3 evaluations
        interpolant_sums = compile_stages(
            "dop853_interpolant_sums", tableau.stage_rows(_EXTRA), d_rows,
            tuple(range(N_STAGES + 1)), fun, n, load=True, rows=array_rows,
            out_row=rows.sums + 3)

        @hjit
        def sums(t_old, y_old, f_old, f_new, h, p, work):
            return interpolant_sums(t_old, y_old, h, p, work)
    else:  # the stages are evaluated again: 14 evaluations
        interpolant_sums = compile_stages(
            "dop853_interpolant_sums", tableau.stage_rows(list(range(1, N_STAGES)) + list(_EXTRA)),
            d_rows, (0, N_STAGES), fun, n)

        @hjit
        def sums(t_old, y_old, f_old, f_new, h, p, work):
            return interpolant_sums(t_old, y_old, h, p, f_old, f_new)

    @hjit
    def error_norm(y, y_new, err5, err3, h, tol, start, work):
        """The combined 5th/3rd order estimate of Hairer's DOP853 (scipy's norm)."""
        w = inverse(error_scale(y, y_new, tol, start, row(work, W)), row(work, W))
        e5 = weighted_sum_squares(err5, w)
        e3 = weighted_sum_squares(err3, w)
        if e5 == 0.0 and e3 == 0.0:
            return 0.0
        if e5 == math.inf or e3 == math.inf:
            # The squares overflowed: a tiny error scale (the floor, where atol = 0 and
            # y = 0) and a tiny step, whose product is a fine norm. The same norm with
            # |h| moved into the weights (it is homogeneous of degree 1 in them);
            # taken only here, so that other steps keep scipy's rounding. Without it
            # rtol = atol = 0 with a component at 0 failed at step 0 (status -1),
            # where RK45 and RK23 integrate.
            w = scale(abs(h), w, row(work, W))
            e5 = weighted_sum_squares(err5, w)
            e3 = weighted_sum_squares(err3, w)
            return e5 / math.sqrt((e5 + 0.01 * e3) * n_err)
        return abs(h) * e5 / math.sqrt((e5 + 0.01 * e3) * n_err)

    if keep:
        @hjit
        def attempt(t, y, f0, h, p, tol, start, work):
            b, err5, err3 = step_sums(t, y, h, p, f0, work)
            y_new = axpy(h, b, y, row(work, Y_NEW))
            f_new = f(t + h, y_new, p, row(work, N_STAGES))
            if not is_array:  # the array shape's f_new is that row already
                store_row(work, N_STAGES, f_new)
            return y_new, f_new, error_norm(y, y_new, err5, err3, h, tol, start, work)
    else:
        @hjit
        def attempt(t, y, f0, h, p, tol, start, work):
            b, err5, err3 = step_sums(t, y, h, p, f0)
            y_new = axpy(h, b, y, row(work, Y_NEW))
            f_new = f(t + h, y_new, p, row(work, N_STAGES))
            return y_new, f_new, error_norm(y, y_new, err5, err3, h, tol, start, work)

    @hjit
    def coefficients(t_old, y_old, f_old, y_new, f_new, h, p, work):
        """The 7 coefficient states of the interpolant over the step ``h``."""
        d0, d1, d2, d3 = sums(t_old, y_old, f_old, f_new, h, p, work)
        dy = sub(y_new, y_old, row(work, C0))
        c1 = axpy(-1.0, dy, scale(h, f_old, row(work, C0 + 1)), row(work, C0 + 1))
        c2 = axpy(-h, axpy(1.0, f_old, f_new, row(work, C0 + 2)),
                  scale(2.0, dy, row(work, TMP)), row(work, C0 + 2))
        return (
            dy,
            c1,
            c2,
            scale(h, d0, row(work, C0 + 3)),
            scale(h, d1, row(work, C0 + 4)),
            scale(h, d2, row(work, C0 + 5)),
            scale(h, d3, row(work, C0 + 6)),
        )

    @hjit
    def placeholder(y):
        return (y, y, y, y, y, y, y)

    @hjit(**(returns_a_view() if is_array else {}))
    def end_value(y_old, y_new, dst):
        """`evaluate` at the step's end, without the coefficients: there x = h / h = 1
        exactly, every term of the nested form is multiplied by 1 - x = 0 but the
        first, ``dy = y_new - y_old``, and the value is ``dy + y_old``, the same bits
        wherever the coefficients are finite (scipy's ``Dop853DenseOutput`` has this
        form too). The loop takes it for an output time at a step's end, where the
        coefficients cost 3 evaluations of ``f``, or 14 where the stages are not kept
        (the GPU: a warp then built one for each of its lanes as it ended, which
        slowed the kernel; docs/gpu.md). Only where
        ``f`` is not finite at one of the 3 extra stages, with all 13 of the step
        finite, would scipy's interpolant give NaN there and this the step's end."""
        return axpy(1.0, y_old, sub(y_new, y_old, dst), dst)

    @hjit(**(returns_a_view() if is_array else {}))
    def evaluate(coeffs, t_old, h, y_old, t, dst):
        """State at ``t`` from the interpolant (scipy's ``Dop853DenseOutput``)."""
        x = (t - t_old) / h
        y = scale(x, coeffs[6], dst)
        y = scale(1.0 - x, axpy(1.0, coeffs[5], y, dst), dst)
        y = scale(x, axpy(1.0, coeffs[4], y, dst), dst)
        y = scale(1.0 - x, axpy(1.0, coeffs[3], y, dst), dst)
        y = scale(x, axpy(1.0, coeffs[2], y, dst), dst)
        y = scale(1.0 - x, axpy(1.0, coeffs[1], y, dst), dst)
        y = scale(x, axpy(1.0, coeffs[0], y, dst), dst)
        return axpy(1.0, y_old, y, dst)

    return {"attempt": attempt, "coefficients": coefficients, "placeholder": placeholder,
            "evaluate": evaluate, "step_nfev": N_STAGES,
            # scipy's count: its 3 extra stages (without ``keep`` the step's own stages
            # are evaluated again too, counted once, with the step: `base`)
            "dense_nfev": len(_EXTRA),
            "end_value": end_value, "end_value_nfev": len(_EXTRA)}


#: Work rows: the 12 stages, the step's end and the 3 extra stages of the dense output;
#: sums: b, e5, e3 and the interpolant's d0..d3; 7 coefficient states.
METHOD = ExplicitMethod(TABLEAU, build, stage_rows=N_STAGES + 1 + len(_EXTRA), sums=7,
                        coeffs=7)
