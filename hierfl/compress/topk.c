/* Top-k's selection for kernels.c: each row's k largest |x|, the set select.py (and
 * torch.topk) picks, found from a lower bound on the k-th largest that leaves a few dozen
 * candidates. */
#include "kernels.h"

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The value at place `want` of buf[0..p-1] sorted ascending (buf is reordered): a quickselect
 * with a three-way partition (many equal values, such as zeros, cost one pass) and a median of
 * three; after 64 rounds the range left is sorted instead (no quadratic worst case). */
static uint32_t select_at(uint32_t *buf, int64_t p, int64_t want) {
    int64_t lo = 0, hi = p - 1;
    for (int rounds = 0; lo < hi; rounds++) {
        if (rounds == 64) {
            qsort(buf + lo, (size_t)(hi - lo + 1), sizeof *buf, cmp_u32);
            break;
        }
        uint32_t a = buf[lo], b = buf[lo + (hi - lo) / 2], c = buf[hi];
        uint32_t piv = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t lt = lo, i = lo, gt = hi;
        while (i <= gt) {
            uint32_t v = buf[i];
            if (v < piv) { buf[i] = buf[lt]; buf[lt++] = v; i++; }
            else if (v > piv) { buf[i] = buf[gt]; buf[gt--] = v; }
            else i++;
        }
        if (want < lt) hi = lt - 1;
        else if (want > gt) lo = gt + 1;
        else return piv;
    }
    return buf[want];
}

#define BLOCK 8                     /* entries per block of a row's block maxima */
#define INSERT_MAX_K 16             /* a sorted top k up to this k, a quickselect above */

/* The k-th largest of v[0..count-1] (count >= k; v is reordered). Up to INSERT_MAX_K: a sorted
 * list of the k largest so far, seeded with k zeros (the least pattern: the k-th largest of k
 * or more values stays as it is), a value joining only when it beats the least (the callers
 * hand a few dozen); above: a quickselect. `top`: k words. */
static uint32_t kth_largest(uint32_t *v_, int64_t count, int64_t k, uint32_t *top) {
    if (k > INSERT_MAX_K) return select_at(v_, count, count - k);
    memset(top, 0, (size_t)k * sizeof *top);
    uint32_t least = 0;
    for (int64_t j = 0; j < count; j++) {
        uint32_t v = v_[j];
        if (v <= least) continue;
        int64_t t = k - 1;                       /* top[] descending: shift the smaller down */
        while (t > 0 && top[t - 1] < v) { top[t] = top[t - 1]; t--; }
        top[t] = v;
        least = top[k - 1];
    }
    return top[k - 1];
}

/* The largest |x| pattern of each BLOCK entries of row (the last block may be short). */
static void block_maxima(const float *row, int64_t p, uint32_t *most) {
    int64_t whole = p / BLOCK;
    for (int64_t b = 0; b < whole; b++) {
        const float *at = row + b * BLOCK;
        int32_t high = 0;                       /* patterns of |x| are >= 0 as int32 too */
        for (int j = 0; j < BLOCK; j++) {
            int32_t v = (int32_t)mag(at[j]);
            high = v > high ? v : high;
        }
        most[b] = (uint32_t)high;
    }
    if (whole * BLOCK < p) {
        int32_t high = 0;
        for (int64_t j = whole * BLOCK; j < p; j++) {
            int32_t v = (int32_t)mag(row[j]);
            high = v > high ? v : high;
        }
        most[whole] = (uint32_t)high;
    }
}

#ifdef SIMD_X86
#define LANE_MAX_K 64               /* the AVX2 row up to this k */
#define SPARE 64                    /* candidates past k it keeps (more: the portable row) */

/* hierfl_topk_row with AVX2 (k <= LANE_MAX_K, p >= 8). Each of the 8 lanes keeps its j =
 * ceil(k / 8) largest patterns (a min/max network: no branch); those 8 j values are distinct
 * entries, so the k-th largest of them is at most the row's k-th largest (a dozen entries or
 * so reach it). Vector compares then pick the entries at or above that bound (at most k +
 * SPARE, else 1: the portable row does it), the k-th largest of those is the row's, and those
 * at or above it are the top k, in ascending order. -1: a tie or a NaN (as topk_row).
 * `buf`: max(p, 8 ceil(k / 8)) + k words. */
