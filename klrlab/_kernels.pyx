# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Kernel rows on demand with an LRU row cache, for the dual solvers.

This file is hand-written (nbdev cannot export Cython); nbs/01_kernels.ipynb documents and tests it.
Inner products go through BLAS (dgemv), so a row costs one matrix-vector product plus n scalar maps.
The solvers cimport `KernelCache` and call `row(i)` without the GIL; Python code calls `get_row(i)`.
"""
import numpy as np
cimport numpy as cnp
from libc.math cimport INFINITY, fabs
from scipy.linalg.cython_blas cimport dgemm, dgemv

cnp.import_array()

cdef extern from "_vector_exp.h" nogil:
    # exp over a row in place, a vector of points per step (hand-written C beside this file)
    void klr_exp_inplace(double* x, Py_ssize_t n)
    void klr_exp_inplace_with(int avx2, double* x, Py_ssize_t n)
    int klr_avx2_available()

# The builds of the row exponential this CPU can run, fastest last; kernel rows use the last.
EXP_BODIES = ("baseline", "avx2") if klr_avx2_available() else ("baseline",)

KERNEL_CODES = {"linear": LINEAR, "poly": POLY, "rbf": RBF, "laplacian": LAPLACIAN,
                "precomputed": PRECOMPUTED}
cdef double BYTES_PER_MB = 1048576.0
SPARSE_DENSITY = 0.25   # below this share of non-zeros, a row's inner products skip the zeros (LIBSVM's sparse rows)
cdef Py_ssize_t FILL_BLOCK_ROWS = 256   # rows per BLAS call when the whole matrix is computed: bounded products only
cdef enum:
    MIRROR_TILE = 32                    # the side of a square tile copied across the diagonal (two 8 KB tiles)


cdef inline double int_power(double base, int exponent) noexcept nogil:
    "base**exponent for a positive integer exponent, by repeated squaring."
    cdef double result = 1.0
    while exponent > 0:
        if exponent & 1:
            result *= base
        base *= base
        exponent >>= 1
    return result


cdef inline void dot_with_rows(const double[:, ::1] X, Py_ssize_t i, double* out) noexcept nogil:
    "out[j] = <X[j], X[i]> for every row j, by one BLAS dgemv on the row-major X."
    cdef int n_rows = <int> X.shape[0]
    cdef int n_cols = <int> X.shape[1]
    cdef int one = 1
    cdef double alpha = 1.0, beta = 0.0
    cdef char trans = b"T"
    # Row-major X (n x p) is column-major X^T (p x n); X @ x_i is (X^T)^T x_i.
    dgemv(&trans, &n_cols, &n_rows, &alpha, <double*> &X[0, 0], &n_cols,
          <double*> &X[i, 0], &one, &beta, out, &one)


cdef inline void dot_upper_block(const double[:, ::1] X, Py_ssize_t first, Py_ssize_t stop, double* out,
                                 Py_ssize_t out_stride) noexcept nogil:
    """out[r, c] = <X[first + r], X[first + c]> for the rows first..stop-1 and the columns first..n-1 (row-major, rows
    out_stride apart), by one BLAS dgemm: a block of rows of K's upper part, with its diagonal block whole."""
    cdef int n_columns = <int> (X.shape[0] - first)
    cdef int n_cols = <int> X.shape[1]
    cdef int n_block = <int> (stop - first)
    cdef int ld = <int> out_stride
    cdef double alpha = 1.0, beta = 0.0
    cdef char trans = b"T", no_trans = b"N"
    # Row-major out (b x m) is column-major out^T (m x b) = X_tail X_block^T, with X read as (X^T)^T as in dot_with_rows.
    dgemm(&trans, &no_trans, &n_columns, &n_block, &n_cols, &alpha, <double*> &X[first, 0], &n_cols,
          <double*> &X[first, 0], &n_cols, &beta, out, &ld)


