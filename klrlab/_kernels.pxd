# Declarations shared with the solvers (_smo.pyx and later) so they can read kernel rows without the GIL.

cdef enum KernelCode:
    LINEAR = 0
    POLY = 1
    RBF = 2
    LAPLACIAN = 3
    PRECOMPUTED = 4


cdef class KernelCache:
    cdef readonly Py_ssize_t n_samples, n_features, capacity
    cdef readonly int kernel_code, degree
    cdef readonly double gamma, coef0, cache_size, ridge    # ridge: added to K[i, i] of the training points
    cdef readonly long long n_kernel_evals, n_hits, n_misses
    cdef object _X_ref, _buffer_ref
    cdef const double[:, ::1] X
    cdef double[::1] sq_norms
    cdef double[::1] diag_values
    cdef double[:, ::1] buffer
    cdef Py_ssize_t[::1] slot_of_row
    cdef Py_ssize_t[::1] row_of_slot
    cdef Py_ssize_t[::1] prev_slot
    cdef Py_ssize_t[::1] next_slot
    cdef Py_ssize_t head, tail, n_used
    cdef readonly bint sparse_rows     # rows by sparse inner products (X mostly zeros), the whole matrix by BLAS
    cdef object _csr_ref
    cdef Py_ssize_t[::1] row_start     # X in compressed sparse rows: row j's entries are row_start[j]..row_start[j+1]-1
    cdef Py_ssize_t[::1] column_of
    cdef double[::1] value_of
    cdef double[::1] dense_row         # x_i scattered into p slots while its row is computed (zero otherwise)
    cdef double[::1] slot_coef         # combine_rows' coefficients in slot order (scratch, one per cached row)

    cdef const double* row(self, Py_ssize_t i) noexcept nogil
    cdef void combine_rows(self, const double* coef, double* out) noexcept nogil
    cdef double diag(self, Py_ssize_t i) noexcept nogil
    cdef void _compute_row(self, Py_ssize_t i, double* out) noexcept nogil
    cdef void _sparse_dots(self, Py_ssize_t i, double* out) noexcept nogil
    cdef void _unlink(self, Py_ssize_t slot) noexcept nogil
    cdef void _push_front(self, Py_ssize_t slot) noexcept nogil
