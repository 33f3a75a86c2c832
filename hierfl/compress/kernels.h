/* What kernels.c and topk.c share: the magnitude patterns, draws.py's hashes, the AVX2
 * switch and topk.c's row selection. */
#ifndef HIERFL_KERNELS_H
#define HIERFL_KERNELS_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SIMD_X86 1
#endif

#define NAN_BITS 0x7F800000u        /* above: a NaN's pattern (|x| has its sign bit clear) */

/* |v|'s bit pattern: monotonic in |v| for non-negative floats, a NaN's above infinity's. */
static inline uint32_t mag(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u & 0x7FFFFFFFu;
}

/* draws.py: _mix_tail, and the counters 0..p-1 spread and xor-shifted (_counters). */
static inline uint32_t mix_tail(uint32_t h) {
    h *= 0x21F0AAADu;
    h ^= h >> 15;
    h *= 0x735A2D97u;
    return h;
}

static inline uint32_t spread(uint32_t c) {
    c *= 0x9E3779B1u;
    return c ^ (c >> 16);
}

/* draws.Draws' row of sender s under key: _mix(s * golden + key), xor-shifted. */
static inline uint32_t row_hash(uint32_t key, int64_t sender) {
    uint32_t h = (uint32_t)sender * 0x9E3779B1u + key;
    h ^= h >> 16;
    h = mix_tail(h);
    return h ^ (h >> 16);
}

/* Whether the AVX2 paths are on (kernels.c: hierfl_kernels_simd). */
int hierfl_use_simd(void);

/* A row's k largest |x| (select.py's set, ascending coordinates) into out (k entries); 0, or
 * -1 where the row ties for the last place or its k-th largest is a NaN (torch.topk's own
 * choice: the torch path does it). `buf`: 3 p + k + 16 words. */
int hierfl_topk_row(const float *row, int64_t p, int64_t k, int64_t *out, uint32_t *buf);

#endif