__attribute__((target("avx2"))) static int topk_row_avx2(const float *row, int64_t p,
                                                           int64_t k, int64_t *out,
                                                           uint32_t *buf) {
    const __m256i absmask = _mm256_set1_epi32(0x7FFFFFFF);
    int64_t vecs = p / 8, j = (k + 7) / 8, count = 0;
    uint32_t *top = buf + (p > 8 * j ? p : 8 * j);     /* after the lane values */
    __m256i most[8];
    for (int64_t t = 0; t < j; t++) most[t] = _mm256_setzero_si256();
    for (int64_t v = 0; v < vecs; v++) {
        __m256i carry = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(row + 8 * v)),
                                         absmask);     /* patterns < 2^31: signed compares */
        for (int64_t t = 0; t < j; t++) {
            __m256i here = most[t];
            most[t] = _mm256_max_epi32(here, carry);
            carry = _mm256_min_epi32(here, carry);
        }
    }
    for (int64_t t = 0; t < j; t++) _mm256_storeu_si256((__m256i *)(buf + 8 * t), most[t]);
    uint32_t bound = kth_largest(buf, 8 * j, k, top);
    int64_t places[LANE_MAX_K + SPARE];             /* the candidates, ascending */
    uint32_t vals[LANE_MAX_K + SPARE];
    __m256i below = _mm256_set1_epi32((int)bound - 1);   /* bound >= 0: -1 takes all */
    for (int64_t v = 0; v < vecs; v++) {
        __m256i m = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(row + 8 * v)),
                                     absmask);
        unsigned hits = (unsigned)_mm256_movemask_ps(
            _mm256_castsi256_ps(_mm256_cmpgt_epi32(m, below)));
        while (hits) {
            int64_t at = 8 * v + __builtin_ctz(hits);
            hits &= hits - 1;
            if (count == k + SPARE) return 1;
            places[count] = at;
            vals[count++] = mag(row[at]);
        }
    }
    for (int64_t at = 8 * vecs; at < p; at++) {
        if (mag(row[at]) < bound) continue;
        if (count == k + SPARE) return 1;
        places[count] = at;
        vals[count++] = mag(row[at]);
    }
    memcpy(buf, vals, (size_t)count * sizeof *buf);
    uint32_t kth = kth_largest(buf, count, k, top);
    if (kth > NAN_BITS) return -1;
    int64_t found = 0;
    for (int64_t c = 0; c < count; c++) {
        if (vals[c] < kth) continue;
        if (found == k) return -1;
        out[found++] = places[c];
    }
    if (found != k) return -1;      /* (cannot happen: kth is the k-th largest of vals) */
    return 0;
}
#endif

/* hierfl_topk_row without AVX2. The maxima of the row's blocks first (one vectorised pass);
 * the k-th largest of those is at most the row's k-th largest (the k blocks on top hold k
 * entries at least that large), so every entry of the row's top k lies in a block whose
 * maximum reaches it and reaches it too: the k-th largest of those blocks' entries that reach
 * it (a few more than k) is the row's, and the entries at or above that are counted and
 * listed from the blocks that hold any. `buf`: 2 p + k + 2 words. */
static int topk_row(const float *row, int64_t p, int64_t k, int64_t *out, uint32_t *buf) {
    int64_t blocks = (p + BLOCK - 1) / BLOCK;
    uint32_t *most = buf + p, *top = most + blocks;
    block_maxima(row, p, most);
    uint32_t floor_ = 0;
    if (blocks >= k) {
        memcpy(buf, most, (size_t)blocks * sizeof *buf);
        floor_ = kth_largest(buf, blocks, k, top);
    }
    int64_t count = 0;
    for (int64_t b = 0; b < blocks; b++) {
        if (most[b] < floor_) continue;
        int64_t lo = b * BLOCK, hi = lo + BLOCK < p ? lo + BLOCK : p;
        for (int64_t j = lo; j < hi; j++) {     /* below floor_: not in the top k */
            uint32_t v = mag(row[j]);
            buf[count] = v;
            count += v >= floor_;
        }
    }
    uint32_t kth = kth_largest(buf, count, k, top);
    if (kth > NAN_BITS) return -1;
    int64_t found = 0;
    for (int64_t b = 0; b < blocks; b++) {
        if (most[b] < kth) continue;
        int64_t lo = b * BLOCK, hi = lo + BLOCK < p ? lo + BLOCK : p;
        for (int64_t j = lo; j < hi; j++) {
            if (mag(row[j]) >= kth) {
                if (found == k) return -1;
                out[found++] = j;
            }
        }
    }
    return found == k ? 0 : -1;     /* (never short: kth is the k-th largest of the row) */
}

int hierfl_topk_row(const float *row, int64_t p, int64_t k, int64_t *out, uint32_t *buf) {
    int status = 1;
#ifdef SIMD_X86
    if (k <= LANE_MAX_K && p >= 8 && hierfl_use_simd())
        status = topk_row_avx2(row, p, k, out, buf);
#endif
    return status == 1 ? topk_row(row, p, k, out, buf) : status;
}
