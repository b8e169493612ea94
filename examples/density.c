/* Atmospheric density in C for hapsira's foreign functions (hapsira_core.foreign).
 *
 * A piecewise exponential atmosphere: between the base altitudes h_i of a
 * table, rho = rho_i exp(-(h - h_i) / H_i). The table comes through a pointer
 * (a slice of the params row), so that its numbers can change without a
 * rebuild, and every function is marked HAPSIRA_FUNC, which makes the same
 * source compile for the CPU (static) and for the GPU (static __device__).
 * No #include: <math.h> comes with the declaration on the host, and the CUDA
 * math functions need none.
 */

/* The row i of the table whose base altitude is the last one below h. */
HAPSIRA_FUNC int64_t layer(double h, const double *table, int64_t rows)
{
    int64_t i = 0;
    while (i + 1 < rows && table[3 * (i + 1)] <= h) {
        i += 1;
    }
    return i;
}

/* Density (kg/km^3) at altitude h (km). table: rows of (h_i km, rho_i kg/km^3,
 * H_i km), by increasing h_i; below the first base the first layer goes on. */
HAPSIRA_FUNC double density(double h, const double *table, int64_t rows)
{
    const double *row = table + 3 * layer(h, table, rows);
    return row[1] * exp(-(h - row[0]) / row[2]);
}
