/* The fused training step of count_kernels.c for one element type: count_kernels.c defines T
 * and SUFFIX (f32 or f64) and includes this file after count_kernels_typed.h.
 *
 *   fused_step: one sweep over E (V, d) and, for Adam, its two moments M and W (V, d):
 *     row s of the gradient           g_s = sum_j G[s, j] P[j, :]       (never stored)
 *     the sums of the rows            Q  = G^T E          (E before the update, optional)
 *     the update                      Adam (M, W not NULL) or plain gradient descent
 *     the scores of the updated rows  S  = E P^T          (after the update, optional)
 *   so that each of E, M and W is read once and written once.
 *
 * The Adam update is torch.optim.Adam's (betas, eps, no weight decay, no amsgrad), written as
 * torch's fused CPU kernel writes it:
 *     m <- m + (1 - beta1) (g - m)
 *     w <- beta2 w + (1 - beta2) g^2
 *     e <- e - step_size m / (sqrt(w) / bc2_sqrt + eps)
 * with step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t) given by the caller.
 * Gradient descent is e <- e - lr g. */

#define FGLUE_(a, b) a##_##b
#define FGLUE(a, b) FGLUE_(a, b)
#define FNAME(name) FGLUE(name, SUFFIX)

/* sqrt in the element type (the float one for float: no round trip through double); kernels.py
 * compiles with -fno-math-errno, so that it is vectorised (w >= 0: it never fails) */
#define FSQRT(x) (sizeof(T) == sizeof(float) ? (T)sqrtf((float)(x)) : (T)sqrt((double)(x)))

#define FWITH_J(J, CALL)                                                                      \
    switch (J) {                                                                              \
    case 1: CALL(1); break;                                                                   \
    case 2: CALL(2); break;                                                                   \
    case 3: CALL(3); break;                                                                   \
    default: CALL(J);                                                                         \
    }

/* The hyperparameters of one step, in the element type. */
typedef struct {
    T lr, one_minus_beta1, beta2, one_minus_beta2, eps, step_size, bc2_sqrt;
} FNAME(step_constants);

/* One row: e (d), m and w (d, or NULL for gradient descent), its gradient weights g (J), the
 * sums acc (J, d) or NULL, the scores s (J) or NULL. Works on LANES elements at a time: the
 * row's gradient piece is built in registers and never stored. */
static inline __attribute__((always_inline)) void FNAME(step_row)(
    T *restrict e, T *restrict m, T *restrict w, const T *restrict g, const T *restrict P,
    int64_t d, const int64_t J, T *restrict acc, T *restrict s,
    const FNAME(step_constants) *c) {
    T part[MAX_COLUMNS][LANES];
    if (s)
        for (int64_t j = 0; j < J; ++j)
            for (int l = 0; l < LANES; ++l) part[j][l] = 0;
    for (int64_t k = 0; k < d; k += LANES) {
        const int len = d - k < LANES ? (int)(d - k) : LANES;
        T grad[LANES];
#pragma omp simd
        for (int l = 0; l < len; ++l) {
            T x = 0;
            for (int64_t j = 0; j < J; ++j) x += g[j] * P[j * d + k + l];
            grad[l] = x;
        }
        if (acc)
            for (int64_t j = 0; j < J; ++j) {
                const T gj = g[j];
                T *a = acc + j * d + k;
#pragma omp simd
                for (int l = 0; l < len; ++l) a[l] += gj * e[k + l];
            }
        if (m) {
#pragma omp simd
            for (int l = 0; l < len; ++l) {
                const T x = grad[l];
                const T mm = m[k + l] + c->one_minus_beta1 * (x - m[k + l]);
                const T ww = c->beta2 * w[k + l] + c->one_minus_beta2 * x * x;
                const T denom = FSQRT(ww) / c->bc2_sqrt + c->eps;
                e[k + l] = e[k + l] + (-c->step_size) * mm / denom;
                m[k + l] = mm;
                w[k + l] = ww;
            }
        } else {
#pragma omp simd
            for (int l = 0; l < len; ++l) e[k + l] = e[k + l] + (-c->lr) * grad[l];
        }
        if (s)
            for (int64_t j = 0; j < J; ++j) {
                const T *q = P + j * d + k;
#pragma omp simd
                for (int l = 0; l < len; ++l) part[j][l] += e[k + l] * q[l];
            }
    }
    if (s)
        for (int64_t j = 0; j < J; ++j) {
            T x = 0;
            for (int l = 0; l < LANES; ++l) x += part[j][l];
            s[j] = x;
        }
}

