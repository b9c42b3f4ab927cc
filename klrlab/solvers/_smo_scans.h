/* The SMO engine's two O(n) passes per step, written for the CPU's vector unit (hand-written, used by _smo.pyx).

   GCC and Clang do not vectorise an argmax that keeps its index, so these loops keep one running best per vector
   lane (value and index) with branch-free selects, and reduce the lanes at the end, ties to the lowest index: the
   same answer as the scalar loop, bit for bit, whatever the vector width. Membership of I_up / I_low enters as
   additive penalties (0 or -inf / +inf), so a non-member can never win; while every index belongs to both sets (KLR's
   alphas inside the box), a body without the penalties skips their loads. Each pass is compiled twice: for AVX2 and
   for the baseline x86-64 (SSE2) or any other target; the AVX2 body is chosen at run time when the CPU has it.
   No FMA is enabled, so both bodies round every operation alike. */
#ifndef KLRLAB_SMO_SCANS_H
#define KLRLAB_SMO_SCANS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../_cpu.h"

typedef struct {
    ptrdiff_t i;   /* argmax of the score over I_up (-1: empty) */
    ptrdiff_t j;   /* argmin of the score over I_low (-1: empty) */
    double m;      /* the max, and the min (-1e300 / +1e300 when empty) */
    double M;
} klr_extremes;

/* ---- the loop bodies, written once for a vector of W doubles ------------------------------------------------- */

#define KLR_LANE_TYPES(W, VD, VI)                                                                                   \
    typedef double VD __attribute__((vector_size((W) * 8)));                                                       \
    typedef int64_t VI __attribute__((vector_size((W) * 8)));

/* a <- b where mask, for doubles and for indices (masks are all-ones or all-zeros per lane) */
#define KLR_SELECT_D(VD, VI, mask, b, a) ((VD)(((mask) & (VI)(b)) | (~(mask) & (VI)(a))))
#define KLR_SELECT_I(mask, b, a) (((mask) & (b)) | (~(mask) & (a)))
#define KLR_LOAD(VD, dst, src) memcpy(&(dst), (src), sizeof(VD))
/* Each pass streams one kernel row of n doubles (40-400 KB) that is rarely in cache; the hardware prefetcher ramps up
   slowly on a new stream, so the pass was bound by memory latency, well below the bandwidth. Asking for the row's
   head at the start and for the line AHEAD doubles in front of each load keeps the requests in flight. Prefetches
   are hints: the arithmetic, and so every result, is unchanged. Building with -DKLR_PREFETCH_AHEAD=0 leaves them out
   (for a before/after profile). */
#ifndef KLR_PREFETCH_AHEAD
#define KLR_PREFETCH_AHEAD 256
#endif
#define KLR_PREFETCH_HEAD(row, n)                                                                                   \
    do {                                                                                                            \
        ptrdiff_t h_;                                                                                               \
        for (h_ = 0; h_ < KLR_PREFETCH_AHEAD && h_ < (n); h_ += 8) __builtin_prefetch((row) + h_, 0, 3);          \
    } while (0)
#define KLR_PREFETCH(row, k, n)                                                                                     \
    do {                                                                                                            \
        if (KLR_PREFETCH_AHEAD > 0 && (k) + KLR_PREFETCH_AHEAD < (n))                                              \
            __builtin_prefetch((row) + (k) + KLR_PREFETCH_AHEAD, 0, 3);                                             \
    } while (0)

/* s -= t (row_i - row_j), and the extremes of the new scores: max over I_up, min over I_low. The rows may be s
   itself (with t = 0: the extremes of s alone); each block is read before it is written. */
