/* The kernels of count_kernels.c for one element type: count_kernels.c defines T (the type)
 * and SUFFIX (f32 or f64) and includes this file. */

#define GLUE_(a, b) a##_##b
#define GLUE(a, b) GLUE_(a, b)
#define NAME(name) GLUE(name, SUFFIX)

/* Row-level helpers take the number of columns J as an argument and are always inlined; the
 * loops call them through WITH_J, which writes out J = 1 to 6, so that the compiler unrolls
 * the loops over J (one pass over a row for all columns). Any other J takes the general path. */
#define WITH_J(J, CALL)                                                                       \
    switch (J) {                                                                              \
    case 1: CALL(1); break;                                                                   \
    case 2: CALL(2); break;                                                                   \
    case 3: CALL(3); break;                                                                   \
    case 4: CALL(4); break;                                                                   \
    case 5: CALL(5); break;                                                                   \
    case 6: CALL(6); break;                                                                   \
    default: CALL(J);                                                                         \
    }

/* s[j] = e . P[j, :] for j < J; LANES independent partial sums, so that no add waits on the one
 * before it */
static inline void NAME(row_scores)(T *s, const T *e, const T *P, int64_t d, int64_t J) {
    for (int64_t j = 0; j < J; ++j) {
        const T *q = P + j * d;
        T part[LANES] = {0};
        int64_t k = 0;
        for (; k + LANES <= d; k += LANES) {
#pragma omp simd
            for (int l = 0; l < LANES; ++l) part[l] += e[k + l] * q[k + l];
        }
        T acc = 0;
        for (; k < d; ++k) acc += e[k] * q[k];
        for (int l = 0; l < LANES; ++l) acc += part[l];
        s[j] = acc;
    }
}

/* the scores of a block of BLOCK_ROWS rows against two columns (the binary model): all the sums
 * side by side, each in VECTOR partial sums, and each element of P loaded once per block */
static inline void NAME(block_two_scores)(T *s, const T *e, const T *P, int64_t d) {
    const T *p = P, *q = P + d;
    T pa[BLOCK_ROWS][VECTOR] = {{0}}, pb[BLOCK_ROWS][VECTOR] = {{0}};
    int64_t k = 0;
    for (; k + VECTOR <= d; k += VECTOR) {
        for (int r = 0; r < BLOCK_ROWS; ++r) {
#pragma omp simd
            for (int l = 0; l < VECTOR; ++l) {
                pa[r][l] += e[r * d + k + l] * p[k + l];
                pb[r][l] += e[r * d + k + l] * q[k + l];
            }
        }
    }
    for (int r = 0; r < BLOCK_ROWS; ++r) {
        T a = 0, b = 0;
        for (int64_t m = k; m < d; ++m) {
            a += e[r * d + m] * p[m];
            b += e[r * d + m] * q[m];
        }
        for (int l = 0; l < VECTOR; ++l) {
            a += pa[r][l];
            b += pb[r][l];
        }
        s[2 * r] = a;
        s[2 * r + 1] = b;
    }
}

int NAME(scores)(const T *E, int64_t V, int64_t d, const T *P, int64_t J, T *S, int threads) {
    if (V < 0 || d < 0 || J < 0 || (V * d > 0 && (!E || !P || !S))) return 1;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t b = 0; b < V; b += BLOCK_ROWS) {
        const int64_t rows = V - b < BLOCK_ROWS ? V - b : BLOCK_ROWS;
        const T *e = E + b * d;
        prefetch_block(e, b, V, d * (int64_t)sizeof(T));
        if (rows == BLOCK_ROWS && J == 2) {
            NAME(block_two_scores)(S + b * 2, e, P, d);
            continue;
        }
        for (int64_t r = 0; r < rows; ++r) NAME(row_scores)(S + (b + r) * J, e + r * d, P, d, J);
    }
    return 0;
}

/* acc[j, :] += g[j] * e for j < J */
static inline __attribute__((always_inline)) void NAME(add_weighted_row)(
    T *acc, const T *e, const T *g, int64_t d, const int64_t J) {
    for (int64_t j = 0; j < J; ++j) {
        const T gj = g[j];
#pragma omp simd
        for (int64_t k = 0; k < d; ++k) acc[j * d + k] += gj * e[k];
    }
}

