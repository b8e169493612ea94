"""Rodas5P: a stiffly accurate Rosenbrock method of order 5(4), one entry of the
Rosenbrock family (`.rosenbrock`: the method, its step and its dense output).

G. Steinebach, "Construction of Rosenbrock-Wanner method Rodas5P and numerical
benchmarks within the Julia Differential Equations package", BIT Numerical
Mathematics 63:27 (2023). Coefficients as published with OrdinaryDiffEq.jl's
tableau (``Rodas5PTableau``), in Hairer & Wanner's transformed form (*Solving
ODEs II*, Sec. IV.7, eqs. 7.4'-7.5).

8 stages, 7 new evaluations of ``f`` per attempt and one LU: the reason for a
Rosenbrock method over Radau on a GPU (one thread per object, a fixed amount of work
per step); Rodas5P over Rodas4 for its order 5 at tight tolerances and Steinebach's
improved accuracy on the stiff test set, and because its dense output (Rodas' own
stiffly accurate interpolant, the ``H`` rows) is of order 4 rather than 3. ``k_8`` is
the embedded (order 4) error estimate. A Jacobian with an entry that is not finite
stops its object with status `..layout.JACOBIAN_NOT_FINITE`
(`..sensitivities.jacobian_guard`, as Radau and BDF).
"""

from .rosenbrock import Rosenbrock, RosenbrockTableau

GAMMA = 0.21193756319429014

#: ``a_ij`` of stages 2-6 (stage 6 at ``t + h``); stages 7 and 8 take stage 6's argument
#: plus ``k_6`` (plus ``k_7``): `TABLEAU` writes the full rows.
A = (
    (3.0,),
    (2.849394379747939, 0.45842242204463923),
    (-6.954028509809101, 2.489845061869568, -10.358996098473584),
    (2.8029986275628964, 0.5072464736228206, -0.3988312541770524, -0.04721187230404641),
    (-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
     0.030198172008377946),
)

C = (
    (-14.155112264123755,),
    (-17.97296035885952, -2.859693295451294),
    (147.12150275711716, -1.41221402718213, 71.68940251302358),
    (165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306),
    (24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125,
     -0.6610691825249471),
    (30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783,
     -19.097331116725623, -28.087943162872662),
    (37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047,
     -40.06618937091002, -54.66780262877968, -9.48861652309627),
)

#: stage times; stages 6-8 at the step's end
STAGE_C = (0.0, 0.6358126895828704, 0.4095798393397535, 0.9769306725060716,
           0.4288403609558664, 1.0, 1.0, 1.0)
#: ``d_i = gamma_i``, the coefficients of ``h df/dt`` (0 for stages 6-8)
STAGE_D = (0.21193756319429014, -0.42387512638858027, -0.3384627126235924,
           1.8046452872882734, 2.325825639765069, 0.0, 0.0, 0.0)

#: The interpolant's rows: ``q_r = sum_j H[r][j] k_j``.
H = (
    (25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204,
     0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493),
    (-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796,
     20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372),
    (11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643,
     -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722),
)

TABLEAU = RosenbrockTableau(
    name="Rodas5P", gamma=GAMMA,
    # stages 7 and 8 take stage 6's argument plus k_6 (plus k_7); the solution is stage
    # 8's argument plus k_8
    a=((),) + A + (A[-1] + (1.0,), A[-1] + (1.0, 1.0)),
    C=((),) + C, c=STAGE_C, d=STAGE_D, H=H, order=5, error_estimator_order=4)

METHOD = Rosenbrock(TABLEAU)
