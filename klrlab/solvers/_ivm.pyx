# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The compiled loop of the Import Vector Machine (klrlab.solvers.ivm).

The Import Vector Machine scores every candidate point l by H after one Newton step on S + {l}. The step moves the
decision values to f_i + d_l (K_il - Q_il) (Q = [K_S 1] H^-1 h, see nbs/12_ivm.ipynb), so the loss of all n
candidates is a sum over an n x n array. NumPy needs several n x n temporaries for it (280 MB each on a 6 000-point
fold); this loop reads K and Q once, a block of rows at a time, and keeps only the n running sums.
This file is hand-written (nbdev cannot export Cython); nbs/12_ivm.ipynb derives and tests it.
"""
from libc.math cimport exp, fabs, log1p


cdef inline double softplus(double z) noexcept nogil:
    "log(1 + exp(z)), without overflow for large z."
    return (z if z > 0.0 else 0.0) + log1p(exp(-fabs(z)))


def add_candidate_losses(const double[:, ::1] K_rows, const double[:, ::1] Q_rows, const double[::1] base,
                         const double[::1] y, const double[::1] step, double[::1] out):
    """out[c] += sum_i log(1 + exp(-y_i (base_i + step_c (K_ic - Q_ic)))) over the block's rows i.

    K_rows, Q_rows: (rows, n) C-contiguous; base, y: (rows,); step, out: (n,). Shapes are checked before the loop."""
    cdef Py_ssize_t rows = K_rows.shape[0], cols = K_rows.shape[1], i, c
    cdef double yi, bi
    if Q_rows.shape[0] != rows or Q_rows.shape[1] != cols:
        raise ValueError(f"Q_rows has shape ({Q_rows.shape[0]}, {Q_rows.shape[1]}); K_rows has ({rows}, {cols})")
    if base.shape[0] != rows or y.shape[0] != rows:
        raise ValueError(f"base and y need {rows} entries (one per row); got {base.shape[0]} and {y.shape[0]}")
    if step.shape[0] != cols or out.shape[0] != cols:
        raise ValueError(f"step and out need {cols} entries (one per column); got {step.shape[0]} and {out.shape[0]}")
    with nogil:
        for i in range(rows):
            yi = y[i]
            bi = base[i]
            for c in range(cols):
                out[c] += softplus(-yi * (bi + step[c] * (K_rows[i, c] - Q_rows[i, c])))