/* acc[j, :] += sum_r g[r, j] * e[r, :] over a block of BLOCK_ROWS rows r (J = 2): the sums
 * stay in registers across the block, so acc is loaded and stored once per block of E */
static inline void NAME(add_block_two_columns)(T *acc, const T *e, const T *g, int64_t d) {
    T w[2 * BLOCK_ROWS]; /* the weights, in a local copy that no store to acc can change */
    memcpy(w, g, sizeof w);
    T *acc1 = acc + d;
#pragma omp simd
    for (int64_t k = 0; k < d; ++k) {
        T s0 = 0, s1 = 0;
        for (int r = 0; r < BLOCK_ROWS; ++r) {
            s0 += w[2 * r] * e[r * d + k];
            s1 += w[2 * r + 1] * e[r * d + k];
        }
        acc[k] += s0;
        acc1[k] += s1;
    }
}

int NAME(weighted_rows)(const T *E, int64_t V, int64_t d, const T *G, int64_t J, T *Q,
                        int threads) {
    if (V < 0 || d < 0 || J < 0 || !E || !G || !Q) return 1;
    if (threads < 1) threads = 1;
    if (J * d == 0) return 0; /* nothing to write */
    T *shares = calloc((size_t)threads * J * d, sizeof(T)); /* one (J, d) sum per thread */
    if (shares == NULL) return 2; /* no memory */
#pragma omp parallel num_threads(threads)
    {
        T *acc = shares + (int64_t)THREAD_ID * J * d;
#pragma omp for schedule(static)
        for (int64_t b = 0; b < V; b += BLOCK_ROWS) {
            const int64_t rows = V - b < BLOCK_ROWS ? V - b : BLOCK_ROWS;
            const T *e = E + b * d;
            prefetch_block(e, b, V, d * (int64_t)sizeof(T));
            if (rows == BLOCK_ROWS && J == 2) {
                NAME(add_block_two_columns)(acc, e, G + b * 2, d);
                continue;
            }
            for (int64_t r = 0; r < rows; ++r) {
#define ADD_ROW(J_) NAME(add_weighted_row)(acc, e + r * d, G + (b + r) * J, d, J_)
                WITH_J(J, ADD_ROW)
#undef ADD_ROW
            }
        }
    }
    /* the shares are added in thread order */
    memcpy(Q, shares, sizeof(T) * J * d);
    for (int t = 1; t < threads; ++t)
        for (int64_t k = 0; k < J * d; ++k) Q[k] += shares[(int64_t)t * J * d + k];
    free(shares);
    return 0;
}

/* out[l] = sum_j g[j] * P[j, k + l] for l < len */
static inline __attribute__((always_inline)) void NAME(combine_rows)(
    T *out, const T *g, const T *P, int64_t d, int64_t k, int len, const int64_t J) {
#pragma omp simd
    for (int l = 0; l < len; ++l) {
        T x = 0;
        for (int64_t j = 0; j < J; ++j) x += g[j] * P[j * d + k + l];
        out[l] = x;
    }
}

int NAME(low_rank)(const T *G, const T *P, int64_t V, int64_t d, int64_t J, T *D, int threads) {
    if (V < 0 || d < 0 || J < 0 || (V * d > 0 && (!G || !P || !D))) return 1;
#pragma omp parallel num_threads(threads)
    {
        T piece[LANES]; /* a piece of a row of D, built in cache, then streamed out */
#pragma omp for schedule(static)
        for (int64_t s = 0; s < V; ++s) {
            for (int64_t k = 0; k < d; k += LANES) {
                const int len = d - k < LANES ? (int)(d - k) : LANES;
#define COMBINE(J_) NAME(combine_rows)(piece, G + s * J, P, d, k, len, J_)
                WITH_J(J, COMBINE)
#undef COMBINE
                stream_bytes(D + s * d + k, piece, len * (int64_t)sizeof(T));
            }
        }
        store_fence();
    }
    return 0;
}

