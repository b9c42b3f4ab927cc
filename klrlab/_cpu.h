/* Which builds of klrlab's vectorised loops this CPU can run (hand-written, included by the C headers beside the .pyx
   files). Each loop is compiled twice, for AVX2 and for the baseline instruction set, where the compiler can target
   AVX2 (GCC or Clang on x86); the AVX2 build runs when the CPU has it, asked once. */
#ifndef KLRLAB_CPU_H
#define KLRLAB_CPU_H

#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
#define KLR_AVX2_BUILDS 1
#else
#define KLR_AVX2_BUILDS 0
#endif

static int klr_cpu_avx2 = -1;   /* -1 until the first call asks the CPU */

/* Whether the AVX2 builds can run here: compiled, and the CPU has AVX2. */
static inline int klr_avx2_available(void) {
#if KLR_AVX2_BUILDS
    if (klr_cpu_avx2 < 0) {
        __builtin_cpu_init();
        klr_cpu_avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    }
    return klr_cpu_avx2;
#else
    return 0;
#endif
}

#endif