/* The update of one element (Adam), as in step_row */
#define FADAM(e, m, w, x)                                                                     \
    {                                                                                         \
        const T mm_ = (m) + b1 * ((x) - (m));                                                 \
        const T ww_ = beta2 * (w) + b2 * (x) * (x);                                           \
        const T den_ = FSQRT(ww_) / bc2_sqrt + eps;                                           \
        (e) = (e) + (-step_size) * mm_ / den_;                                                \
        (m) = mm_;                                                                            \
        (w) = ww_;                                                                            \
    }

/* Two rows at once for J = 2 without scores (the one-layer model's step): one loop over the
 * columns that updates both rows and adds both to the sums acc (J, d) or NULL, so that acc
 * is loaded and stored once per pair of rows. g holds the two rows' weights (2 x 2). */
static inline __attribute__((always_inline)) void FNAME(step_pair)(
    T *restrict E, T *restrict M, T *restrict W, const T *restrict g, const T *restrict P,
    int64_t d, T *restrict acc, const FNAME(step_constants) *c) {
    const T lr = c->lr, b1 = c->one_minus_beta1, beta2 = c->beta2, b2 = c->one_minus_beta2;
    const T eps = c->eps, step_size = c->step_size, bc2_sqrt = c->bc2_sqrt;
    T *restrict e0 = E, *restrict e1 = E + d;
    const T *restrict p = P, *restrict q = P + d;
    const T g00 = g[0], g01 = g[1], g10 = g[2], g11 = g[3];
    T *restrict a0 = acc, *restrict a1 = acc ? acc + d : NULL;
    if (M) {
        T *restrict m0 = M, *restrict m1 = M + d, *restrict w0 = W, *restrict w1 = W + d;
        if (acc) {
#pragma omp simd
            for (int64_t k = 0; k < d; ++k) {
                const T x0 = g00 * p[k] + g01 * q[k], x1 = g10 * p[k] + g11 * q[k];
                a0[k] += g00 * e0[k] + g10 * e1[k];
                a1[k] += g01 * e0[k] + g11 * e1[k];
                FADAM(e0[k], m0[k], w0[k], x0)
                FADAM(e1[k], m1[k], w1[k], x1)
            }
        } else {
#pragma omp simd
            for (int64_t k = 0; k < d; ++k) {
                const T x0 = g00 * p[k] + g01 * q[k], x1 = g10 * p[k] + g11 * q[k];
                FADAM(e0[k], m0[k], w0[k], x0)
                FADAM(e1[k], m1[k], w1[k], x1)
            }
        }
    } else if (acc) {
#pragma omp simd
        for (int64_t k = 0; k < d; ++k) {
            const T x0 = g00 * p[k] + g01 * q[k], x1 = g10 * p[k] + g11 * q[k];
            a0[k] += g00 * e0[k] + g10 * e1[k];
            a1[k] += g01 * e0[k] + g11 * e1[k];
            e0[k] = e0[k] + (-lr) * x0;
            e1[k] = e1[k] + (-lr) * x1;
        }
    } else {
#pragma omp simd
        for (int64_t k = 0; k < d; ++k) {
            e0[k] = e0[k] + (-lr) * (g00 * p[k] + g01 * q[k]);
            e1[k] = e1[k] + (-lr) * (g10 * p[k] + g11 * q[k]);
        }
    }
}

