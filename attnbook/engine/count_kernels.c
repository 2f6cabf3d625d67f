/* The memory-bound passes of the count engine, for float and double.
 *
 * attnbook.engine.native compiles this file with the machine's C compiler on first use and calls it
 * through ctypes; each function has a torch twin there that gives the same numbers. Dense
 * matrices are row-major and contiguous; sparse matrices are CSR with 32-bit row pointers and
 * column indices. Rows are shared out between OpenMP threads, and every result is summed in
 * a fixed order, so it does not depend on timing.
 *
 *   scores:        S = E P^T     E (V, d), P (J, d)     -> S (V, J)    one read of E
 *   weighted_rows: Q = G^T E     E (V, d), G (V, J)     -> Q (J, d)    one read of E
 *   low_rank:      D = G P       G (V, J), P (J, d)     -> D (V, d)    one write of D
 *   csr_times:     Y = A X       A (n, m) CSR, X (m, J) -> Y (n, J)    one read of A
 *   fused_step:    Adam or gradient descent on E with the gradient G P, Q = G^T E before and
 *                  S = E P^T after the update     one read and write of E (and its moments)
 *   logistic_counts: A [u, u b], then A^T [r_D, R] of the logistic loss, row by row
 *                                                  one read of A
 *
 * The functions are written once, in count_kernels_typed.h (fused_step in fused_step_typed.h), for an element
 * type T, and included
 * here for float (suffix f32) and double (suffix f64). Each returns 0, or nonzero (and does
 * nothing) when its sizes are impossible: negative, a null pointer, or more columns than
 * csr_times keeps in registers. kernels.py checks everything else before calling: shapes that
 * agree with one another, and the structure and indices of the sparse matrix.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#define THREAD_ID omp_get_thread_num()
#define TEAM_SIZE omp_get_num_threads()
#else
#define THREAD_ID 0
#define TEAM_SIZE 1
#endif

#if defined(__SSE2__)
#include <immintrin.h>
#endif

/* Sizes below were the fastest of those tried on a 2-core AMD EPYC (Zen 5) with
 * python -m benchmarks; every choice gives the same results up to rounding. */
#define BLOCK_ROWS 8                 /* rows of E that a pass over E works on at once */
#define VECTOR (64 / (int)sizeof(T)) /* elements in 64 bytes: one AVX-512 register */
#define LANES 64                     /* elements an inner loop works on at once */
#define AHEAD 8                      /* csr_times: prefetch the row this many rows ahead */
#define MAX_COLUMNS 16               /* csr_times: at most this many columns (kernels.py checks) */

/* Ask for the next row while this one is worked on: more loads in flight than the hardware
 * prefetcher issues by itself (it halves the time of a pass over E on the machines we use). */
static inline void prefetch_row(const void *row, int64_t bytes) {
    const char *p = (const char *)row;
    for (int64_t k = 0; k < bytes; k += 64) __builtin_prefetch(p + k);
}

/* The block of rows after the one that starts at row b (rows of `bytes` bytes, V in all). */
static inline void prefetch_block(const void *block, int64_t b, int64_t V, int64_t bytes) {
    const int64_t next = b + BLOCK_ROWS;
    if (next < V)
        prefetch_row((const char *)block + BLOCK_ROWS * bytes,
                     (V - next < BLOCK_ROWS ? V - next : BLOCK_ROWS) * bytes);
}

/* Copy `bytes` bytes to memory with streaming (non-temporal) stores where the CPU has them:
 * the gradient is written once and not read here, so it need not be fetched into the cache
 * first. The caller fences once when all stores are issued. */
static inline void stream_bytes(void *dst, const void *src, int64_t bytes) {
    char *d = (char *)dst;
    const char *s = (const char *)src;
#if defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__)
#if defined(__AVX512F__)
    enum { WIDTH = 64 };
#elif defined(__AVX__)
    enum { WIDTH = 32 };
#else
    enum { WIDTH = 16 };
#endif
    const int64_t head = (int64_t)((WIDTH - (uintptr_t)d % WIDTH) % WIDTH);
    if (head < bytes) { /* up to the first aligned address, then whole aligned vectors */
        memcpy(d, s, head);
        d += head, s += head, bytes -= head;
        for (; bytes >= WIDTH; d += WIDTH, s += WIDTH, bytes -= WIDTH) {
#if defined(__AVX512F__)
            _mm512_stream_si512((void *)d, _mm512_loadu_si512((const void *)s));
#elif defined(__AVX__)
            _mm256_stream_si256((__m256i *)d, _mm256_loadu_si256((const __m256i *)s));
#else
            _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
#endif
        }
    }
#endif
    memcpy(d, s, bytes);
}

static inline void store_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

#define T float
#define SUFFIX f32
#include "count_kernels_typed.h"
#include "fused_step_typed.h"
#undef T
#undef SUFFIX

#define T double
#define SUFFIX f64
#include "count_kernels_typed.h"
#include "fused_step_typed.h"
#undef T
#undef SUFFIX

/* 1 when this build shares rows between OpenMP threads, 0 when it runs on one thread. */
int openmp_enabled(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}