/* y[j] = sum over the entries k of one CSR row of values[k] * X[indices[k], j], j < J.
 * The binary model's J = 2 is written out: four partial sums per column, so that the adds do
 * not wait on one another (a single chain of adds measured three times slower), and scalar
 * code (the compiler's own vectorisation uses gathers, which measured twice as slow). */
static inline __attribute__((always_inline)) void NAME(csr_row)(
    T *y, const int32_t *indices, const T *values, int32_t lo, int32_t hi, const T *X,
    const int64_t J) {
    if (J == 2) {
        T a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
        int32_t k = lo;
        for (; k + 4 <= hi; k += 4) {
            const T *x0 = X + 2 * (int64_t)indices[k], *x1 = X + 2 * (int64_t)indices[k + 1];
            const T *x2 = X + 2 * (int64_t)indices[k + 2], *x3 = X + 2 * (int64_t)indices[k + 3];
            a0 += values[k] * x0[0];
            b0 += values[k] * x0[1];
            a1 += values[k + 1] * x1[0];
            b1 += values[k + 1] * x1[1];
            a2 += values[k + 2] * x2[0];
            b2 += values[k + 2] * x2[1];
            a3 += values[k + 3] * x3[0];
            b3 += values[k + 3] * x3[1];
        }
        for (; k < hi; ++k) {
            a0 += values[k] * X[2 * (int64_t)indices[k]];
            b0 += values[k] * X[2 * (int64_t)indices[k] + 1];
        }
        y[0] = (a0 + a1) + (a2 + a3);
        y[1] = (b0 + b1) + (b2 + b3);
        return;
    }
    T acc[MAX_COLUMNS];
    for (int64_t j = 0; j < J; ++j) acc[j] = 0;
    for (int32_t k = lo; k < hi; ++k) {
        const T c = values[k];
        const T *x = X + (int64_t)indices[k] * J;
        for (int64_t j = 0; j < J; ++j) acc[j] += c * x[j];
    }
    for (int64_t j = 0; j < J; ++j) y[j] = acc[j];
}

/* The first row of thread t's share when n rows with nnz = indptr[n] entries are split into
 * `threads` contiguous shares of about equal numbers of entries. */
static inline int64_t NAME(share_start)(const int32_t *indptr, int64_t n, int t, int threads) {
    const int64_t target = (int64_t)indptr[n] * t / threads;
    int64_t lo = 0, hi = n; /* the first row i with indptr[i] >= target */
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (indptr[mid] < target) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* The row pointers and column indices are not checked here (kernels.py checks them): indptr
 * must run from 0 to nnz without decreasing and every index must be a row of X. */
int NAME(csr_times)(const int32_t *indptr, const int32_t *indices, const T *values, int64_t n,
                    const T *X, int64_t J, T *Y, int threads) {
    if (n < 0 || J < 0 || J > MAX_COLUMNS || !indptr || (n > 0 && !Y)) return 1;
    if (indptr[n] > 0 && (!indices || !values || !X)) return 1;
#pragma omp parallel num_threads(threads < 1 ? 1 : threads)
    {
        /* one contiguous range of rows per thread, with equal numbers of entries: each thread
         * streams through its part of the arrays from start to end */
        const int t = THREAD_ID, team = TEAM_SIZE;
        const int64_t start = NAME(share_start)(indptr, n, t, team);
        const int64_t stop = t + 1 == team ? n : NAME(share_start)(indptr, n, t + 1, team);
        for (int64_t i = start; i < stop; ++i) {
            if (i + AHEAD < n) { /* the entries of a row a little further on */
                const int32_t lo = indptr[i + AHEAD], len = indptr[i + AHEAD + 1] - lo;
                prefetch_row(indices + lo, len * (int64_t)sizeof(int32_t));
                prefetch_row(values + lo, len * (int64_t)sizeof(T));
            }
#define ROW(J_) NAME(csr_row)(Y + i * J, indices, values, indptr[i], indptr[i + 1], X, J_)
            WITH_J(J, ROW)
#undef ROW
        }
    }
    return 0;
}

#undef WITH_J
#undef NAME
#undef GLUE
#undef GLUE_
