# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Frank-Wolfe steps on the L2-SVM's minimum-enclosing-ball dual (Frandi et al.).

Solves   max_a g(a) = D2 - a'Qa   s.t.  sum_i a_i = 1, a >= 0,   Q_ij = y_i y_j (K_ij + 1) + [i == j] / C,
keeping s = Qa for every training point and R = a'Qa. The Frank-Wolfe vertex is the point with the smallest s_i (the
farthest from the centre), the away vertex the active point with the largest s_j (the nearest). Every step size is the
exact line search of R along its direction, so it holds for any kernel, normalized or not (for k(x, x) constant it
equals the paper's closed forms (29) and (31)). This file is hand-written (nbdev cannot export Cython);
nbs/14_frank_wolfe.ipynb derives and tests it.
"""
import numpy as np
from klrlab._kernels cimport KernelCache

cdef enum:
    FW = 0
    MFW = 1
    PAIRWISE = 2
    STEP_FW = 0
    STEP_AWAY = 1
    STEP_DROP = 2
    STEP_PAIR = 3
    STEP_PAIR_DROP = 4

# The codes Python passes in and gets back: klrlab.solvers.frank_wolfe reads them from here, so they exist once.
ALGORITHM_CODES = {"fw": FW, "mfw": MFW, "pairwise": PAIRWISE}
STEP_NAMES = {STEP_FW: "fw", STEP_AWAY: "away", STEP_DROP: "drop", STEP_PAIR: "pairwise",
              STEP_PAIR_DROP: "pairwise_drop"}
STATUS = {0: "converged", 1: "max_iter", 2: "no_progress"}


cdef inline double q_entry(const double* K_row, const double[::1] y, Py_ssize_t i, Py_ssize_t k,
                           double inv_C) noexcept nogil:
    "Q_ki = y_k y_i (K_ki + 1) + [k == i] / C, from the cached kernel row of i."
    cdef double q = y[k] * y[i] * (K_row[k] + 1.0)
    if k == i:
        q += inv_C
    return q


cdef inline void add_row(double[::1] s, const double* K_row, const double[::1] y, Py_ssize_t i, double inv_C,
                         double keep, double weight) noexcept nogil:
    "s <- keep * s + weight * Q[:, i]: the score update of every step, one pass over the cached row of i."
    cdef Py_ssize_t k, n = s.shape[0]
    cdef double yi = y[i]
    for k in range(n):
        s[k] = keep * s[k] + weight * (y[k] * yi * (K_row[k] + 1.0))
    s[i] += weight * inv_C


cdef inline void add_row_on(double[::1] s, const double* K_row, const double[::1] y, Py_ssize_t i, double inv_C,
                            double keep, double weight, const Py_ssize_t[::1] pool) noexcept nogil:
    "add_row on the points of `pool` alone (i among them): the Core Vector Machine's inner solve, O(|pool|) a step."
    cdef Py_ssize_t k, p
    cdef double yi = y[i]
    for k in range(pool.shape[0]):
        p = pool[k]
        s[p] = keep * s[p] + weight * (y[p] * yi * (K_row[p] + 1.0))
    s[i] += weight * inv_C


cdef inline void step_scores(double[::1] s, const double* K_row, const double[::1] y, Py_ssize_t i, double inv_C,
                             double keep, double weight, const Py_ssize_t[::1] pool, bint pool_only) noexcept nogil:
    if pool_only:
        add_row_on(s, K_row, y, i, inv_C, keep, weight, pool)
    else:
        add_row(s, K_row, y, i, inv_C, keep, weight)


cdef inline unsigned long long next_random(unsigned long long* state) noexcept nogil:
    "xorshift64*: a small seeded generator, so sampling runs without the GIL and repeats bit for bit."
    cdef unsigned long long x = state[0]
    x ^= x >> 12
    x ^= x << 25
    x ^= x >> 27
    state[0] = x
    return x * 2685821657736338717ULL


cdef inline Py_ssize_t farthest(const double[::1] s, const Py_ssize_t[::1] pool, Py_ssize_t sample_size,
                                unsigned long long* rng) noexcept nogil:
    "The pool's point with the smallest s_i, over the whole pool or over `sample_size` draws from it."
    cdef Py_ssize_t k, i, best = pool[0], n_pool = pool.shape[0]
    cdef double best_s
    if sample_size <= 0 or sample_size >= n_pool:
        best_s = s[best]
        for k in range(1, n_pool):
            i = pool[k]
            if s[i] < best_s:
                best, best_s = i, s[i]
        return best
    best = pool[next_random(rng) % n_pool]
    best_s = s[best]
    for k in range(1, sample_size):
        i = pool[next_random(rng) % n_pool]
        if s[i] < best_s:
            best, best_s = i, s[i]
    return best


cdef inline Py_ssize_t nearest_active(const double[::1] s, const Py_ssize_t[::1] active,
                                      Py_ssize_t n_active) noexcept nogil:
    "The active point (alpha_j > 0) with the largest s_j: the away vertex."
    cdef Py_ssize_t k, j, best = active[0]
    cdef double best_s = s[best]
    for k in range(1, n_active):
        j = active[k]
        if s[j] > best_s:
            best, best_s = j, s[j]
    return best


cdef inline void activate(Py_ssize_t i, Py_ssize_t[::1] active, Py_ssize_t[::1] position,
                          Py_ssize_t* n_active) noexcept nogil:
    if position[i] < 0:
        position[i] = n_active[0]
        active[n_active[0]] = i
        n_active[0] += 1


cdef inline void deactivate(Py_ssize_t j, Py_ssize_t[::1] active, Py_ssize_t[::1] position,
                            Py_ssize_t* n_active) noexcept nogil:
    "Swap-remove j from the active list (a drop step set alpha_j to exactly 0)."
    cdef Py_ssize_t p = position[j], last = active[n_active[0] - 1]
    active[p] = last
    position[last] = p
    position[j] = -1
    n_active[0] -= 1


def meb_scores(KernelCache cache, const double[::1] y, double C, const double[::1] alpha, double[::1] s):
    "s = Q alpha from the cached rows of the points with alpha_j > 0; returns R = alpha' Q alpha."
    cdef Py_ssize_t j, k, n = s.shape[0]
    cdef double inv_C = 1.0 / C, R = 0.0
    cdef const double* K_row
    with nogil:
        for k in range(n):
            s[k] = 0.0
        for j in range(n):
            if alpha[j] != 0.0:
                K_row = cache.row(j)
                add_row(s, K_row, y, j, inv_C, 1.0, alpha[j])
        for k in range(n):
            R += alpha[k] * s[k]
    return R


def scores_at(KernelCache cache, const double[::1] y, double C, const double[::1] alpha,
              const Py_ssize_t[::1] candidates, double[::1] s):
    """s_i = (Q alpha)_i for the `candidates` alone, written into s: the cached rows of the points with alpha_j > 0 read
    at the candidates' columns, O(|candidates| q) (how CVM scores its samples without keeping every s_i)."""
    cdef Py_ssize_t j, k, i, n = alpha.shape[0], m = candidates.shape[0]
    cdef double inv_C = 1.0 / C, a
    cdef const double* K_row
    with nogil:
        for k in range(m):
            i = candidates[k]
            s[i] = alpha[i] * inv_C
        for j in range(n):
            a = alpha[j]
            if a != 0.0:
                K_row = cache.row(j)
                for k in range(m):
                    i = candidates[k]
                    s[i] += a * y[j] * y[i] * (K_row[i] + 1.0)


def frank_wolfe(KernelCache cache, const double[::1] y, double C, double[::1] alpha, double[::1] s, double R,
                double delta2, const Py_ssize_t[::1] pool, int algorithm, double tol, long long max_iter,
                Py_ssize_t sample_size, Py_ssize_t n_trials, unsigned long long seed,
                double[::1] trace_objective=None, double[::1] trace_gap=None, signed char[::1] trace_step=None,
                long long[::1] trace_core=None, long long[::1] trace_evals=None, bint pool_only=False):
    """Frank-Wolfe (`algorithm` FW), with away steps (MFW) or pairwise steps (PAIRWISE) on the simplex over `pool`.

    alpha, s = Q alpha and R = alpha' Q alpha are updated in place (with `pool_only`, s on the pool's points alone:
    the others' scores go stale, as in the Core Vector Machine's inner solve). Stops when the sampled (or full) Frank-Wolfe gap
    2 (R - s_i*) is at most tol * g with g = delta2 - R, i.e. delta_+ <= (1 + eps)^2 - 1 (the paper's test (35));
    with sampling, up to `n_trials` samples are drawn before the test is accepted. Returns (steps, R, status)."""
    cdef Py_ssize_t n = s.shape[0], n_pool = pool.shape[0]
    cdef double inv_C = 1.0 / C
    cdef Py_ssize_t[::1] active = np.empty(n, dtype=np.intp)
    cdef Py_ssize_t[::1] position = np.full(n, -1, dtype=np.intp)
    cdef Py_ssize_t n_active = 0, i, j, k, trial
    cdef long long it = 0
    cdef int status = 1, step
    cdef bint tracing = trace_objective is not None
    cdef double fw_gain, away_gain, lam, lam_max, curvature, s_i, s_j, Qij
    cdef const double* K_i
    cdef const double* K_j
    cdef unsigned long long rng = seed * 2 + 1
    for k in range(n):
        if alpha[k] > 0.0:
            activate(k, active, position, &n_active)
    if n_active == 0:
        raise ValueError("alpha must have a positive entry (it lies on the simplex)")
    with nogil:
        while True:
            i = farthest(s, pool, sample_size, &rng)
            trial = 1
            while 2.0 * (R - s[i]) <= tol * (delta2 - R) and trial < n_trials:
                i = farthest(s, pool, sample_size, &rng)
                trial += 1
            fw_gain = R - s[i]                                 # half the Frank-Wolfe gap: delta_+ r^2 / 2
            if tracing:
                trace_objective[it] = delta2 - R
                trace_gap[it] = 2.0 * fw_gain / (delta2 - R)
                trace_core[it] = n_active
                trace_evals[it] = cache.n_kernel_evals
            if 2.0 * fw_gain <= tol * (delta2 - R):
                status = 0
                break
            if it >= max_iter:
                status = 1
                break
            j = nearest_active(s, active, n_active)
            away_gain = s[j] - R                               # delta_- r^2 / 2
            s_i, s_j = s[i], s[j]
            if algorithm == FW or (algorithm == MFW and (fw_gain >= away_gain or alpha[j] >= 1.0)) \
                    or (algorithm == PAIRWISE and j == i):
                # toward e_i: R(lam) = R + 2 lam (s_i - R) + lam^2 (Q_ii - 2 s_i + R)
                step = STEP_FW
                K_i = cache.row(i)
                curvature = cache.diag(i) + 1.0 + inv_C - 2.0 * s_i + R
                lam = fw_gain / curvature if curvature > 0.0 else 1.0
                if lam > 1.0:
                    lam = 1.0
                step_scores(s, K_i, y, i, inv_C, 1.0 - lam, lam, pool, pool_only)
                R = (1.0 - lam) * (1.0 - lam) * R + 2.0 * lam * (1.0 - lam) * s_i \
                    + lam * lam * (cache.diag(i) + 1.0 + inv_C)
                for k in range(n_active):
                    alpha[active[k]] *= 1.0 - lam
                alpha[i] += lam
                if lam == 1.0:                                 # the whole weight moved to i
                    while n_active > 0:
                        deactivate(active[0], active, position, &n_active)
                    for k in range(n):
                        alpha[k] = 0.0
                    alpha[i] = 1.0
                activate(i, active, position, &n_active)
            elif algorithm == MFW:
                # away from e_j: R(lam) = R + 2 lam (R - s_j) + lam^2 (R - 2 s_j + Q_jj), lam <= a_j / (1 - a_j)
                step = STEP_AWAY
                K_j = cache.row(j)
                lam_max = alpha[j] / (1.0 - alpha[j])
                curvature = cache.diag(j) + 1.0 + inv_C - 2.0 * s_j + R
                lam = away_gain / curvature if curvature > 0.0 else lam_max
                if lam >= lam_max:
                    lam, step = lam_max, STEP_DROP
                step_scores(s, K_j, y, j, inv_C, 1.0 + lam, -lam, pool, pool_only)
                R = (1.0 + lam) * (1.0 + lam) * R - 2.0 * lam * (1.0 + lam) * s_j \
                    + lam * lam * (cache.diag(j) + 1.0 + inv_C)
                for k in range(n_active):
                    alpha[active[k]] *= 1.0 + lam
                alpha[j] -= lam
                if step == STEP_DROP:
                    alpha[j] = 0.0
                    deactivate(j, active, position, &n_active)
            else:
                # pairwise: weight from e_j to e_i, R(lam) = R + 2 lam (s_i - s_j) + lam^2 (Q_ii + Q_jj - 2 Q_ij)
                step = STEP_PAIR
                K_i = cache.row(i)
                K_j = cache.row(j)
                Qij = q_entry(K_i, y, i, j, inv_C)
                curvature = (cache.diag(i) + 1.0 + inv_C) + (cache.diag(j) + 1.0 + inv_C) - 2.0 * Qij
                lam = (s_j - s_i) / curvature if curvature > 0.0 else alpha[j]
                if lam >= alpha[j]:
                    lam, step = alpha[j], STEP_PAIR_DROP
                step_scores(s, K_i, y, i, inv_C, 1.0, lam, pool, pool_only)
                step_scores(s, K_j, y, j, inv_C, 1.0, -lam, pool, pool_only)
                R = R + 2.0 * lam * (s_i - s_j) + lam * lam * curvature
                alpha[i] += lam
                alpha[j] -= lam
                activate(i, active, position, &n_active)
                if step == STEP_PAIR_DROP:
                    alpha[j] = 0.0
                    deactivate(j, active, position, &n_active)
            if tracing:
                trace_step[it] = step
            if not (lam > 0.0):
                status = 2
                break
            it += 1
    if tracing:
        trace_step[it] = -1
    return it, R, status