#define KLR_SHIFT_AND_SCAN(NAME, W, ATTR, PENALTIES)                                                                \
    KLR_LANE_TYPES(W, NAME##_vd, NAME##_vi)                                                                         \
    ATTR static klr_extremes NAME(double *s, const double *up_pen, const double *low_pen, double t,                \
                                  const double *row_i, const double *row_j, ptrdiff_t n) {                          \
        NAME##_vd best_up, best_low, tv, v, a, b, c, up, low;                                                       \
        NAME##_vi arg_up, arg_low, index, gt, lt;                                                                   \
        klr_extremes e = {-1, -1, -1e300, 1e300};                                                                   \
        ptrdiff_t k, l, stop = n - n % (W);                                                                         \
        KLR_PREFETCH_HEAD(row_j, n); KLR_PREFETCH_HEAD(row_i, n);                                                  \
        for (l = 0; l < (W); l++) {                                                                                 \
            best_up[l] = -1e300; best_low[l] = 1e300; arg_up[l] = -1; arg_low[l] = -1; index[l] = l; tv[l] = t;   \
        }                                                                                                           \
        for (k = 0; k < stop; k += (W)) {                                                                           \
            KLR_PREFETCH(row_i, k, n); KLR_PREFETCH(row_j, k, n);                                                   \
            KLR_LOAD(NAME##_vd, a, s + k); KLR_LOAD(NAME##_vd, b, row_i + k); KLR_LOAD(NAME##_vd, c, row_j + k);  \
            v = a - tv * (b - c);                                                                                   \
            memcpy(s + k, &v, sizeof v);                                                                            \
            if (PENALTIES) {                                                                                        \
                KLR_LOAD(NAME##_vd, a, up_pen + k); KLR_LOAD(NAME##_vd, b, low_pen + k);                          \
                up = v + a; low = v + b;                                                                            \
            } else {                                                                                                \
                up = v; low = v;                                                                                    \
            }                                                                                                       \
            gt = up > best_up; lt = low < best_low;                                                                 \
            best_up = KLR_SELECT_D(NAME##_vd, NAME##_vi, gt, up, best_up);                                          \
            arg_up = KLR_SELECT_I(gt, index, arg_up);                                                               \
            best_low = KLR_SELECT_D(NAME##_vd, NAME##_vi, lt, low, best_low);                                       \
            arg_low = KLR_SELECT_I(lt, index, arg_low);                                                             \
            index += (W);                                                                                           \
        }                                                                                                           \
        for (l = 0; l < (W); l++) {                                                                                 \
            if (arg_up[l] >= 0 && (best_up[l] > e.m || (best_up[l] == e.m && arg_up[l] < e.i))) {                  \
                e.m = best_up[l]; e.i = arg_up[l];                                                                  \
            }                                                                                                       \
            if (arg_low[l] >= 0 && (best_low[l] < e.M || (best_low[l] == e.M && arg_low[l] < e.j))) {              \
                e.M = best_low[l]; e.j = arg_low[l];                                                                \
            }                                                                                                       \
        }                                                                                                           \
        for (k = stop; k < n; k++) {                                                                                \
            double value = s[k] - t * (row_i[k] - row_j[k]);                                                        \
            s[k] = value;                                                                                           \
            double up_value = PENALTIES ? value + up_pen[k] : value;                                                \
            double low_value = PENALTIES ? value + low_pen[k] : value;                                              \
            if (up_value > e.m) { e.m = up_value; e.i = k; }                                                        \
            if (low_value < e.M) { e.M = low_value; e.j = k; }                                                      \
        }                                                                                                           \
        return e;                                                                                                   \
    }

/* j = argmax over the violating I_low of v^2 / q, v = m - s_k > 0, q = curv_i + curv_k - 2 K_ik (tau if q <= 0);
   -1 if no index violates. The ratio is divided out per point (a vector division is cheap), so its order is exact. */
#define KLR_SECOND_ORDER(NAME, W, ATTR, PENALTIES)                                                                  \
    KLR_LANE_TYPES(W, NAME##_vd, NAME##_vi)                                                                         \
    ATTR static ptrdiff_t NAME(const double *restrict s, const double *restrict low_pen,                           \
                               const double *restrict curv, const double *restrict row_i, double curv_i,           \
                               double m, double tau, ptrdiff_t n) {                                                 \
        NAME##_vd best, mv, civ, tauv, a, b, c, v, q, ratio;                                                        \
        NAME##_vi arg, index, ok;                                                                                   \
        ptrdiff_t k, l, j = -1, stop = n - n % (W);                                                                 \
        double top = 0.0;                                                                                           \
        KLR_PREFETCH_HEAD(row_i, n);                                                                                \
        for (l = 0; l < (W); l++) {                                                                                 \
            best[l] = 0.0; arg[l] = -1; index[l] = l; mv[l] = m; civ[l] = curv_i; tauv[l] = tau;                  \
        }                                                                                                           \
        for (k = 0; k < stop; k += (W)) {                                                                           \
            KLR_LOAD(NAME##_vd, a, s + k);                                                                          \
            if (PENALTIES) {                                                                                        \
                KLR_LOAD(NAME##_vd, b, low_pen + k);                                                                \
                v = mv - (a + b);                                                                                   \
            } else {                                                                                                \
                v = mv - a;                                                                                         \
            }                                                                                                       \
            KLR_PREFETCH(row_i, k, n);                                                                              \
            KLR_LOAD(NAME##_vd, a, curv + k); KLR_LOAD(NAME##_vd, c, row_i + k);                                  \
            q = civ + a - 2.0 * c;                                                                                  \
            q = KLR_SELECT_D(NAME##_vd, NAME##_vi, q > 0.0, q, tauv);                                              \
            ratio = v * v / q;                                                                                      \
            ok = (v > 0.0) & (ratio > best);                                                                        \
            best = KLR_SELECT_D(NAME##_vd, NAME##_vi, ok, ratio, best);                                             \
            arg = KLR_SELECT_I(ok, index, arg);                                                                     \
            index += (W);                                                                                           \
        }                                                                                                           \
        for (l = 0; l < (W); l++) {                                                                                 \
            if (arg[l] >= 0 && (best[l] > top || (best[l] == top && arg[l] < j))) { top = best[l]; j = arg[l]; }  \
        }                                                                                                           \
        for (k = stop; k < n; k++) {                                                                                \
            double value = m - (PENALTIES ? s[k] + low_pen[k] : s[k]);                                              \
            double curvature = curv_i + curv[k] - 2.0 * row_i[k], r;                                                \
            if (!(value > 0.0)) continue;                                                                           \
            if (!(curvature > 0.0)) curvature = tau;                                                                \
            r = value * value / curvature;                                                                          \
            if (r > top) { top = r; j = k; }                                                                        \
        }                                                                                                           \
        return j;                                                                                                   \
    }

/* ---- two builds of each body, and the choice between them ----------------------------------------------------- */

#if KLR_AVX2_BUILDS
KLR_SHIFT_AND_SCAN(klr_shift_and_scan_avx2, 4, __attribute__((target("avx2"))), 1)
KLR_SECOND_ORDER(klr_second_order_avx2, 4, __attribute__((target("avx2"))), 1)
KLR_SHIFT_AND_SCAN(klr_shift_and_scan_all_avx2, 4, __attribute__((target("avx2"))), 0)
KLR_SECOND_ORDER(klr_second_order_all_avx2, 4, __attribute__((target("avx2"))), 0)
#endif
#if defined(__GNUC__) || defined(__clang__)
KLR_SHIFT_AND_SCAN(klr_shift_and_scan_base, 2, , 1)
KLR_SECOND_ORDER(klr_second_order_base, 2, , 1)
KLR_SHIFT_AND_SCAN(klr_shift_and_scan_all_base, 2, , 0)
KLR_SECOND_ORDER(klr_second_order_all_base, 2, , 0)
#else
/* Compilers without GCC's vector extensions: the same passes, one point at a time. */
static klr_extremes klr_shift_and_scan_base(double *s, const double *up_pen, const double *low_pen, double t,
                                            const double *row_i, const double *row_j, ptrdiff_t n) {
    klr_extremes e = {-1, -1, -1e300, 1e300};
    ptrdiff_t k;
    for (k = 0; k < n; k++) {
        double value = s[k] - t * (row_i[k] - row_j[k]);
        s[k] = value;
        double up_value = up_pen ? value + up_pen[k] : value, low_value = low_pen ? value + low_pen[k] : value;
        if (up_value > e.m) { e.m = up_value; e.i = k; }
        if (low_value < e.M) { e.M = low_value; e.j = k; }
    }
    return e;
}

static ptrdiff_t klr_second_order_base(const double *s, const double *low_pen, const double *curv,
                                       const double *row_i, double curv_i, double m, double tau, ptrdiff_t n) {
    ptrdiff_t k, j = -1;
    double top = 0.0;
    for (k = 0; k < n; k++) {
        double value = m - (low_pen ? s[k] + low_pen[k] : s[k]), curvature = curv_i + curv[k] - 2.0 * row_i[k], r;
        if (!(value > 0.0)) continue;
        if (!(curvature > 0.0)) curvature = tau;
        r = value * value / curvature;
        if (r > top) { top = r; j = k; }
    }
    return j;
}
#endif

/* The passes with the body chosen: avx2 != 0 asks for the AVX2 body (the baseline one where it cannot run). NULL
   penalties (both of them in the fused pass) say that every index belongs to I_up and I_low, as every KLR alpha does
   while it is inside the box: the pass then reads no penalties, with the same result (adding 0 changes no score). */
static inline klr_extremes klr_shift_and_scan_with(int avx2, double *s, const double *up_pen, const double *low_pen,
                                                   double t, const double *row_i, const double *row_j, ptrdiff_t n) {
#if KLR_AVX2_BUILDS
    if (avx2 && klr_avx2_available())
        return up_pen ? klr_shift_and_scan_avx2(s, up_pen, low_pen, t, row_i, row_j, n)
                      : klr_shift_and_scan_all_avx2(s, up_pen, low_pen, t, row_i, row_j, n);
#endif
#if defined(__GNUC__) || defined(__clang__)
    if (!up_pen) return klr_shift_and_scan_all_base(s, up_pen, low_pen, t, row_i, row_j, n);
#endif
    return klr_shift_and_scan_base(s, up_pen, low_pen, t, row_i, row_j, n);
}

static inline ptrdiff_t klr_second_order_with(int avx2, const double *s, const double *low_pen, const double *curv,
                                              const double *row_i, double curv_i, double m, double tau, ptrdiff_t n) {
#if KLR_AVX2_BUILDS
    if (avx2 && klr_avx2_available())
        return low_pen ? klr_second_order_avx2(s, low_pen, curv, row_i, curv_i, m, tau, n)
                       : klr_second_order_all_avx2(s, low_pen, curv, row_i, curv_i, m, tau, n);
#endif
#if defined(__GNUC__) || defined(__clang__)
    if (!low_pen) return klr_second_order_all_base(s, low_pen, curv, row_i, curv_i, m, tau, n);
#endif
    return klr_second_order_base(s, low_pen, curv, row_i, curv_i, m, tau, n);
}

/* The engine's passes: the fastest body this CPU runs. */
static inline klr_extremes klr_shift_and_scan(double *s, const double *up_pen, const double *low_pen, double t,
                                              const double *row_i, const double *row_j, ptrdiff_t n) {
    return klr_shift_and_scan_with(1, s, up_pen, low_pen, t, row_i, row_j, n);
}

static inline ptrdiff_t klr_second_order(const double *s, const double *low_pen, const double *curv,
                                         const double *row_i, double curv_i, double m, double tau, ptrdiff_t n) {
    return klr_second_order_with(1, s, low_pen, curv, row_i, curv_i, m, tau, n);
}

#endif
