/* The upload codecs of hierfl/compress/kinds.py in one pass per row: topk, randk, qsgd and
 * sign, with error feedback's residual write and the decode (+ the reference the message was
 * taken against) fused. Built by setuptools when a C compiler is there (optional: without one,
 * and with HIERFL_NATIVE=0, kinds.py's torch ops do the same work); loaded with ctypes by
 * native.py. Every result is bit for bit the torch path's (tests/test_compress_native.py):
 * the same IEEE single operations in the same order (no contraction into fused multiply-adds:
 * -ffp-contract=off), the same counter-based hashes as draws.py, and the same selection as
 * select.py (topk.c; ties for the last place and NaNs are left to the torch path, by
 * returning -1 before anything is written). The per-row reductions (qsgd's norm, sign's mean
 * |x|) stay in torch, whose summation order is its own: they come in as per-row factors. */
#include "kernels.h"

#define HIERFL_KERNELS_VERSION 1

enum { TOPK = 1, RANDK = 2, QSGD = 3, SIGN = 4 };

static int simd = -1;               /* AVX2 paths: -1 not yet asked, 0 off, 1 on */

/* Tests: 0 turns the AVX2 paths off (the portable loops then do the work), 1 back on where
 * the processor has AVX2. Returns whether they are on. */
int hierfl_kernels_simd(int on) {
#ifdef SIMD_X86
    __builtin_cpu_init();
    simd = on && __builtin_cpu_supports("avx2");
#else
    (void)on;
    simd = 0;
#endif
    return simd;
}

int hierfl_use_simd(void) {
    if (simd < 0) hierfl_kernels_simd(1);
    return simd;
}

int hierfl_kernels_version(void) { return HIERFL_KERNELS_VERSION; }

/* ------------------------------------------------------------------ randk's subset */
/* draws.py's subset: the first k distinct coordinates of the row's draws (coordinate =
 * (hash * p) >> 32, counter = the draw's number), in draw order; above k = p / 2, the p - k
 * coordinates left out are drawn and the rest listed ascending. `seen`: p bytes. */
static void randk_subset(uint32_t row_hash, int64_t p, int64_t k, int64_t *out,
                         unsigned char *seen) {
    memset(seen, 0, (size_t)p);
    int64_t draw = 2 * k <= p ? k : p - k, got = 0;
    for (uint32_t c = 0; got < draw; c++) {
        uint32_t h = mix_tail(row_hash ^ spread(c));
        int64_t at = (int64_t)(((uint64_t)h * (uint64_t)p) >> 32);
        if (!seen[at]) {
            seen[at] = 1;
            if (2 * k <= p) out[got] = at;
            got++;
        }
    }
    if (2 * k > p) {
        int64_t n = 0;
        for (int64_t j = 0; j < p; j++)
            if (!seen[j]) out[n++] = j;
    }
}

/* ------------------------------------------------------------------ qsgd */
/* kinds._qsgd on entries lo..hi-1 of a row: floor(|m| * q + u24 * 2^-24) * back, signed as m
 * (u24: the row's 24-bit draws, draws.ints24). The floor of a level in [0, 2^23) is its
 * truncation (levels are never negative), and a level at or above 2^23, inf or NaN is its own
 * floor. */
static void qsgd_span(const float *m, int64_t lo, int64_t hi, uint32_t row_hash, float q,
                      float back, float *o) {
    for (int64_t j = lo; j < hi; j++) {
        int32_t u24 = (int32_t)(mix_tail(row_hash ^ spread((uint32_t)j)) >> 8);
        float level = fabsf(m[j]) * q + (float)u24 * 0x1p-24f;
        int small = level < 0x1p23f;
        float whole = (float)(int32_t)(small ? level : 0.0f);
        whole = small ? whole : level;
        o[j] = copysignf(whole * back, m[j]);
    }
}

#ifdef SIMD_X86
/* qsgd_span on 8 entries at a time with AVX2 (its 32-bit multiplies: the hash): the same
 * operations in the same order, so the same bits. */
