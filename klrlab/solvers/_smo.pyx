# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The dual SMO engine shared by kernel logistic regression and the C-SVM.

Solves   min_a  1/2 a'Qa + sum_i phi(a_i) - lam * sum_i a_i   s.t.  y'a = 0,  lo <= a_i <= hi,
with Q_ij = y_i y_j K_ij and phi either zero (the C-SVM dual: lam = 1, [lo, hi] = [0, C]) or the KLR entropy term
phi(a) = C G(a / C) = a log(a / C) + (C - a) log(1 - a / C) (Keerthi et al. 2002; Consolo et al. with lam > 0).

State kept between steps: F_i = sum_j a_j y_j K_ij. With s_i = -y_i grad_i f = -F_i - y_i (phi'(a_i) - lam), a point is
optimal iff m(a) = max_{I_up} s_i <= M(a) = min_{I_low} s_i (Chen, Fan & Lin 2006); the certificate is m - M.
This file is hand-written (nbdev cannot export Cython); nbs/11_smo.ipynb derives and tests it.
"""
import numpy as np
from libc.math cimport INFINITY, fabs, log
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from klrlab._kernels cimport KernelCache

cdef enum:
    HINGE = 0
    LOGISTIC = 1
    WSS_FIRST = 0
    WSS_SECOND = 1

# The codes Python passes in and gets back: klrlab.solvers.smo reads them from here, so they exist once.
LOSS_CODES = {"logistic": LOGISTIC, "hinge": HINGE}
WSS_CODES = {"first": WSS_FIRST, "second": WSS_SECOND}
STATUS = {0: "converged", 1: "max_iter", 2: "no_progress"}
PHASES = ("second-order selection", "kernel rows", "1-D solve", "gradient update + next scan")

cdef double TAU_CURVATURE = 1e-12   # LIBSVM's floor for a non-positive pair curvature (SVM only)
cdef double EPS = 2.220446049250313e-16


cdef inline double now() noexcept nogil:
    "Monotonic seconds, for the optional per-phase profile."
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return t.tv_sec + 1e-9 * t.tv_nsec


cdef inline void lap(double* clock, double[::1] seconds, int phase) noexcept nogil:
    "Add the time since *clock to seconds[phase] and restart the clock."
    cdef double t = now()
    seconds[phase] += t - clock[0]
    clock[0] = t


cdef inline double dphi(int loss, double a, double C) noexcept nogil:
    "phi'(a): log(a / (C - a)) for the entropy term, 0 for the SVM."
    if loss == LOGISTIC:
        return log(a) - log(C - a)
    return 0.0


cdef inline double d2phi(int loss, double a, double C) noexcept nogil:
    "phi''(a): C / (a (C - a)) for the entropy term, 0 for the SVM."
    if loss == LOGISTIC:
        return C / (a * (C - a))
    return 0.0


cdef inline double score(int loss, double F, double y, double a, double C, double lam) noexcept nogil:
    "s_i = -y_i * grad_i f = -F_i - y_i (phi'(a_i) - lam)."
    return -F - y * (dphi(loss, a, C) - lam)


cdef inline double cached_score(double F, double y, double dphi_a, double lam) noexcept nogil:
    "score() with phi'(a_i) read from the per-index cache (same expression, so the same bits)."
    return -F - y * (dphi_a - lam)


cdef inline bint in_up(double y, double a, double lo, double hi) noexcept nogil:
    return (y > 0 and a < hi) or (y < 0 and a > lo)


cdef inline bint in_low(double y, double a, double lo, double hi) noexcept nogil:
    return (y < 0 and a < hi) or (y > 0 and a > lo)


cdef inline double pair_slope(int loss, double t, double Fi, double Fj, double eta, double ai, double aj,
                              double yi, double yj, double C, double lam) noexcept nogil:
    """d/dt f(a_i + y_i t, a_j - y_j t)
    = (F_i - F_j) + t eta + y_i phi'(a_i + y_i t) - y_j phi'(a_j - y_j t) - lam (y_i - y_j)."""
    return (Fi - Fj) + t * eta + yi * dphi(loss, ai + yi * t, C) - yj * dphi(loss, aj - yj * t, C) - lam * (yi - yj)


cdef double solve_pair(int loss, double Fi, double Fj, double Kii, double Kjj, double Kij, double ai, double aj,
                       double yi, double yj, double C, double lam, double lo, double hi, bint* at_end) noexcept nogil:
    """The exact minimiser t* in (0, U] of f along the pair direction (i gains y_i t, j loses y_j t).

    SVM: the clipped Newton step. KLR: phi' is strictly increasing, so if the slope at the wall U is still negative
    the minimiser is the wall; otherwise the root of the slope in (0, U), by Newton safeguarded with bisection,
    to rounding."""
    cdef double Ui = (hi - ai) if yi > 0 else (ai - lo)
    cdef double Uj = (aj - lo) if yj > 0 else (hi - aj)
    cdef double U = Ui if Ui < Uj else Uj
    cdef double eta = Kii + Kjj - 2.0 * Kij
    cdef double slope0 = pair_slope(loss, 0.0, Fi, Fj, eta, ai, aj, yi, yj, C, lam)
    cdef double t, t_new, d, curv, a_left, b_right
    cdef int k
    at_end[0] = False
    if U <= 0.0 or slope0 >= 0.0:
        return 0.0
    if loss == HINGE:
        if eta <= 0.0:
            eta = TAU_CURVATURE
        t = -slope0 / eta
        if t >= U:
            at_end[0] = True
            return U
        return t
    if pair_slope(loss, U, Fi, Fj, eta, ai, aj, yi, yj, C, lam) <= 0.0:
        at_end[0] = True
        return U
    a_left, b_right, t = 0.0, U, 0.0
    d = slope0
    for k in range(200):
        curv = eta + d2phi(loss, ai + yi * t, C) + d2phi(loss, aj - yj * t, C)
        t_new = t - d / curv
        if not (a_left < t_new < b_right):
            t_new = 0.5 * (a_left + b_right)
        if fabs(t_new - t) <= 4.0 * EPS * t_new:
            t = t_new
            break
        t = t_new
        d = pair_slope(loss, t, Fi, Fj, eta, ai, aj, yi, yj, C, lam)
        if d == 0.0:
            break
        if d < 0.0:
            a_left = t
        else:
            b_right = t
        if b_right - a_left <= 4.0 * EPS * b_right:
            break
    return t


cdef struct PairStep:
    const double* row_i   # K[i, :] and K[j, :], both valid until the next cache request
    const double* row_j
    double t              # the exact step along the pair (0: no descent from here)
    bint at_end           # the step ends on a bound


cdef inline PairStep pair_step(KernelCache cache, int loss, const double[::1] y, const double[::1] alpha,
                               double Fi, double Fj, const double[::1] diag, Py_ssize_t i, Py_ssize_t j,
                               double C, double lam, double lo, double hi) noexcept nogil:
    "The step on the pair (i, j): j's row is fetched first so that i's is the most recent in the cache."
    cdef PairStep step
    step.row_j = cache.row(j)
    step.row_i = cache.row(i)
    step.t = solve_pair(loss, Fi, Fj, diag[i], diag[j], step.row_i[j], alpha[i], alpha[j], y[i], y[j],
                        C, lam, lo, hi, &step.at_end)
    return step


cdef inline void move_pair(const double[::1] y, double[::1] alpha, Py_ssize_t i, Py_ssize_t j, PairStep step,
                           double lo, double hi) noexcept nogil:
    "a_i += y_i t, a_j -= y_j t, snapping a variable that reached its bound exactly onto it."
    cdef double t = step.t
    # the rounding left by a step that lands on a bound: relative to the box, or to the step when the box is unbounded
    cdef double slack = 4.0 * EPS * (hi if hi < INFINITY else t)
    alpha[i] += y[i] * t
    alpha[j] -= y[j] * t
    if step.at_end:
        if y[i] > 0 and alpha[i] > hi - slack: alpha[i] = hi
        if y[i] < 0 and alpha[i] < lo + slack: alpha[i] = lo
        if y[j] > 0 and alpha[j] < lo + slack: alpha[j] = lo
        if y[j] < 0 and alpha[j] > hi - slack: alpha[j] = hi
    if alpha[i] < lo: alpha[i] = lo
    if alpha[i] > hi: alpha[i] = hi
    if alpha[j] < lo: alpha[j] = lo
    if alpha[j] > hi: alpha[j] = hi


cdef void apply_pair(const double[::1] y, double[::1] alpha, double[::1] F, Py_ssize_t i, Py_ssize_t j,
                     PairStep step, double lo, double hi) noexcept nogil:
    "Take the step t on the pair: move (a_i, a_j), then F += t (K_i - K_j)."
    cdef Py_ssize_t k
    cdef double t = step.t
    cdef const double* row_i = step.row_i
    cdef const double* row_j = step.row_j
    move_pair(y, alpha, i, j, step, lo, hi)
    for k in range(y.shape[0]):
        F[k] += t * (row_i[k] - row_j[k])


cdef struct Extremes:
    Py_ssize_t i          # argmax of the score over I_up (-1: empty)
    Py_ssize_t j          # argmin of the score over I_low (-1: empty)
    double m              # the max, and the min
    double M


cdef inline unsigned char membership(double y, double a, double lo, double hi) noexcept nogil:
    "Bit 1: the index is in I_up; bit 2: in I_low."
    return (1 if in_up(y, a, lo, hi) else 0) | (2 if in_low(y, a, lo, hi) else 0)


cdef inline void refresh_index(int loss, const double[::1] y, const double[::1] alpha, double C, double lo,
                               double hi, Py_ssize_t k, const double[::1] diag, double[::1] dphi_a,
                               double[::1] curv, unsigned char[::1] member) noexcept nogil:
    "Recompute the per-index state of k after alpha_k moved: phi'(a_k), K_kk + phi''(a_k) and the membership."
    dphi_a[k] = dphi(loss, alpha[k], C)
    curv[k] = diag[k] + d2phi(loss, alpha[k], C)
    member[k] = membership(y[k], alpha[k], lo, hi)


cdef inline Extremes no_extremes() noexcept nogil:
    "Extremes before any point is seen: no index, m = -inf, M = +inf (as numbers the scores never reach)."
    cdef Extremes e
    e.i = e.j = -1
    e.m, e.M = -1e300, 1e300
    return e


cdef inline void consider(Extremes* e, Py_ssize_t k, double s, unsigned char member) noexcept nogil:
    if (member & 1) and s > e.m:
        e.m = s
        e.i = k
    if (member & 2) and s < e.M:
        e.M = s
        e.j = k


cdef Extremes scan_scores(const double[::1] y, const double[::1] F, const double[::1] dphi_a,
                          const unsigned char[::1] member, double lam, double[::1] s) noexcept nogil:
    "Every score s_k into s, and the extremes m (over I_up) and M (over I_low) with their indices."
    cdef Extremes e = no_extremes()
    cdef Py_ssize_t k
    for k in range(y.shape[0]):
        s[k] = cached_score(F[k], y[k], dphi_a[k], lam)
        consider(&e, k, s[k], member[k])
    return e


cdef inline double gradient_from_score(double s, double y, double dphi_a, double lam) noexcept nogil:
    "F_k from its score: s_k = -F_k - y_k (phi'(a_k) - lam) solved for F_k."
    return -s - y * (dphi_a - lam)


cdef void gradient_from_scores(const double[::1] s, const double[::1] y, const double[::1] dphi_a, double lam,
                               double[::1] F) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(s.shape[0]):
        F[k] = gradient_from_score(s[k], y[k], dphi_a[k], lam)


cdef Extremes shift_and_scan(double[::1] s, const unsigned char[::1] member, double t, const double* row_i,
                             const double* row_j) noexcept nogil:
    """s -= t (K_i - K_j), the scores' share of F += t (K_i - K_j), fused with the next selection's scan. The loop
    keeps the scores instead of F: one pass reads three arrays (s and the two rows) instead of six, and its extremes
    are branch-free selects (the scores of i and j, whose phi' also changed, are corrected before the pass)."""
    cdef Extremes e = no_extremes()
    cdef Py_ssize_t k
    cdef double v, up, low
    for k in range(s.shape[0]):
        v = s[k] - t * (row_i[k] - row_j[k])
        s[k] = v
        up = v if member[k] & 1 else -1e300
        low = v if member[k] & 2 else 1e300
        if up > e.m:
            e.m = up
            e.i = k
        if low < e.M:
            e.M = low
            e.j = k
    return e


cdef Py_ssize_t second_order_partner(int loss, const double[::1] s, const unsigned char[::1] member,
                                     const double[::1] curv, const double* row_i, Py_ssize_t i,
                                     double m_val) noexcept nogil:
    """j = argmax over the violating I_low of v^2 / q, v = m - s_j, q = the pair's curvature at t = 0
    (Fan, Chen & Lin; Consolo et al. (34)-(35)); -1 if none violates. curv_k = K_kk + phi''(a_k), so
    q = curv_i + curv_k - 2 K_ik."""
    cdef Py_ssize_t k, j = -1
    cdef double v, q, best = 0.0, curv_i = curv[i]
    for k in range(s.shape[0]):
        if not (member[k] & 2):
            continue
        v = m_val - s[k]
        if v <= 0.0:
            continue
        q = curv_i + curv[k] - 2.0 * row_i[k]
        if loss != LOGISTIC and q <= 0.0:
            q = TAU_CURVATURE
        if v * v > best * q:     # v^2 / q > best without a division per point (q > 0)
            best = v * v / q
            j = k
    return j


def init_gradient(KernelCache cache, const double[::1] y, const double[::1] alpha, double[::1] F):
    "F_i = sum_j alpha_j y_j K_ij, one cached row per non-zero alpha_j."
    cdef Py_ssize_t n = y.shape[0], i, k
    cdef const double* row
    cdef double c
    if cache.n_samples != n or alpha.shape[0] != n or F.shape[0] != n:
        raise ValueError("cache, y, alpha and F must have the same number of samples")
    with nogil:
        for k in range(n):
            F[k] = 0.0
        for i in range(n):
            c = alpha[i] * y[i]
            if c != 0.0:
                row = cache.row(i)
                for k in range(n):
                    F[k] += c * row[k]


cdef double objective_nogil(int loss, const double[::1] y, const double[::1] alpha, const double[::1] F,
                           double C, double lam) noexcept nogil:
    cdef Py_ssize_t i
    cdef double total = 0.0, a
    for i in range(y.shape[0]):
        a = alpha[i]
        total += 0.5 * a * y[i] * F[i] - lam * a
        if loss == LOGISTIC:
            total += (a * log(a / C) if a > 0.0 else 0.0) + ((C - a) * log((C - a) / C) if a < C else 0.0)
    return total


def objective(int loss, const double[::1] y, const double[::1] alpha, const double[::1] F, double C, double lam):
    "f(a) = 1/2 sum_i a_i y_i F_i + sum_i phi(a_i) - lam sum_i a_i."
    if not (y.shape[0] == alpha.shape[0] == F.shape[0]):
        raise ValueError("y, alpha and F must have the same length")
    return objective_nogil(loss, y, alpha, F, C, lam)


def smo(KernelCache cache, const double[::1] y, double[::1] alpha, double[::1] F, int loss, double C, double lam,
        double lo, double hi, int wss, double tol, long long max_iter,
        double[::1] trace_gap=None, double[::1] trace_step=None, long long[::1] trace_pairs=None,
        double[::1] trace_objective=None, double[::1] phase_seconds=None):
    """Run SMO from a feasible `alpha` (updated in place) with F = K (alpha * y) (updated in place).

    Returns (n_iter, m - M, status code). With trace arrays (length >= max_iter + 1) it records per iteration the
    violation m - M before the step, the step t, the working pair (i, j) in trace_pairs[2k], trace_pairs[2k+1], and the
    objective before the step (an O(n) sum, so only when tracing). With phase_seconds (length 4) it adds the time
    spent in each of PHASES (two clock reads per phase and step: a profile, not the production path)."""
    cdef Py_ssize_t n = y.shape[0], k, i, j
    cdef long long it = 0
    cdef int status = 1
    cdef double gap = 0.0
    cdef const double* row_i
    cdef PairStep step
    cdef Extremes e
    cdef bint record = trace_gap is not None
    cdef bint timed = phase_seconds is not None
    cdef double clock = 0.0
    cdef double[::1] diag = cache.diag_values
    if cache.n_samples != n or alpha.shape[0] != n or F.shape[0] != n:
        raise ValueError("cache, y, alpha and F must have the same number of samples")
    if timed and phase_seconds.shape[0] != len(PHASES):
        raise ValueError(f"phase_seconds must hold {len(PHASES)} entries, one per phase: {PHASES}")
    if record and (trace_step is None or trace_pairs is None or trace_objective is None
                   or trace_gap.shape[0] < max_iter + 1 or trace_step.shape[0] < max_iter + 1
                   or trace_objective.shape[0] < max_iter + 1 or trace_pairs.shape[0] < 2 * (max_iter + 1)):
        raise ValueError("trace arrays must hold max_iter + 1 entries")
    # Per-index state that changes only at the two indices a step moves: phi'(a_k), K_kk + phi''(a_k) (two logs per
    # point per iteration would otherwise dominate the scan) and the I_up / I_low membership. The loop keeps the
    # scores s_k, not F: F_k = -s_k - y_k (phi'(a_k) - lam) is recovered where it is needed (the pair, the end).
    dphi_buffer, curv_buffer, score_buffer = np.empty(n), np.empty(n), np.empty(n)
    member_buffer = np.empty(n, dtype=np.uint8)
    cdef double[::1] dphi_a = dphi_buffer
    cdef double[::1] curv = curv_buffer
    cdef double[::1] s = score_buffer
    cdef unsigned char[::1] member = member_buffer
    cdef double dphi_i, dphi_j
    with nogil:
        for k in range(n):
            refresh_index(loss, y, alpha, C, lo, hi, k, diag, dphi_a, curv, member)
        e = scan_scores(y, F, dphi_a, member, lam, s)
        while True:
            # the maximal violating pair: i = argmax_{I_up} s, j = argmin_{I_low} s (Keerthi et al.; Chen et al.)
            gap = e.m - e.M if (e.i >= 0 and e.j >= 0) else 0.0
            if record:
                trace_gap[it] = gap
                gradient_from_scores(s, y, dphi_a, lam, F)
                trace_objective[it] = objective_nogil(loss, y, alpha, F, C, lam)
            if gap <= tol:
                status = 0
                break
            if it >= max_iter:
                status = 1
                break
            i, j = e.i, e.j
            if timed:
                clock = now()
            if wss == WSS_SECOND:
                row_i = cache.row(i)
                if timed:
                    lap(&clock, phase_seconds, 1)
                j = second_order_partner(loss, s, member, curv, row_i, i, e.m)
                if timed:
                    lap(&clock, phase_seconds, 0)
            if timed:
                step.row_j = cache.row(j)
                step.row_i = cache.row(i)
                lap(&clock, phase_seconds, 1)
            step = pair_step(cache, loss, y, alpha, gradient_from_score(s[i], y[i], dphi_a[i], lam),
                             gradient_from_score(s[j], y[j], dphi_a[j], lam), diag, i, j, C, lam, lo, hi)   # i's row: still cached, refreshed
            if timed:
                lap(&clock, phase_seconds, 2)
            if record:
                trace_step[it] = step.t
                trace_pairs[2 * it] = i
                trace_pairs[2 * it + 1] = j
            if step.t <= 0.0:
                status = 2
                break
            move_pair(y, alpha, i, j, step, lo, hi)
            dphi_i, dphi_j = dphi_a[i], dphi_a[j]
            refresh_index(loss, y, alpha, C, lo, hi, i, diag, dphi_a, curv, member)
            refresh_index(loss, y, alpha, C, lo, hi, j, diag, dphi_a, curv, member)
            s[i] -= y[i] * (dphi_a[i] - dphi_i)   # the scores' share of phi' moving at i and j
            s[j] -= y[j] * (dphi_a[j] - dphi_j)
            e = shift_and_scan(s, member, step.t, step.row_i, step.row_j)
            if timed:
                lap(&clock, phase_seconds, 3)
            it += 1
        gradient_from_scores(s, y, dphi_a, lam, F)
    return it, gap, status


cdef inline bint on_bound(double a, double lo, double hi) noexcept nogil:
    return a <= lo or a >= hi


cdef inline void apply_and_regroup(const double[::1] y, double[::1] alpha, double[::1] F, unsigned char[::1] nbg,
                                   Py_ssize_t i, Py_ssize_t j, PairStep step, double lo, double hi) noexcept nogil:
    "Take the step, then file both indices by where they landed: the near-boundary group NBG if on the box."
    apply_pair(y, alpha, F, i, j, step, lo, hi)
    nbg[i] = on_bound(alpha[i], lo, hi)
    nbg[j] = on_bound(alpha[j], lo, hi)


cdef void normal_extremes(const double[::1] y, const double[::1] alpha, const double[::1] F,
                          const unsigned char[::1] nbg, double C, double lam, Py_ssize_t* i_max, Py_ssize_t* i_min,
                          double* s_max, double* s_min) noexcept nogil:
    "argmax and argmin of the scores over the normal group (indices not in NBG); -1 when the group is empty."
    cdef Py_ssize_t k
    cdef double s
    i_max[0] = -1
    i_min[0] = -1
    s_max[0] = -1e300
    s_min[0] = 1e300
    for k in range(y.shape[0]):
        if nbg[k]:
            continue
        s = score(LOGISTIC, F[k], y[k], alpha[k], C, lam)
        if s > s_max[0]:
            s_max[0] = s
            i_max[0] = k
        if s < s_min[0]:
            s_min[0] = s
            i_min[0] = k


def smo_keerthi(KernelCache cache, const double[::1] y, double[::1] alpha, double[::1] F, double C, double lam,
                double lo, double hi, double tol, long long max_iter):
    """Keerthi et al.'s two-loop SMO (§5) for the KLR dual, from a feasible alpha (updated in place)
    with F = K (alpha y).

    Inner loop: maximal violating pairs over the normal group NG (alpha strictly inside the box) until their scores
    agree to tol; an index that reaches the box moves to the near-boundary group NBG, whose scores are not trusted at
    large C.
    Outer loop: each NBG index is tried against the two extreme NG indices; if it moves off its bound it rejoins NG.
    Stops when an outer pass changes nothing. Returns (n_iter, status code)."""
    cdef Py_ssize_t n = y.shape[0], k, i, j, a, b, partner, attempt
    cdef long long it = 0
    cdef int status = 0
    cdef double sk, sp, m_val, M_val
    cdef bint changed, stop = False
    cdef PairStep step
    cdef double[::1] diag = cache.diag_values
    if cache.n_samples != n or alpha.shape[0] != n or F.shape[0] != n:
        raise ValueError("cache, y, alpha and F must have the same number of samples")
    groups = np.zeros(n, dtype=np.uint8)
    cdef unsigned char[::1] nbg = groups
    for k in range(n):
        nbg[k] = on_bound(alpha[k], lo, hi)
    with nogil:
        while not stop:
            while True:   # inner loop over NG
                normal_extremes(y, alpha, F, nbg, C, lam, &i, &j, &m_val, &M_val)
                if i < 0 or i == j or m_val - M_val <= tol:
                    break
                if it >= max_iter:
                    status = 1
                    stop = True
                    break
                step = pair_step(cache, LOGISTIC, y, alpha, F[i], F[j], diag, i, j, C, lam, lo, hi)
                if step.t <= 0.0:
                    status = 2
                    stop = True
                    break
                apply_and_regroup(y, alpha, F, nbg, i, j, step, lo, hi)
                it += 1
            if stop:
                break
            changed = False   # outer pass over NBG
            for k in range(n):
                if not nbg[k]:
                    continue
                # the NG extremes are shared by both attempts unless a step lands k on its other bound
                normal_extremes(y, alpha, F, nbg, C, lam, &i, &j, &m_val, &M_val)
                for attempt in range(2):
                    partner = j if attempt == 0 else i
                    if partner < 0:
                        break
                    sk = score(LOGISTIC, F[k], y[k], alpha[k], C, lam)
                    sp = score(LOGISTIC, F[partner], y[partner], alpha[partner], C, lam)
                    if fabs(sk - sp) <= tol:
                        continue   # the guard that prevents ping-pong on near-zero violations
                    if sk > sp:
                        a, b = k, partner
                    else:
                        a, b = partner, k
                    step = pair_step(cache, LOGISTIC, y, alpha, F[a], F[b], diag, a, b, C, lam, lo, hi)
                    if step.t <= 0.0:
                        continue   # k cannot move that way from its bound
                    if it >= max_iter:
                        status = 1
                        stop = True
                        break
                    apply_and_regroup(y, alpha, F, nbg, a, b, step, lo, hi)
                    it += 1
                    if not nbg[k]:
                        changed = True
                        break
                    normal_extremes(y, alpha, F, nbg, C, lam, &i, &j, &m_val, &M_val)   # k crossed to its other bound
                if stop:
                    break
            if not changed:
                break
    return it, status
