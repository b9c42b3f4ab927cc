# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The dual SMO engine shared by kernel logistic regression and the C-SVM.

Solves   min_a  1/2 a'Qa + sum_i phi(a_i) - lam * sum_i a_i   s.t.  y'a = 0,  lo <= a_i <= hi,
with Q_ij = y_i y_j K_ij and phi either zero (the C-SVM dual: lam = 1, [lo, hi] = [0, C]) or the KLR entropy term
phi(a) = C G(a / C) = a log(a / C) + (C - a) log(1 - a / C) (Keerthi et al. 2002; Consolo et al. with lam > 0).

State kept between steps: F_i = sum_j a_j y_j K_ij. With s_i = -y_i grad_i f = -F_i - y_i (phi'(a_i) - lam), a point is
optimal iff m(a) = max_{I_up} s_i <= M(a) = min_{I_low} s_i (Chen, Fan & Lin 2006); the certificate is m - M.
This file is hand-written (nbdev cannot export Cython), with the vectorised passes of a step in _smo_scans.h beside
it; nbs/11_smo.ipynb derives and tests both.
"""
import numpy as np
from libc.math cimport INFINITY, fabs, fmin, log
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec
from klrlab._kernels cimport KernelCache

cdef extern from "_smo_scans.h" nogil:
    # The two O(n) passes of a step, vectorised (hand-written C beside this file: Cython cannot express the lanes).
    ctypedef struct klr_extremes:
        Py_ssize_t i
        Py_ssize_t j
        double m
        double M
    klr_extremes klr_shift_and_scan(double* s, const double* up_pen, const double* low_pen, double t,
                                    const double* row_i, const double* row_j, Py_ssize_t n)
    Py_ssize_t klr_second_order(const double* s, const double* low_pen, const double* curv, const double* row_i,
                                double curv_i, double m, double tau, Py_ssize_t n)
    klr_extremes klr_shift_and_scan_with(int avx2, double* s, const double* up_pen, const double* low_pen, double t,
                                         const double* row_i, const double* row_j, Py_ssize_t n)
    Py_ssize_t klr_second_order_with(int avx2, const double* s, const double* low_pen, const double* curv,
                                     const double* row_i, double curv_i, double m, double tau, Py_ssize_t n)
    int klr_avx2_available()

cdef enum:
    HINGE = 0
    LOGISTIC = 1
    WSS_FIRST = 0
    WSS_SECOND = 1
    WSS_SECOND_CAPPED = 2

# The codes Python passes in and gets back: klrlab.solvers.smo reads them from here, so they exist once.
LOSS_CODES = {"logistic": LOGISTIC, "hinge": HINGE}
WSS_CODES = {"first": WSS_FIRST, "second": WSS_SECOND, "second-capped": WSS_SECOND_CAPPED}
STATUS = {0: "converged", 1: "max_iter", 2: "no_progress"}
PHASES = ("second-order selection", "kernel rows", "1-D solve", "gradient update + next scan")
# The builds of the vectorised passes this CPU can run, fastest last; the engine runs the last.
SCAN_BODIES = ("baseline", "avx2") if klr_avx2_available() else ("baseline",)

# 'second-capped': the entropy's curvature phi''(a_k) enters the second-order gain at most this many times the mean
# kernel diagonal. Near a bound phi'' ~ 1 / a is huge, so the quadratic model rates a far-off point's gain near zero
# while the entropy (t log t, not t^2 / a) lets it move a long way: such points stayed unpicked, the violation m - M
# stayed large, and large-C fits took several times the steps (measured on the smo page).
SELECTION_CURVATURE_CAP = 1e4
# ... and only while the maximal violation m - M exceeds this: for a violation v <= 1 the quadratic model with the
# true phi'' is within 2 (e^v - 1 - v) / v^2 <= 1.44 of the entropy's exact gain, so the tail keeps the exact rule
# (capping there too picks near-bound points whose real steps are tiny, and cost steps at tight tolerances).
CAPPED_WHILE_VIOLATION_ABOVE = 1.0
cdef double CAPPED_ABOVE = CAPPED_WHILE_VIOLATION_ABOVE
cdef double TAU_CURVATURE = 1e-12   # LIBSVM's floor for a non-positive pair curvature (KLR's is >= 4 / C > 0)
cdef double EPS = 2.220446049250313e-16
cdef double NEWTON_SETTLED = 1e-9   # a 1-D Newton step below this share of t (and of U - t): the next is below rounding


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
    "phi'(a): log(a / (C - a)) for the entropy term (one log), 0 for the SVM."
    if loss == LOGISTIC:
        return log(a / (C - a))
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


cdef inline double odds_term(double u, double y, double C, bint numerator) noexcept nogil:
    """u or C - u: the numerator (numerator=True) or the denominator of the odds u / (C - u) for y > 0, and of their
    inverse for y < 0."""
    return u if (y > 0) == numerator else C - u


cdef inline double entropy_slope(double t, double ai, double aj, double yi, double yj, double C) noexcept nogil:
    """y_i phi'(a_i + y_i t) - y_j phi'(a_j - y_j t) with one log: each term is the log of an odds ratio or of its
    inverse, so the sum is the log of one product over another."""
    cdef double ui = ai + yi * t, uj = aj - yj * t
    return log((odds_term(ui, yi, C, True) * odds_term(uj, -yj, C, True))
               / (odds_term(ui, yi, C, False) * odds_term(uj, -yj, C, False)))


cdef inline double pair_slope(int loss, double t, double Fi, double Fj, double eta, double ai, double aj,
                              double yi, double yj, double C, double lam) noexcept nogil:
    """d/dt f(a_i + y_i t, a_j - y_j t)
    = (F_i - F_j) + t eta + y_i phi'(a_i + y_i t) - y_j phi'(a_j - y_j t) - lam (y_i - y_j)."""
    if loss == LOGISTIC:
        return (Fi - Fj) + t * eta + entropy_slope(t, ai, aj, yi, yj, C) - lam * (yi - yj)
    return (Fi - Fj) + t * eta - lam * (yi - yj)


cdef double entropy_root(double slope0, double U, double Fi, double Fj, double eta, double ai, double aj,
                         double yi, double yj, double C, double lam, bint* at_end) noexcept nogil:
    """KLR's minimiser along the pair: the root of the slope in (0, U), or the wall U if the slope is still <= 0 there
    (phi' is strictly increasing, so the slope rises from slope0 < 0). Newton from t = 0 inside a bracket that every
    evaluated slope narrows; a Newton step that leaves the bracket is replaced by bisection, and one that points past
    the wall first asks whether the wall is the minimiser. Stops when the Newton step is below NEWTON_SETTLED of t
    and of its distance to the wall (quadratic convergence then leaves the next step below rounding; the curvature
    grows near the wall, so the distance counts too), when the slope is zero to rounding, or when the bracket is one
    rounding wide."""
    cdef double a_left = 0.0, b_right = U, t = 0.0, d = slope0, step, t_new, entropy, noise
    cdef bint wall_checked = False
    cdef int k
    for k in range(200):
        step = -d / (eta + d2phi(LOGISTIC, ai + yi * t, C) + d2phi(LOGISTIC, aj - yj * t, C))
        t_new = t + step
        if t_new >= U and not wall_checked:
            wall_checked = True
            if pair_slope(LOGISTIC, U, Fi, Fj, eta, ai, aj, yi, yj, C, lam) <= 0.0:
                at_end[0] = True
                return U
        if not (a_left < t_new < b_right):
            t_new = 0.5 * (a_left + b_right)
        elif fabs(step) <= NEWTON_SETTLED * fmin(t_new, U - t_new):
            return t_new
        t = t_new
        entropy = entropy_slope(t, ai, aj, yi, yj, C)
        d = (Fi - Fj) + t * eta + entropy - lam * (yi - yj)     # pair_slope's sum, its terms kept for the noise
        noise = 8.0 * EPS * (fabs(Fi) + fabs(Fj) + fabs(t * eta) + fabs(entropy) + fabs(lam * (yi - yj)))
        if fabs(d) <= noise:
            return t
        if d < 0.0:
            a_left = t
        else:
            b_right = t
        if b_right - a_left <= 4.0 * EPS * b_right:
            break
    if b_right == U and not wall_checked and pair_slope(LOGISTIC, U, Fi, Fj, eta, ai, aj, yi, yj, C, lam) <= 0.0:
        at_end[0] = True
        return U
    return t


cdef double solve_pair(int loss, double Fi, double Fj, double Kii, double Kjj, double Kij, double ai, double aj,
                       double yi, double yj, double C, double lam, double lo, double hi, bint* at_end) noexcept nogil:
    """The exact minimiser t* in (0, U] of f along the pair direction (i gains y_i t, j loses y_j t).

    SVM: the clipped Newton step. KLR: the root of the slope, or the wall (entropy_root)."""
    cdef double Ui = (hi - ai) if yi > 0 else (ai - lo)
    cdef double Uj = (aj - lo) if yj > 0 else (hi - aj)
    cdef double U = Ui if Ui < Uj else Uj
    cdef double eta = Kii + Kjj - 2.0 * Kij
    cdef double slope0 = pair_slope(loss, 0.0, Fi, Fj, eta, ai, aj, yi, yj, C, lam)
    cdef double t
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
    return entropy_root(slope0, U, Fi, Fj, eta, ai, aj, yi, yj, C, lam, at_end)


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


cdef inline double up_penalty(double y, double a, double lo, double hi) noexcept nogil:
    "0 for a member of I_up, -inf otherwise: added to a score, it keeps non-members out of the max."
    return 0.0 if in_up(y, a, lo, hi) else -INFINITY


cdef inline double low_penalty(double y, double a, double lo, double hi) noexcept nogil:
    "0 for a member of I_low, +inf otherwise: added to a score, it keeps non-members out of the min."
    return 0.0 if in_low(y, a, lo, hi) else INFINITY


cdef inline void refresh_index(int loss, const double[::1] y, const double[::1] alpha, double C, double lo,
                               double hi, Py_ssize_t k, const double[::1] diag, double curv_cap, double[::1] dphi_a,
                               double[::1] curv, double[::1] curv_capped, double[::1] up_pen,
                               double[::1] low_pen) noexcept nogil:
    """Recompute the per-index state of k after alpha_k moved: phi'(a_k), the selection's curvature K_kk + phi''(a_k)
    and K_kk + min(phi''(a_k), curv_cap), and the membership."""
    cdef double entropy_curvature = d2phi(loss, alpha[k], C)
    dphi_a[k] = dphi(loss, alpha[k], C)
    curv[k] = diag[k] + entropy_curvature
    curv_capped[k] = diag[k] + fmin(entropy_curvature, curv_cap)
    up_pen[k] = up_penalty(y[k], alpha[k], lo, hi)
    low_pen[k] = low_penalty(y[k], alpha[k], lo, hi)


cdef inline int outside_a_set(const double[::1] up_pen, const double[::1] low_pen, Py_ssize_t k) noexcept nogil:
    "1 if k is missing from I_up or from I_low (a non-zero penalty), else 0."
    return 1 if (up_pen[k] != 0.0 or low_pen[k] != 0.0) else 0


cdef klr_extremes scan_scores(const double[::1] y, const double[::1] F, const double[::1] dphi_a,
                              const double[::1] up_pen, const double[::1] low_pen, double lam,
                              double[::1] s) noexcept nogil:
    "Every score s_k into s, and the extremes m (over I_up) and M (over I_low) with their indices."
    cdef Py_ssize_t k, n = y.shape[0]
    for k in range(n):
        s[k] = cached_score(F[k], y[k], dphi_a[k], lam)
    # a zero step: the pass that finds the extremes leaves s as it is (s - 0 (s - s) = s, bit for bit)
    return klr_shift_and_scan(&s[0], &up_pen[0], &low_pen[0], 0.0, &s[0], &s[0], n)


cdef inline double gradient_from_score(double s, double y, double dphi_a, double lam) noexcept nogil:
    "F_k from its score: s_k = -F_k - y_k (phi'(a_k) - lam) solved for F_k."
    return -s - y * (dphi_a - lam)


cdef void gradient_from_scores(const double[::1] s, const double[::1] y, const double[::1] dphi_a, double lam,
                               double[::1] F) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(s.shape[0]):
        F[k] = gradient_from_score(s[k], y[k], dphi_a[k], lam)


def shift_and_scan(double[::1] s, const double[::1] up_pen, const double[::1] low_pen, double t,
                   const double[::1] row_i, const double[::1] row_j, str body=None):
    """The engine's fused pass, from Python (for tests): s -= t (row_i - row_j) in place, then (i, j, m, M), the argmax
    of s + up_pen and the argmin of s + low_pen (the lowest index on ties; -1 with m = -1e300 or M = 1e300 if none).
    up_pen = low_pen = None: every index is in both sets, and the pass without penalties runs (the engine's KLR path)."""
    if (up_pen is None) != (low_pen is None):
        raise ValueError("up_pen and low_pen must both be arrays, or both None (every index in both sets)")
    cdef Py_ssize_t n = _scan_length(s, (row_i, row_j) if up_pen is None else (up_pen, low_pen, row_i, row_j), body)
    cdef int avx2 = body is None or body == "avx2"
    cdef const double* up = NULL
    cdef const double* low = NULL
    cdef klr_extremes e
    if up_pen is not None:
        up, low = &up_pen[0], &low_pen[0]
    with nogil:
        e = klr_shift_and_scan_with(avx2, &s[0], up, low, t, &row_i[0], &row_j[0], n)
    return e.i, e.j, e.m, e.M


def second_order_scan(const double[::1] s, const double[::1] low_pen, const double[::1] curv,
                      const double[::1] row_i, double curv_i, double m, str body=None):
    """The engine's j scan, from Python (for tests): argmax of (m - s_k)^2 / q_k over s_k + low_pen_k < m, with
    q_k = curv_i + curv_k - 2 row_i[k] (1e-12 where q_k <= 0); the lowest index on ties, -1 if none.
    low_pen = None: every index is in I_low, and the pass without penalties runs (the engine's KLR path)."""
    cdef Py_ssize_t n = _scan_length(s, (curv, row_i) if low_pen is None else (low_pen, curv, row_i), body), j
    cdef int avx2 = body is None or body == "avx2"
    cdef const double* low = NULL
    if low_pen is not None:
        low = &low_pen[0]
    with nogil:
        j = klr_second_order_with(avx2, &s[0], low, &curv[0], &row_i[0], curv_i, m, TAU_CURVATURE, n)
    return j


def pair_minimiser(str loss, double Fi, double Fj, double Kii, double Kjj, double Kij, double ai, double aj,
                   double yi, double yj, double C, double lam, double lo, double hi):
    """The engine's exact step on one pair, from Python (for tests): (t, whether it ends on a bound), t minimising f
    along a_i + y_i t, a_j - y_j t over [0, U]."""
    if loss not in LOSS_CODES:
        raise ValueError(f"loss={loss!r}; accepted values: {', '.join(map(repr, LOSS_CODES))}")
    if not (lo < ai < hi or loss == "hinge") or not (lo < aj < hi or loss == "hinge") or yi * yi != 1 or yj * yj != 1:
        raise ValueError("the pair must be feasible: labels in {-1, +1}, KLR's alphas inside (lo, hi)")
    cdef bint at_end = False
    t = solve_pair(LOSS_CODES[loss], Fi, Fj, Kii, Kjj, Kij, ai, aj, yi, yj, C, lam, lo, hi, &at_end)
    return t, bool(at_end)


def _scan_length(s, others, body) -> int:
    if body is not None and body not in SCAN_BODIES:
        raise ValueError(f"body={body!r}; this CPU runs {', '.join(map(repr, SCAN_BODIES))} (None: the fastest)")
    if len(s) == 0 or any(len(a) != len(s) for a in others):
        raise ValueError("the arrays must be non-empty and of one length")
    return len(s)


def init_gradient(KernelCache cache, const double[::1] y, const double[::1] alpha, double[::1] F):
    "F_i = sum_j alpha_j y_j K_ij: one BLAS product when every row is cached, else one cached row per non-zero alpha_j."
    cdef Py_ssize_t n = y.shape[0], i
    if cache.n_samples != n or alpha.shape[0] != n or F.shape[0] != n:
        raise ValueError("cache, y, alpha and F must have the same number of samples")
    weights = np.empty(n)
    cdef double[::1] c = weights
    with nogil:
        for i in range(n):
            c[i] = alpha[i] * y[i]
        cache.combine_rows(&c[0], &F[0])


def certify(KernelCache cache, int loss, const double[::1] y, const double[::1] alpha, double[::1] F, double C,
            double lam, double lo, double hi):
    """The certificate of `alpha`, computed afresh: F = K (alpha y) from the kernel rows (not the loop's incremental F),
    the scores s_k = -F_k - y_k (phi'(a_k) - lam), m = max over I_up, M = min over I_low, and the bias (the mean score
    over the free alpha, else the midpoint of m and M). Returns (m - M, bias, m, M), m or M None when its set is empty
    (the gap is then 0). The compiled twin of klrlab.dual's score_extremes and dual_bias (one pass instead of a dozen
    array operations, which cost more than a small warm-started solve); phi' is log(a) - log(C - a) as there."""
    cdef Py_ssize_t n = y.shape[0], k
    cdef double a, yk, sk, phi_prime, m = -INFINITY, M = INFINITY, free_sum = 0.0
    cdef Py_ssize_t n_free = 0
    cdef bint has_up = False, has_low = False
    init_gradient(cache, y, alpha, F)
    with nogil:
        for k in range(n):
            a, yk = alpha[k], y[k]
            phi_prime = log(a) - log(C - a) if loss == LOGISTIC else 0.0
            sk = -F[k] - yk * (phi_prime - lam)
            if in_up(yk, a, lo, hi):
                has_up = True
                if sk > m: m = sk
            if in_low(yk, a, lo, hi):
                has_low = True
                if sk < M: M = sk
            if lo < a < hi:
                free_sum += sk
                n_free += 1
    m_or_none = m if has_up else None
    M_or_none = M if has_low else None
    gap = m - M if has_up and has_low else 0.0
    bias = free_sum / n_free if n_free else ((m if has_up else 0.0) + (M if has_low else 0.0)) / 2
    return gap, bias, m_or_none, M_or_none


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


def selection_curvature_cap(diag) -> float:
    """'second-capped''s bound on phi''(a_k) in the selection's curvature: SELECTION_CURVATURE_CAP times the mean
    kernel diagonal (the kernel's own curvature scale), or inf (no cap) when that mean is not positive."""
    mean = float(np.mean(diag))
    return SELECTION_CURVATURE_CAP * mean if mean > 0.0 else INFINITY


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
    cdef klr_extremes e
    cdef bint record = trace_gap is not None
    cdef bint timed = phase_seconds is not None
    cdef double clock = 0.0
    cdef double[::1] diag = cache.diag_values
    cdef double curv_cap = selection_curvature_cap(diag) if wss == WSS_SECOND_CAPPED else INFINITY
    if cache.n_samples != n or alpha.shape[0] != n or F.shape[0] != n:
        raise ValueError("cache, y, alpha and F must have the same number of samples")
    if wss not in WSS_CODES.values():
        raise ValueError(f"wss={wss!r}; accepted codes: {WSS_CODES}")
    if timed and phase_seconds.shape[0] != len(PHASES):
        raise ValueError(f"phase_seconds must hold {len(PHASES)} entries, one per phase: {PHASES}")
    if record and (trace_step is None or trace_pairs is None or trace_objective is None
                   or trace_gap.shape[0] < max_iter + 1 or trace_step.shape[0] < max_iter + 1
                   or trace_objective.shape[0] < max_iter + 1 or trace_pairs.shape[0] < 2 * (max_iter + 1)):
        raise ValueError("trace arrays must hold max_iter + 1 entries")
    # Per-index state that changes only at the two indices a step moves (two logs per point per iteration would
    # otherwise dominate the scan): phi'(a_k); the selection's curvature K_kk + phi''(a_k), and its capped twin that
    # 'second-capped' rates pairs with while m - M > CAPPED_WHILE_VIOLATION_ABOVE; and the I_up / I_low membership, as
    # penalties added to the scores. The loop keeps the scores s_k, not F: F_k = -s_k - y_k (phi'(a_k) - lam) is
    # recovered where it is needed (the pair, the end).
    dphi_buffer, curv_buffer, capped_buffer, score_buffer, up_buffer, low_buffer = (np.empty(n) for _ in range(6))
    cdef double[::1] dphi_a = dphi_buffer
    cdef double[::1] curv = curv_buffer
    cdef double[::1] curv_capped = capped_buffer
    cdef const double* rating_curv
    cdef double[::1] s = score_buffer
    cdef double[::1] up_pen = up_buffer
    cdef double[::1] low_pen = low_buffer
    cdef double dphi_i, dphi_j
    # the indices missing from I_up or I_low; while there are none (KLR inside its box) the passes skip the penalties
    cdef Py_ssize_t n_outside = 0
    cdef const double* up_or_none
    cdef const double* low_or_none
    with nogil:
        for k in range(n):
            refresh_index(loss, y, alpha, C, lo, hi, k, diag, curv_cap, dphi_a, curv, curv_capped, up_pen, low_pen)
            n_outside += outside_a_set(up_pen, low_pen, k)
        up_or_none = &up_pen[0] if n_outside else NULL
        low_or_none = &low_pen[0] if n_outside else NULL
        e = scan_scores(y, F, dphi_a, up_pen, low_pen, lam, s)
        while True:
            # the maximal violating pair: i = argmax_{I_up} s, j = argmin_{I_low} s (Keerthi et al.; Chen et al.)
            gap = e.m - e.M if (e.i >= 0 and e.j >= 0) else 0.0
            if record:
                trace_gap[it] = gap
                gradient_from_scores(s, y, dphi_a, lam, F)
                trace_objective[it] = objective_nogil(loss, y, alpha, F, C, lam)
            if gap != gap:       # NaN scores (values beyond float64): no pair can be trusted
                status = 2
                break
            if gap <= tol:
                status = 0
                break
            if it >= max_iter:
                status = 1
                break
            i, j = e.i, e.j
            if timed:
                clock = now()
            if wss != WSS_FIRST:
                row_i = cache.row(i)
                if timed:
                    lap(&clock, phase_seconds, 1)
                rating_curv = &curv_capped[0] if gap > CAPPED_ABOVE else &curv[0]
                j = klr_second_order(&s[0], low_or_none, rating_curv, row_i, rating_curv[i], e.m, TAU_CURVATURE, n)
                if j < 0:        # no finite second-order gain (infinite curvatures): the maximal violating pair's j
                    j = e.j
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
            n_outside -= outside_a_set(up_pen, low_pen, i) + outside_a_set(up_pen, low_pen, j)
            refresh_index(loss, y, alpha, C, lo, hi, i, diag, curv_cap, dphi_a, curv, curv_capped, up_pen, low_pen)
            refresh_index(loss, y, alpha, C, lo, hi, j, diag, curv_cap, dphi_a, curv, curv_capped, up_pen, low_pen)
            n_outside += outside_a_set(up_pen, low_pen, i) + outside_a_set(up_pen, low_pen, j)
            up_or_none = &up_pen[0] if n_outside else NULL
            low_or_none = &low_pen[0] if n_outside else NULL
            s[i] -= y[i] * (dphi_a[i] - dphi_i)   # the scores' share of phi' moving at i and j
            s[j] -= y[j] * (dphi_a[j] - dphi_j)
            # s -= t (K_i - K_j), the scores' share of F += t (K_i - K_j), fused with the next selection's scan
            e = klr_shift_and_scan(&s[0], up_or_none, low_or_none, step.t, step.row_i, step.row_j, n)
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