__attribute__((target("avx2"))) static void qsgd_row_avx2(const float *m, int64_t p,
                                                            uint32_t row_hash, float q,
                                                            float back, float *o) {
    const __m256i golden = _mm256_set1_epi32((int)0x9E3779B1u);
    const __m256i c1 = _mm256_set1_epi32((int)0x21F0AAADu), c2 = _mm256_set1_epi32(0x735A2D97);
    const __m256i key = _mm256_set1_epi32((int)row_hash), eight = _mm256_set1_epi32(8);
    const __m256 vq = _mm256_set1_ps(q), vback = _mm256_set1_ps(back);
    const __m256 unit = _mm256_set1_ps(0x1p-24f), big = _mm256_set1_ps(0x1p23f);
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 signmask = _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u));
    __m256i j = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t t = 0;
    for (; t + 8 <= p; t += 8) {
        __m256i c = _mm256_mullo_epi32(j, golden);
        c = _mm256_xor_si256(c, _mm256_srli_epi32(c, 16));
        __m256i h = _mm256_mullo_epi32(_mm256_xor_si256(key, c), c1);
        h = _mm256_xor_si256(h, _mm256_srli_epi32(h, 15));
        h = _mm256_mullo_epi32(h, c2);
        __m256 u = _mm256_cvtepi32_ps(_mm256_srli_epi32(h, 8));
        __m256 x = _mm256_loadu_ps(m + t);
        __m256 level = _mm256_add_ps(_mm256_mul_ps(_mm256_and_ps(x, absmask), vq),
                                     _mm256_mul_ps(u, unit));
        __m256 small = _mm256_cmp_ps(level, big, _CMP_LT_OQ);
        __m256 whole = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(_mm256_and_ps(level, small)));
        whole = _mm256_blendv_ps(level, whole, small);
        __m256 v = _mm256_mul_ps(whole, vback);
        v = _mm256_or_ps(_mm256_and_ps(v, absmask), _mm256_and_ps(x, signmask));
        _mm256_storeu_ps(o + t, v);
        j = _mm256_add_epi32(j, eight);
    }
    qsgd_span(m, t, p, row_hash, q, back, o);
}
#endif

static void qsgd_row(const float *m, int64_t p, uint32_t row_hash, float q, float back,
                     float *o) {
#ifdef SIMD_X86
    if (hierfl_use_simd()) {
        qsgd_row_avx2(m, p, row_hash, q, back, o);
        return;
    }
#endif
    qsgd_span(m, 0, p, row_hash, q, back, o);
}

/* ------------------------------------------------------------------ the whole upload */
/* A round's message: given (msg, rows x p, contiguous), or made row by row from
 * the uploads as layer.Compressor._message makes it: xs[i / n]'s row i % n - ref (row
 * i % ref_rows of ref, or its one row when ref_rows is 0; none when ref is NULL), + the
 * sender's residual (tables[i / n]'s row senders[i % n]) first: the same single roundings as
 * torch's index_select then add_(x - ref). The senders of a call are distinct (hierfl_code
 * writes each residual row in place as it goes; native.py checks). */
typedef struct {
    const float *msg;
    const float *const *xs;
    const float *ref;
    int64_t ref_rows;
    float *const *tables;
    int64_t n;
    const int64_t *senders;
} Message;

static void make_row(const Message *mg, int64_t i, int64_t p, float *m) {
    const float *x = mg->xs[i / mg->n] + (i % mg->n) * p;
    const float *r = mg->ref == NULL ? NULL
                     : mg->ref + (mg->ref_rows ? (i % mg->ref_rows) * p : 0);
    const float *e = mg->tables == NULL ? NULL
                     : mg->tables[i / mg->n] + mg->senders[i % mg->n] * p;
    if (r != NULL && e != NULL)
        for (int64_t j = 0; j < p; j++) m[j] = e[j] + (x[j] - r[j]);
    else if (r != NULL)
        for (int64_t j = 0; j < p; j++) m[j] = x[j] - r[j];
    else if (e != NULL)
        for (int64_t j = 0; j < p; j++) m[j] = e[j] + x[j];
    else
        memcpy(m, x, (size_t)p * sizeof *m);
}

/* Entry j of row i of the message made from the uploads (make_row's, alone). */
static float entry(const Message *mg, int64_t i, int64_t j, int64_t p) {
    float x = mg->xs[i / mg->n][(i % mg->n) * p + j];
    const float *r = mg->ref == NULL ? NULL
                     : mg->ref + (mg->ref_rows ? (i % mg->ref_rows) * p : 0);
    if (mg->tables != NULL) {
        float e = mg->tables[i / mg->n][mg->senders[i % mg->n] * p + j];
        return r != NULL ? e + (x - r[j]) : e + x;
    }
    return r != NULL ? x - r[j] : x;
}

/* Row i of the message: the given one, or made into buf. */
static const float *row_at(const Message *mg, int64_t i, int64_t p, float *buf) {
    if (mg->msg != NULL) return mg->msg + i * p;
    make_row(mg, i, p, buf);
    return buf;
}

/* Ask for the residual row of row i (the tables' rows are scattered: the hardware's stream
 * prefetch finds each only after a few misses). */
static void prefetch_row(const Message *mg, int64_t i, int64_t rows, int64_t p) {
    if (mg->tables == NULL || i >= rows) return;
    const char *e = (const char *)(mg->tables[i / mg->n] + mg->senders[i % mg->n] * p);
    for (int64_t at = 0; at < p * (int64_t)sizeof(float); at += 64) __builtin_prefetch(e + at, 1);
}

/* The whole message made into msg (rows x p); with `absolute` (or NULL), |msg| there too
 * (torch.abs's bits: the sign bit cleared). */