cdef inline void mirror_below_block(double[:, ::1] K, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
    """K[i, c] = K[c, i] for the rows i >= stop and the columns c in first..stop-1: the part of those rows that the
    block of rows first..stop-1 already holds, copied in square tiles so both sides stay in the L1 cache."""
    cdef Py_ssize_t n = K.shape[0], i0, c0 = first, i, c, c_end
    cdef double* base = &K[0, 0]
    cdef double* target
    cdef const double* source
    while c0 < stop:
        c_end = min(c0 + MIRROR_TILE, stop)
        i0 = stop
        while i0 < n:
            for i in range(i0, min(i0 + MIRROR_TILE, n)):
                target = base + i * n
                source = base + i
                for c in range(c0, c_end):
                    target[c] = source[c * n]
            i0 += MIRROR_TILE
        c0 += MIRROR_TILE


cdef inline void polynomial_map(double* out, Py_ssize_t n, double gamma, double coef0, int degree) noexcept nogil:
    "Inner products into polynomial kernel values, in place: (gamma <a, b> + coef0)^degree."
    cdef Py_ssize_t j
    for j in range(n):
        out[j] = int_power(gamma * out[j] + coef0, degree)


cdef inline void rbf_exponents(double* out, Py_ssize_t n, double sq_i, const double* sq_norms,
                               double gamma) noexcept nogil:
    """Inner products with x_i into the RBF exponents -gamma ||x_i - x_j||^2, in place (0 where the expansion
    ||a||^2 + ||b||^2 - 2ab rounds to a distance <= 0)."""
    cdef Py_ssize_t j
    cdef double d
    for j in range(n):
        d = sq_i + sq_norms[j] - 2.0 * out[j]
        out[j] = -gamma * d if d > 0.0 else 0.0


cdef inline double l1_distance(const double[:, ::1] X, Py_ssize_t i, Py_ssize_t j) noexcept nogil:
    cdef Py_ssize_t k
    cdef double s = 0.0
    for k in range(X.shape[1]):
        s += fabs(X[i, k] - X[j, k])
    return s


def matrix_megabytes(Py_ssize_t n_samples):
    "The memory of the whole n x n kernel matrix in float64 (MB): the cache size at which `KernelCache.fill` applies."
    return 8.0 * n_samples * n_samples / BYTES_PER_MB


def row_capacity(Py_ssize_t n_samples, double cache_size):
    """Rows an LRU cache of `cache_size` MB holds for `n_samples` points: at least 2, at most n_samples.

    Two is the floor because a dual step reads two rows at once (LIBSVM keeps the same floor)."""
    if n_samples < 2:
        return n_samples
    cdef double rows = cache_size * BYTES_PER_MB / (8.0 * n_samples)
    return max(2, min(<Py_ssize_t> min(rows, <double> n_samples), n_samples))


cdef class KernelCache:
    """Rows of the kernel matrix K[i, :] over the training points, computed on demand and kept in an LRU cache.

    Build it through `klrlab.kernels.Kernel.cache` (which validates the input); the constructor expects
    a C-contiguous float64 matrix (for 'precomputed', the square training kernel matrix itself).
    With ridge > 0 the rows are those of K + ridge I over the training points (the L2-SVM's I/C term): only a
    training point's own entry carries it.
    """

    def __cinit__(self, X, str kernel, double gamma=1.0, int degree=3, double coef0=0.0,
                  double cache_size=200.0, double ridge=0.0):
        if kernel not in KERNEL_CODES:
            raise ValueError(f"kernel={kernel!r}; accepted values: {', '.join(KERNEL_CODES)}")
        if cache_size <= 0:
            raise ValueError(f"cache_size={cache_size!r} MB; it must be > 0")
        if not (ridge >= 0.0 and ridge < INFINITY):
            raise ValueError(f"ridge={ridge!r}; it must be a finite number >= 0")
        X = np.ascontiguousarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise ValueError(f"X must be a non-empty 2-D array; got shape {X.shape}")
        self.kernel_code = KERNEL_CODES[kernel]
        if self.kernel_code == PRECOMPUTED and X.shape[0] != X.shape[1]:
            raise ValueError(f"a precomputed kernel must be square; got shape {X.shape}")
        if self.kernel_code == PRECOMPUTED and ridge > 0.0:
            X = X + ridge * np.eye(X.shape[0])     # a copy: the caller's matrix stays as it was
        self.ridge = ridge
        self._X_ref = X
        self.X = X
        self.n_samples = X.shape[0]
        self.n_features = X.shape[1]
        self.gamma, self.degree, self.coef0, self.cache_size = gamma, degree, coef0, cache_size
        self.sq_norms = np.einsum("ij,ij->i", X, X) if self.kernel_code != PRECOMPUTED else np.zeros(0)
        self.diag_values = self._diagonal(X)
        self.capacity = row_capacity(self.n_samples, cache_size) if self.kernel_code != PRECOMPUTED else 0
        self._buffer_ref = np.empty((self.capacity, self.n_samples), dtype=np.float64)
        self.buffer = self._buffer_ref
        self.slot_of_row = np.full(self.n_samples, -1, dtype=np.intp)
        self.row_of_slot = np.full(self.capacity, -1, dtype=np.intp)
        self.prev_slot = np.full(self.capacity, -1, dtype=np.intp)
        self.next_slot = np.full(self.capacity, -1, dtype=np.intp)
        self.head = self.tail = -1
        self.n_used = 0
        self.n_kernel_evals = self.n_hits = self.n_misses = 0
        self.slot_coef = np.zeros(max(self.capacity, 1))
        self._set_sparse_rows(X)

    def _set_sparse_rows(self, X):
        "Keep X also in compressed sparse rows when it is mostly zeros (Adult, Web: about a tenth non-zero)."
        self.sparse_rows = (self.kernel_code in (LINEAR, POLY, RBF)
                            and np.count_nonzero(X) < SPARSE_DENSITY * X.size)
        if not self.sparse_rows:
            return
        rows, columns = np.nonzero(X)                     # row-major order: each row's entries together
        counts = np.bincount(rows, minlength=X.shape[0])
        self._csr_ref = (np.concatenate([[0], np.cumsum(counts)]).astype(np.intp), columns.astype(np.intp),
                         np.ascontiguousarray(X[rows, columns]), np.zeros(X.shape[1]))
        self.row_start, self.column_of, self.value_of, self.dense_row = self._csr_ref

    def _diagonal(self, X):
        "k(x_i, x_i) + ridge (a precomputed matrix carries its ridge already)."
        if self.kernel_code == PRECOMPUTED:
            return np.ascontiguousarray(np.diag(X))
        if self.kernel_code in (RBF, LAPLACIAN):
            return np.ones(self.n_samples) + self.ridge
        sq = np.asarray(self.sq_norms)
        if self.kernel_code == LINEAR:
            return sq + self.ridge
        return (self.gamma * sq + self.coef0) ** self.degree + self.ridge

    # ---- the nogil interface for the solvers -------------------------------------------------
    cdef double diag(self, Py_ssize_t i) noexcept nogil:
        return self.diag_values[i]

    cdef const double* row(self, Py_ssize_t i) noexcept nogil:
        """Pointer to K[i, :] (length n_samples). Valid until the row is evicted: after row(i), row(j)
        both pointers stay valid, because the cache holds at least two rows and evicts the least recent."""
        cdef Py_ssize_t slot
        if self.kernel_code == PRECOMPUTED:
            self.n_hits += 1
            return &self.X[i, 0]
        slot = self.slot_of_row[i]
        if slot >= 0:
            self.n_hits += 1
            if slot != self.head:
                self._unlink(slot)
                self._push_front(slot)
            return &self.buffer[slot, 0]
        self.n_misses += 1
        if self.n_used < self.capacity:
            slot = self.n_used
            self.n_used += 1
        else:
            slot = self.tail
            self._unlink(slot)
            self.slot_of_row[self.row_of_slot[slot]] = -1
        self._compute_row(i, &self.buffer[slot, 0])
        self.n_kernel_evals += self.n_samples
        self.slot_of_row[i] = slot
        self.row_of_slot[slot] = i
        self._push_front(slot)
        return &self.buffer[slot, 0]

    cdef void combine_rows(self, const double* coef, double* out) noexcept nogil:
        """out = sum_i coef[i] K[i, :]. When every row is cached (or the matrix is precomputed) one BLAS dgemv reads
        them all in place; otherwise one cached row per non-zero coef[i], so a zero coefficient costs no row."""
        cdef Py_ssize_t i, k, slot, n = self.n_samples
        cdef const double* r
        cdef int rows = <int> n, one = 1
        cdef double unit = 1.0, zero = 0.0
        cdef char no_trans = b"N"
        if self.kernel_code == PRECOMPUTED:
            # row-major K (n x n) is column-major K^T; K symmetric, so K^T coef = sum_i coef_i K[i, :]
            dgemv(&no_trans, &rows, &rows, &unit, <double*> &self.X[0, 0], &rows, <double*> coef, &one, &zero,
                  out, &one)
            return
        if self.n_used == n:
            for slot in range(n):
                self.slot_coef[slot] = coef[self.row_of_slot[slot]]
            # row-major buffer (n slots x n) is column-major (n x n slots): out = buffer^T slot_coef
            dgemv(&no_trans, &rows, &rows, &unit, &self.buffer[0, 0], &rows, &self.slot_coef[0], &one, &zero,
                  out, &one)
            return
        for k in range(n):
            out[k] = 0.0
        for i in range(n):
            if coef[i] != 0.0:
                r = self.row(i)
                for k in range(n):
                    out[k] += coef[i] * r[k]

    cdef void _compute_row(self, Py_ssize_t i, double* out) noexcept nogil:
        cdef Py_ssize_t j, n = self.n_samples
        if self.kernel_code == LAPLACIAN:
            for j in range(n):
                out[j] = -self.gamma * l1_distance(self.X, i, j)
            klr_exp_inplace(out, n)
            out[i] += self.ridge
            return
        if self.sparse_rows:
            self._sparse_dots(i, out)
        else:
            dot_with_rows(self.X, i, out)
        if self.kernel_code == POLY:
            polynomial_map(out, n, self.gamma, self.coef0, self.degree)
        elif self.kernel_code == RBF:
            rbf_exponents(out, n, self.sq_norms[i], &self.sq_norms[0], self.gamma)
            klr_exp_inplace(out, n)
            out[i] = 1.0  # exact: the expansion can leave rounding noise at a == b
        out[i] += self.ridge

    def fill(self):
        """Compute every row at once when the cache holds them all: blocked BLAS products over K's upper part, mirrored
        below the diagonal, instead of one matrix-vector product per row. A solver that needs every row (KLR: every
        alpha is interior) calls it first; afterwards every request is a hit. Returns whether the cache is full."""
        cdef Py_ssize_t n = self.n_samples, first, stop, r
        if self.kernel_code == PRECOMPUTED or self.capacity < n:
            return False
        if self.n_used == n:
            return True
        self.clear()
        for first in range(0, n, FILL_BLOCK_ROWS):
            stop = min(first + FILL_BLOCK_ROWS, n)
            self._fill_block(first, stop)
        for r in range(n):
            self.slot_of_row[r] = r
            self.row_of_slot[r] = r
            self._push_front(r)
        self.n_used = n
        self.n_misses += n
        self.n_kernel_evals += n * n
        return True

    def matrix(self):
        """The whole kernel matrix over the training points, as a read-only view of the filled cache (no copy), for
        code that reads blocks of it (cross-validation folds). ValueError if the cache cannot hold every row."""
        if self.kernel_code == PRECOMPUTED:
            view = self._X_ref.view()
        elif self.fill():
            view = self._buffer_ref.view()
        else:
            raise ValueError(f"cache_size={self.cache_size} MB holds {self.capacity} of the {self.n_samples} rows; "
                             f"the whole matrix needs {matrix_megabytes(self.n_samples):.0f} MB")
        view.flags.writeable = False
        return view

    def _fill_block(self, Py_ssize_t first, Py_ssize_t stop):
        """Rows first..stop-1 into slots first..stop-1 (the same values as _compute_row, up to the last bits of the
        products). K is symmetric, so the block computes only its columns from `first` on; the columns before it were
        mirrored in by the earlier blocks, and it mirrors its own into the rows below: half the products and exps."""
        cdef Py_ssize_t r, n = self.n_samples
        if self.kernel_code == LAPLACIAN:
            with nogil:
                for r in range(first, stop):
                    self._compute_row(r, &self.buffer[r, 0])
            return
        with nogil:
            dot_upper_block(self.X, first, stop, &self.buffer[first, first], n)
            for r in range(first, stop):
                if self.kernel_code == POLY:
                    polynomial_map(&self.buffer[r, first], n - first, self.gamma, self.coef0, self.degree)
                elif self.kernel_code == RBF:
                    rbf_exponents(&self.buffer[r, first], n - first, self.sq_norms[r], &self.sq_norms[first],
                                  self.gamma)
        if self.kernel_code == RBF:
            upper = self._buffer_ref[first:stop, first:]
            np.exp(upper, out=upper)   # NumPy's SIMD exp: faster than the row path's over a whole block
        with nogil:
            for r in range(first, stop):
                if self.kernel_code == RBF:
                    self.buffer[r, r] = 1.0   # exact, as in _compute_row
                self.buffer[r, r] += self.ridge
            mirror_below_block(self.buffer, first, stop)

    cdef void _sparse_dots(self, Py_ssize_t i, double* out) noexcept nogil:
        "out[j] = <x_j, x_i> over the non-zeros: x_i scattered into dense_row, each x_j's entries gathered from it."
        cdef Py_ssize_t j, k
        cdef double s
        for k in range(self.row_start[i], self.row_start[i + 1]):
            self.dense_row[self.column_of[k]] = self.value_of[k]
        for j in range(self.n_samples):
            s = 0.0
            for k in range(self.row_start[j], self.row_start[j + 1]):
                s += self.value_of[k] * self.dense_row[self.column_of[k]]
            out[j] = s
        for k in range(self.row_start[i], self.row_start[i + 1]):
            self.dense_row[self.column_of[k]] = 0.0

    cdef void _unlink(self, Py_ssize_t slot) noexcept nogil:
        cdef Py_ssize_t p = self.prev_slot[slot], q = self.next_slot[slot]
        if p >= 0:
            self.next_slot[p] = q
        else:
            self.head = q
        if q >= 0:
            self.prev_slot[q] = p
        else:
            self.tail = p
        self.prev_slot[slot] = self.next_slot[slot] = -1

    cdef void _push_front(self, Py_ssize_t slot) noexcept nogil:
        self.prev_slot[slot] = -1
        self.next_slot[slot] = self.head
        if self.head >= 0:
            self.prev_slot[self.head] = slot
        self.head = slot
        if self.tail < 0:
            self.tail = slot

    # ---- the Python interface ------------------------------------------------------------------
    def get_row(self, Py_ssize_t i):
        "A copy of kernel row K[i, :] (through the cache, so the counters move)."
        if i < 0 or i >= self.n_samples:
            raise IndexError(f"row {i} is out of range for {self.n_samples} samples")
        cdef const double* r = self.row(i)
        out = np.empty(self.n_samples, dtype=np.float64)
        cdef double[::1] view = out
        cdef Py_ssize_t j
        for j in range(self.n_samples):
            view[j] = r[j]
        return out

    def get_rows(self, indices):
        "A copy of K[indices, :], one cached row at a time."
        return np.stack([self.get_row(int(i)) for i in indices]) if len(indices) else np.empty((0, self.n_samples))

    @property
    def diagonal(self):
        "A copy of the kernel diagonal K[i, i], computed once at construction."
        return np.asarray(self.diag_values).copy()

    @property
    def kernel(self):
        return next(name for name, code in KERNEL_CODES.items() if code == self.kernel_code)

    def cached_rows(self):
        "The row indices in the cache, most recently used first."
        rows, slot = [], self.head
        while slot >= 0:
            rows.append(int(self.row_of_slot[slot]))
            slot = self.next_slot[slot]
        return rows

    def stats(self):
        "Counters: kernel evaluations, row hits and misses, hit rate, and the cache's size in rows."
        requests = self.n_hits + self.n_misses
        return {"n_kernel_evals": int(self.n_kernel_evals), "n_hits": int(self.n_hits),
                "n_misses": int(self.n_misses), "hit_rate": self.n_hits / requests if requests else 0.0,
                "capacity_rows": int(self.capacity), "cached_rows": int(self.n_used)}

    def reset_stats(self):
        "Zero the counters (the cached rows stay)."
        self.n_kernel_evals = self.n_hits = self.n_misses = 0

    def clear(self):
        "Drop every cached row (the counters stay)."
        self.slot_of_row[:] = -1
        self.row_of_slot[:] = -1
        self.prev_slot[:] = -1
        self.next_slot[:] = -1
        self.head = self.tail = -1
        self.n_used = 0

    def __reduce__(self):
        raise TypeError("a KernelCache holds a row buffer tied to one process and is not picklable; build a new one")

    def __repr__(self):
        ridge = f", ridge={self.ridge:g}" if self.ridge else ""
        return (f"KernelCache(kernel={self.kernel!r}, n_samples={self.n_samples}, "
                f"capacity_rows={self.capacity}, cache_size={self.cache_size} MB{ridge})")


def vector_exp(double[::1] x, str body=None):
    "exp(x) in place by the kernel rows' vectorised loop, from Python (for tests); `body` picks a build (None: fastest)."
    if body is not None and body not in EXP_BODIES:
        raise ValueError(f"body={body!r}; this CPU runs {', '.join(map(repr, EXP_BODIES))} (None: the fastest)")
    cdef int avx2 = body is None or body == "avx2"
    if x.shape[0]:
        with nogil:
            klr_exp_inplace_with(avx2, &x[0], x.shape[0])


def take_block(const double[:, ::1] K, rows, columns, out=None):
    """K[rows][:, columns] as a C-ordered array, in one pass (each output row gathered from one row of K): a
    cross-validation fold's training or held-out block of the whole kernel matrix. IndexError names a bad index.
    `out`: a 1-D float64 scratch array whose head receives the block (returned as a view of it), so that the folds of
    one cross-validation reuse one buffer instead of faulting in fresh pages for every block."""
    cdef Py_ssize_t[::1] r = _checked_indices(rows, K.shape[0], "rows")
    cdef Py_ssize_t[::1] c = _checked_indices(columns, K.shape[1], "columns")
    block = np.empty((r.shape[0], c.shape[0])) if out is None else _scratch_view(out, r.shape[0], c.shape[0])
    cdef double[:, ::1] target = block
    cdef Py_ssize_t a, b
    cdef const double* source
    with nogil:
        for a in range(r.shape[0]):
            source = &K[r[a], 0]
            for b in range(c.shape[0]):
                target[a, b] = source[c[b]]
    return block


def _scratch_view(out, Py_ssize_t n_rows, Py_ssize_t n_columns):
    "The first n_rows * n_columns entries of the scratch array `out` as an (n_rows, n_columns) C-ordered view."
    if not (isinstance(out, np.ndarray) and out.ndim == 1 and out.dtype == np.float64 and out.flags.c_contiguous
            and out.flags.writeable):
        raise ValueError("out must be a writeable, contiguous 1-D float64 array (a scratch buffer)")
    if out.shape[0] < n_rows * n_columns:
        raise ValueError(f"out holds {out.shape[0]} values; the block needs {n_rows} x {n_columns} = "
                         f"{n_rows * n_columns}")
    return out[:n_rows * n_columns].reshape(n_rows, n_columns)


def _checked_indices(indices, Py_ssize_t size, str name):
    "Indices as a contiguous intp array, each in [0, size): negative or too large ones raise here, not in C."
    index = np.ascontiguousarray(indices, dtype=np.intp)
    if index.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of indices; got shape {index.shape}")
    if index.size and (index.min() < 0 or index.max() >= size):
        raise IndexError(f"{name} must lie in [0, {size}); got [{index.min()}, {index.max()}]")
    return index


def replay(KernelCache cache, requests):
    """Request the rows `requests` in order through `cache`, in place and without the GIL, as a solver does.

    Returns a checksum (the sum of the diagonal entries read) so the reads cannot be optimised away.
    Used to measure what the cache saves a solver; the Python `get_row` adds a copy per request."""
    cdef Py_ssize_t[::1] order = _checked_indices(requests, cache.n_samples, "requests")
    cdef Py_ssize_t t, i
    cdef double checksum = 0.0
    cdef const double* r
    with nogil:
        for t in range(order.shape[0]):
            i = order[t]
            r = cache.row(i)
            checksum += r[i]
    return checksum