/* Returns 0; 1 for impossible sizes or pointers; 2 when the per-thread sums get no memory. */
int FNAME(fused_step)(T *E, T *M, T *W, int64_t V, int64_t d, const T *G, const T *P,
                      int64_t J, T *Q, T *S, double lr, double beta1, double beta2, double eps,
                      double step_size, double bc2_sqrt, int threads) {
    if (V < 0 || d < 0 || J < 1 || J > MAX_COLUMNS || !E || !G || !P) return 1;
    if ((M == NULL) != (W == NULL)) return 1;
    if (threads < 1) threads = 1;
    const FNAME(step_constants) c = {(T)lr,         (T)(1 - beta1), (T)beta2, (T)(1 - beta2),
                                     (T)eps,        (T)step_size,   (T)bc2_sqrt};
    T *shares = NULL;
    if (Q != NULL && J * d > 0) {
        shares = calloc((size_t)threads * J * d, sizeof(T)); /* one (J, d) sum per thread */
        if (shares == NULL) return 2;
    }
#pragma omp parallel num_threads(threads)
    {
        T *acc = shares ? shares + (int64_t)THREAD_ID * J * d : NULL;
        /* no software prefetch here: with six streams (E, M, W read and written) the
         * hardware's own prefetch measured faster */
#pragma omp for schedule(static)
        for (int64_t b = 0; b < V; b += BLOCK_ROWS) {
            const int64_t rows = V - b < BLOCK_ROWS ? V - b : BLOCK_ROWS;

            int64_t r = b;
            if (J == 2 && S == NULL) /* pairs of rows; an odd last row below */
                for (; r + 2 <= b + rows; r += 2)
                    FNAME(step_pair)(E + r * d, M ? M + r * d : NULL, W ? W + r * d : NULL,
                                     G + r * 2, P, d, acc, &c);
            for (; r < b + rows; ++r) {
                T *m = M ? M + r * d : NULL, *w = W ? W + r * d : NULL;
                T *s = S ? S + r * J : NULL;
#define ROW(J_) FNAME(step_row)(E + r * d, m, w, G + r * J, P, d, J_, acc, s, &c)
                FWITH_J(J, ROW)
#undef ROW
            }
        }
    }
    if (Q != NULL) { /* the shares are added in thread order */
        if (shares == NULL) return 0;
        memcpy(Q, shares, sizeof(T) * J * d);
        for (int t = 1; t < threads; ++t)
            for (int64_t k = 0; k < J * d; ++k) Q[k] += shares[(int64_t)t * J * d + k];
        free(shares);
    }
    return 0;
}

/* The count products of a step of the one-layer model with the mean logistic loss, forward
 * and backward in one pass over the counts A (n, V) (CSR, 32-bit indices): for each row i,
 *     [den_i, num_i] = A_i [u, u b]        (X = [u, u b], (V, 2); as csr_times computes it)
 *     f_i = num_i / den_i,   g_i = dL/df_i = -y_i sigmoid(-y_i f_i) / n
 *     Z += A_i^T [r_D, R]    with R = g_i / den_i, r_D = -R f_i
 * while the row's entries are in cache; Z (V, 2) is summed per thread, then in thread order.
 * The derivative is written as torch's softplus backward (threshold 20). Returns 0; 1 for
 * impossible sizes or pointers; 2 when the per-thread sums get no memory. */
int FNAME(logistic_counts)(const int32_t *indptr, const int32_t *indices, const T *values,
                           int64_t n, const T *X, int64_t V, const T *y, T *f, T *den, T *Z,
                           int threads) {
    if (n < 1 || V < 1 || !indptr || !indices || !values || !X || !y || !f || !den || !Z)
        return 1;
    if (threads < 1) threads = 1;
    T *shares = calloc((size_t)threads * V * 2, sizeof(T)); /* one Z per thread */
    if (shares == NULL) return 2;
    const T inv_n = (T)1 / (T)n;
#pragma omp parallel num_threads(threads)
    {
        const int t = THREAD_ID, team = TEAM_SIZE;
        T *z = shares + (int64_t)t * V * 2;
        const int64_t start = FNAME(share_start)(indptr, n, t, team);
        const int64_t stop = t + 1 == team ? n : FNAME(share_start)(indptr, n, t + 1, team);
        for (int64_t i = start; i < stop; ++i) {
            if (i + AHEAD < n) {
                const int32_t lo = indptr[i + AHEAD], len = indptr[i + AHEAD + 1] - lo;
                prefetch_row(indices + lo, len * (int64_t)sizeof(int32_t));
                prefetch_row(values + lo, len * (int64_t)sizeof(T));
            }
            const int32_t lo = indptr[i], hi = indptr[i + 1];
            T dn[2];
            FNAME(csr_row)(dn, indices, values, lo, hi, X, 2);
            const T fi = dn[1] / dn[0];
            const T x = -y[i] * fi;
            const T ex = (T)exp((double)x);
            const T s = x > (T)20 ? (T)1 : ex / (ex + (T)1);
            const T g = (inv_n * s) * -y[i];
            const T R = g / dn[0], rD = -(R * fi);
            for (int32_t k = lo; k < hi; ++k) {
                T *zs = z + 2 * (int64_t)indices[k];
                zs[0] += values[k] * rD;
                zs[1] += values[k] * R;
            }
            f[i] = fi;
            den[i] = dn[0];
        }
    }
    memcpy(Z, shares, sizeof(T) * V * 2);
    for (int t = 1; t < threads; ++t)
        for (int64_t k = 0; k < 2 * V; ++k) Z[k] += shares[(int64_t)t * V * 2 + k];
    free(shares);
    return 0;
}

#undef FADAM
#undef FWITH_J
#undef FSQRT
#undef FNAME
#undef FGLUE
#undef FGLUE_