void hierfl_message(const float *const *xs, int64_t rows, int64_t p, const float *ref,
                    int64_t ref_rows, float *const *tables, int64_t n, const int64_t *senders,
                    float *msg, float *absolute) {
    Message mg = {NULL, xs, ref, ref_rows, tables, n, senders};
    for (int64_t i = 0; i < rows; i++) {
        float *m = msg + i * p;
        prefetch_row(&mg, i + 1, rows, p);
        make_row(&mg, i, p, m);
        if (absolute != NULL)
            for (int64_t j = 0; j < p; j++) absolute[i * p + j] = fabsf(m[j]);
    }
}

/* Code the rows of the message (rows x p, float32: msg as in Message, or NULL to
 * make each row from xs, ref and tables; row i is sender i % n of block i / n):
 * out (rows x p) = what the receiver decodes + ref (as in Message); with tables (one (N, p)
 * residual table per block, or NULL) row i's residual msg - decoded goes to
 * tables[i / n][senders[i % n]] unless keep[i % n] is 0.
 *   topk:  k entries, the largest |msg|;                  vals: msg
 *   randk: k entries, the subset drawn for row i;         vals: msg * a[0] (p / k)
 *   qsgd:  floor(|msg| * a[i] + u24 * 2^-24) * b[i], signed as msg; u24: row i's draws
 *   sign:  a[i] signed as msg
 * Row i's draws are those of draws.Draws(keys[i / n], senders[i % n]). Returns 0; -1 where
 * a topk row must be left to the torch path, -2 out of memory (nothing written either way:
 * every row is selected before any is written). qsgd and sign need msg (their factors come
 * from torch's reductions of the message). */
int hierfl_code(int kind, const float *msg, const float *const *xs,
                int64_t rows, int64_t p, int64_t k, const uint32_t *keys, const float *a,
                const float *b, const float *ref, int64_t ref_rows, float *const *tables,
                int64_t n, const int64_t *senders, const unsigned char *keep, float *out) {
    Message mg = {msg, xs, ref, ref_rows, tables, n, senders};
    int sparse = kind == TOPK || kind == RANDK;
    int64_t *idx = sparse ? malloc((size_t)(rows * k) * sizeof *idx) : NULL;
    uint32_t *scratch = malloc((size_t)(4 * p + k + 16) * sizeof *scratch);
    float *buf = (float *)(scratch + 3 * p + k + 16);   /* a made row, or k values: p floats */
    if (!scratch || (sparse && !idx)) {
        free(idx); free(scratch);
        return -2;
    }
    for (int64_t i = 0; kind == TOPK && i < rows; i++) {
        if (msg == NULL) prefetch_row(&mg, i + 1, rows, p);
        if (hierfl_topk_row(row_at(&mg, i, p, buf), p, k, idx + i * k, scratch) != 0) {
            free(idx); free(scratch);
            return -1;
        }
    }
    for (int64_t i = 0; i < rows; i++) {
        const float *r = ref == NULL ? NULL : ref + (ref_rows ? (i % ref_rows) * p : 0);
        float *o = out + i * p;
        prefetch_row(&mg, i + 1, rows, p);
        float *left = NULL;
        if (tables != NULL && (keep == NULL || keep[i % n]))
            left = tables[i / n] + senders[i % n] * p;
        if (sparse) {       /* the row's k values; its residual made in place on its own */
            int64_t *at = idx + i * k;
            if (kind == RANDK) randk_subset(row_hash(keys[i / n], senders[i % n]), p, k, at,
                                            (unsigned char *)scratch);
            if (msg != NULL) {
                const float *m = row_at(&mg, i, p, buf);
                for (int64_t t = 0; t < k; t++) buf[t] = m[at[t]];
                if (left != NULL) memcpy(left, m, (size_t)p * sizeof *left);
            } else if (left != NULL) {          /* (made from the table row it replaces) */
                make_row(&mg, i, p, left);
                for (int64_t t = 0; t < k; t++) buf[t] = left[at[t]];
            } else {
                for (int64_t t = 0; t < k; t++) buf[t] = entry(&mg, i, at[t], p);
            }
            if (r != NULL) memcpy(o, r, (size_t)p * sizeof *o);
            else memset(o, 0, (size_t)p * sizeof *o);
            for (int64_t t = 0; t < k; t++) {
                float v = kind == RANDK ? buf[t] * a[0] : buf[t];
                o[at[t]] = r != NULL ? r[at[t]] + v : v;
                if (left != NULL) left[at[t]] = buf[t] + -v;
            }
        } else {            /* dense: decoded into o, then the residual, then + ref */
            const float *m = row_at(&mg, i, p, buf);
            if (kind == QSGD)
                qsgd_row(m, p, row_hash(keys[i / n], senders[i % n]), a[i], b[i], o);
            else {
                float s = a[i];
                for (int64_t j = 0; j < p; j++) o[j] = copysignf(s, m[j]);
            }
            if (left != NULL)
                for (int64_t j = 0; j < p; j++) left[j] = m[j] - o[j];
            if (r != NULL)
                for (int64_t j = 0; j < p; j++) o[j] = o[j] + r[j];
        }
    }
    free(idx);
    free(scratch);
    return 0;
}
