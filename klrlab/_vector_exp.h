/* exp(x) over an array, in place, for the kernel rows (hand-written, used by _kernels.pyx).

   A row of the RBF or Laplacian kernel is n exponentials. libm's exp takes one at a time, which makes it most of a
   row's cost once the inner products go through BLAS; this loop takes a vector of them per step. The method is the
   textbook one: x = k ln 2 + r with k the nearest integer to x / ln 2 and |r| <= ln 2 / 2 (ln 2 split in two parts,
   Cody and Waite, so r carries no rounding from the product), exp(r) by its Taylor polynomial of degree 13 (the
   remainder is below 1e-17 relative) evaluated by Estrin's scheme (short dependency chains: twice Horner's speed
   here), then the factor 2^k written into the exponent bits. It is within two units in the last place of the
   correctly rounded value (tested against Python's math.exp). Arguments whose result would
   be subnormal, zero, infinite or NaN (outside [-708, 709]) are passed to libm's exp one by one, so those edge
   cases are libm's. Compiled twice, for AVX2 and the baseline instruction set, bit-identical (no FMA), the AVX2
   build chosen at run time as for the SMO scans. */
#ifndef KLRLAB_VECTOR_EXP_H
#define KLRLAB_VECTOR_EXP_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "_cpu.h"

#define KLR_EXP_LOW -708.0    /* below: exp(x) is subnormal or zero */
#define KLR_EXP_HIGH 709.0    /* above: exp(x) is near or beyond the largest double */

/* p = exp(r): Estrin's scheme on the Taylor coefficients (shorter dependency chains than Horner). */
#define KLR_EXP_POLY(T, p, r)                                                                                       \
    {                                                                                                               \
        T r2 = (r) * (r), r4, r8, a0, a1, a2, a3, a4, a5, a6, b0, b1, b2, b3, c0, c1;                  \
        r4 = r2 * r2; r8 = r4 * r4;                                                                                 \
        a0 = 1.0 + (r);                                                                                             \
        a1 = 0.5 + (r) * (1.0 / 6.0);                                                                               \
        a2 = 1.0 / 24.0 + (r) * (1.0 / 120.0);                                                                      \
        a3 = 1.0 / 720.0 + (r) * (1.0 / 5040.0);                                                                    \
        a4 = 1.0 / 40320.0 + (r) * (1.0 / 362880.0);                                                                \
        a5 = 1.0 / 3628800.0 + (r) * (1.0 / 39916800.0);                                                            \
        a6 = 1.0 / 479001600.0 + (r) * (1.0 / 6227020800.0);                                                        \
        b0 = a0 + r2 * a1; b1 = a2 + r2 * a3; b2 = a4 + r2 * a5; b3 = a6;                                           \
        c0 = b0 + r4 * b1; c1 = b2 + r4 * b3;                                                                       \
        p = c0 + r8 * c1;                                                                                           \
    }

static const double klr_log2e = 1.4426950408889634;        /* 1 / ln 2 */
static const double klr_ln2_hi = 0.693147180369123816490;   /* ln 2, its leading 32 bits: k * hi is exact */
static const double klr_ln2_lo = 1.90821492927058770002e-10; /* ln 2 - hi */
static const double klr_round_magic = 6755399441055744.0;    /* 1.5 * 2^52: adding it rounds to an integer k, */
static const int64_t klr_round_magic_bits = 0x4338000000000000LL; /* whose bits it then holds: bits(t) - bits(magic) = k */

/* One point, as the vector body computes each lane (also the tail of the vector loop). */
static inline double klr_exp_one(double x) {
    double t, k, r, p, scale;
    int64_t bits;
    if (!(x >= KLR_EXP_LOW && x <= KLR_EXP_HIGH)) return exp(x);
    t = x * klr_log2e + klr_round_magic;
    k = t - klr_round_magic;
    r = (x - k * klr_ln2_hi) - k * klr_ln2_lo;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits - klr_round_magic_bits + 1023) << 52;
    memcpy(&scale, &bits, sizeof scale);
    KLR_EXP_POLY(double, p, r)
    return p * scale;
}

#if defined(__GNUC__) || defined(__clang__)
#define KLR_EXP_BODY(NAME, W, ATTR)                                                                                 \
    typedef double NAME##_vd __attribute__((vector_size((W) * 8)));                                                \
    typedef int64_t NAME##_vi __attribute__((vector_size((W) * 8)));                                               \
    ATTR static void NAME(double *x, ptrdiff_t n) {                                                                 \
        NAME##_vd v, t, k, r, p, scale;                                                                             \
        NAME##_vi inside, bits, all_inside;                                                                         \
        ptrdiff_t i, l, stop = n - n % (W);                                                                         \
        for (i = 0; i < stop; i += (W)) {                                                                           \
            memcpy(&v, x + i, sizeof v);                                                                            \
            inside = (v >= KLR_EXP_LOW) & (v <= KLR_EXP_HIGH);                                                      \
            all_inside = inside;                                                                                    \
            for (l = 1; l < (W); l++) all_inside[0] &= inside[l];                                                   \
            if (!all_inside[0]) {          /* an edge case in this vector: libm, one point at a time */            \
                for (l = 0; l < (W); l++) x[i + l] = klr_exp_one(x[i + l]);                                         \
                continue;                                                                                           \
            }                                                                                                       \
            t = v * klr_log2e + klr_round_magic;                                                                    \
            k = t - klr_round_magic;                                                                                \
            r = (v - k * klr_ln2_hi) - k * klr_ln2_lo;                                                              \
            memcpy(&bits, &t, sizeof bits);                                                                         \
            bits = (bits - klr_round_magic_bits + 1023) << 52;                                                      \
            memcpy(&scale, &bits, sizeof scale);                                                                    \
            KLR_EXP_POLY(NAME##_vd, p, r)                                                                           \
            p *= scale;                                                                                             \
            memcpy(x + i, &p, sizeof p);                                                                            \
        }                                                                                                           \
        for (i = stop; i < n; i++) x[i] = klr_exp_one(x[i]);                                                        \
    }
#endif

#if KLR_AVX2_BUILDS
KLR_EXP_BODY(klr_exp_avx2, 4, __attribute__((target("avx2"))))
#endif

#if defined(__GNUC__) || defined(__clang__)
KLR_EXP_BODY(klr_exp_base, 2, )
#else
static void klr_exp_base(double *x, ptrdiff_t n) {
    ptrdiff_t i;
    for (i = 0; i < n; i++) x[i] = klr_exp_one(x[i]);
}
#endif

/* exp of x[0..n-1] in place, by the build chosen (avx2 != 0: the AVX2 one where it can run). */
static inline void klr_exp_inplace_with(int avx2, double *x, ptrdiff_t n) {
#if KLR_AVX2_BUILDS
    if (avx2 && klr_avx2_available()) { klr_exp_avx2(x, n); return; }
#endif
    klr_exp_base(x, n);
}

/* exp of x[0..n-1] in place, by the fastest build this CPU runs. */
static inline void klr_exp_inplace(double *x, ptrdiff_t n) { klr_exp_inplace_with(1, x, n); }

#endif
