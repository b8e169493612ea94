"""Small dense LU decompositions per object, for the implicit methods' Newton iterations.

Gaussian elimination with partial pivoting (Golub & Van Loan, *Matrix
Computations*, 4th ed., Alg. 3.4.1), the pivot chosen as LAPACK's ``getrf``
chooses it: the largest magnitude in the column, the first of equals (for
complex entries ``|re| + |im|``, LAPACK's ``cabs1``). Written once as ``hjit``
code for every target; a matrix is the first ``n`` rows of a 2-D array (the
rows of an object's ``work``), a permutation a row of floats (``work`` holds
floats only), so nothing is allocated.

``lu_factor(a, piv, n) -> ok``: ``a`` is overwritten by its factors (L below the
diagonal, unit diagonal implied; U on and above it), ``piv[k]`` the row swapped
with row ``k`` at step ``k``; ``ok`` is False for an exactly singular matrix
(a zero pivot), for which the implicit methods report a failed step.
``lu_solve(a, piv, b, n)`` overwrites ``b`` with the solution of ``A x = b``.
The ``_complex`` pair does the same for ``A = ar + i ai``, the parts in two arrays
(``br``, ``bi`` likewise).
"""

from ..jit import hjit


@hjit
def lu_factor(a, piv, n):
    ok = True
    for k in range(n):
        p = k
        biggest = abs(a[k, k])
        for i in range(k + 1, n):
            size = abs(a[i, k])
            if size > biggest:
                biggest = size
                p = i
        piv[k] = p
        if p != k:
            for j in range(n):
                a[k, j], a[p, j] = a[p, j], a[k, j]
        pivot = a[k, k]
        if pivot == 0.0:
            ok = False  # LAPACK goes on with the other columns: so do we
            continue
        inverse = 1.0 / pivot
        for i in range(k + 1, n):
            a[i, k] *= inverse
        for i in range(k + 1, n):
            l_ik = a[i, k]
            if l_ik != 0.0:
                for j in range(k + 1, n):
                    a[i, j] -= l_ik * a[k, j]
    return ok


@hjit
def lu_solve(a, piv, b, n):
    for k in range(n):
        p = int(piv[k])
        if p != k:
            b[k], b[p] = b[p], b[k]
    for i in range(1, n):  # L y = P b (unit diagonal)
        s = b[i]
        for j in range(i):
            s -= a[i, j] * b[j]
        b[i] = s
    for i in range(n - 1, -1, -1):  # U x = y
        s = b[i]
        for j in range(i + 1, n):
            s -= a[i, j] * b[j]
        b[i] = s / a[i, i]


@hjit
def lu_factor_complex(ar, ai, piv, n):
    ok = True
    for k in range(n):
        p = k
        biggest = abs(ar[k, k]) + abs(ai[k, k])
        for i in range(k + 1, n):
            size = abs(ar[i, k]) + abs(ai[i, k])
            if size > biggest:
                biggest = size
                p = i
        piv[k] = p
        if p != k:
            for j in range(n):
                ar[k, j], ar[p, j] = ar[p, j], ar[k, j]
                ai[k, j], ai[p, j] = ai[p, j], ai[k, j]
        pr = ar[k, k]
        pi = ai[k, k]
        if pr == 0.0 and pi == 0.0:
            ok = False
            continue
        # 1 / (pr + i pi), scaled against overflow as Smith's division does
        if abs(pr) >= abs(pi):
            ratio = pi / pr
            denominator = pr + pi * ratio
            inv_r = 1.0 / denominator
            inv_i = -ratio / denominator
        else:
            ratio = pr / pi
            denominator = pr * ratio + pi
            inv_r = ratio / denominator
            inv_i = -1.0 / denominator
        for i in range(k + 1, n):
            xr = ar[i, k]
            xi = ai[i, k]
            ar[i, k] = xr * inv_r - xi * inv_i
            ai[i, k] = xr * inv_i + xi * inv_r
        for i in range(k + 1, n):
            lr = ar[i, k]
            li = ai[i, k]
            if lr != 0.0 or li != 0.0:
                for j in range(k + 1, n):
                    ur = ar[k, j]
                    ui = ai[k, j]
                    ar[i, j] -= lr * ur - li * ui
                    ai[i, j] -= lr * ui + li * ur
    return ok


@hjit
def lu_solve_complex(ar, ai, piv, br, bi, n):
    for k in range(n):
        p = int(piv[k])
        if p != k:
            br[k], br[p] = br[p], br[k]
            bi[k], bi[p] = bi[p], bi[k]
    for i in range(1, n):
        sr = br[i]
        si = bi[i]
        for j in range(i):
            sr -= ar[i, j] * br[j] - ai[i, j] * bi[j]
            si -= ar[i, j] * bi[j] + ai[i, j] * br[j]
        br[i] = sr
        bi[i] = si
    for i in range(n - 1, -1, -1):
        sr = br[i]
        si = bi[i]
        for j in range(i + 1, n):
            sr -= ar[i, j] * br[j] - ai[i, j] * bi[j]
            si -= ar[i, j] * bi[j] + ai[i, j] * br[j]
        dr = ar[i, i]
        di = ai[i, i]
        if abs(dr) >= abs(di):
            ratio = di / dr
            denominator = dr + di * ratio
            br[i] = (sr + si * ratio) / denominator
            bi[i] = (si - sr * ratio) / denominator
        else:
            ratio = dr / di
            denominator = dr * ratio + di
            br[i] = (sr * ratio + si) / denominator
            bi[i] = (si * ratio - sr) / denominator
