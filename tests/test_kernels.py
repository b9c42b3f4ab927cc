import math
import pickle
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from sklearn.metrics import pairwise

from klrlab._kernels import EXP_BODIES, replay, row_capacity, vector_exp
from klrlab.kernels import (Kernel, check_matrix, check_precomputed_kernel, gamma_from_sigma, laplacian_kernel,
                            linear_kernel, polynomial_kernel, rbf_kernel, sigma_from_gamma, squared_distances)

RNG = np.random.default_rng(42)
A, B = RNG.normal(size=(50, 6)), RNG.normal(size=(35, 6))
CASES = [
    ("linear", {}, pairwise.linear_kernel, {}),
    ("poly", dict(gamma=0.25, degree=3, coef0=1.0), pairwise.polynomial_kernel, dict(gamma=0.25, degree=3, coef0=1.0)),
    ("poly", dict(gamma=0.1, degree=2, coef0=0.0), pairwise.polynomial_kernel, dict(gamma=0.1, degree=2, coef0=0.0)),
    ("rbf", dict(gamma=0.6), pairwise.rbf_kernel, dict(gamma=0.6)),
    ("laplacian", dict(gamma=0.3), pairwise.laplacian_kernel, dict(gamma=0.3)),
]


@pytest.mark.parametrize("name,params,reference,ref_params", CASES)
def test_matrices_match_sklearn(name, params, reference, ref_params):
    k = Kernel(name, **params)
    np.testing.assert_allclose(k(A, B), reference(A, B, **ref_params), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(k(A), reference(A, **ref_params), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(k.diag(A), np.diag(reference(A, **ref_params)), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,params,reference,ref_params", CASES)
def test_cached_rows_match_sklearn(name, params, reference, ref_params):
    cache = Kernel(name, **params).cache(A, cache_size=8 * 50 * 5 / 2**20)  # 5 rows of 50
    full = reference(A, **ref_params)
    order = RNG.integers(0, 50, 400)
    np.testing.assert_allclose(cache.get_rows(order), full[order], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cache.diagonal, np.diag(full), rtol=1e-12, atol=1e-12)


def test_module_functions_default_gamma_is_one_over_features():
    np.testing.assert_allclose(rbf_kernel(A, B), pairwise.rbf_kernel(A, B), rtol=1e-12)
    np.testing.assert_allclose(laplacian_kernel(A, B), pairwise.laplacian_kernel(A, B), rtol=1e-12)
    np.testing.assert_allclose(polynomial_kernel(A, B), pairwise.polynomial_kernel(A, B), rtol=1e-12)
    np.testing.assert_allclose(linear_kernel(A, B), A @ B.T, rtol=1e-12)


def test_squared_distances_exact_zero_on_diagonal_and_nonnegative():
    X = np.r_[A, A[:3] + 1e-9]
    D = squared_distances(X)
    assert np.all(np.diag(D) == 0) and np.all(D >= 0)
    assert np.all(np.diag(rbf_kernel(X, gamma=3.0)) == 1.0)


def test_gamma_sigma_conversions():
    assert gamma_from_sigma(1.0) == 0.5
    assert np.isclose(sigma_from_gamma(0.125), 2.0)
    for bad in [0.0, -1.0, np.nan, np.inf, "1"]:
        with pytest.raises(ValueError, match="sigma"):
            gamma_from_sigma(bad)
        with pytest.raises(ValueError, match="gamma"):
            sigma_from_gamma(bad)


def test_gamma_scale_and_auto():
    assert np.isclose(Kernel.from_params("rbf", "scale", X=A).gamma, 1 / (A.shape[1] * A.var()))
    assert np.isclose(Kernel.from_params("rbf", "auto", X=A).gamma, 1 / A.shape[1])
    assert Kernel.from_params("rbf", "scale", X=np.ones((4, 2))).gamma == 1.0  # zero variance: sklearn's fallback


@pytest.mark.parametrize("kwargs,match", [
    (dict(kernel="gaussian"), "kernel='gaussian'; accepted values"),
    (dict(kernel="rbf", gamma=0.0), "gamma=0.0"),
    (dict(kernel="rbf", gamma=-2.0), "gamma=-2.0"),
    (dict(kernel="rbf", gamma=np.nan), "gamma=nan"),
    (dict(kernel="rbf", gamma="wide"), "gamma='wide'"),
    (dict(kernel="poly", degree=0), "degree=0"),
    (dict(kernel="poly", degree=2.5), "degree=2.5"),
    (dict(kernel="poly", coef0=-1.0), "coef0=-1.0.*positive semidefinite"),
    (dict(kernel="laplacian", gamma=True), "gamma=True"),
])
def test_bad_kernel_parameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Kernel.from_params(X=A, **kwargs)


@pytest.mark.parametrize("X,match", [
    (np.array([1.0, 2.0]), "2-D"),
    (np.zeros((0, 3)), "empty"),
    (np.array([[1.0, np.nan]]), "NaN or infinity"),
    (np.array([[1.0, np.inf]]), "NaN or infinity"),
    ([["a", "b"]], "numbers"),
])
def test_bad_matrices_are_refused(X, match):
    with pytest.raises(ValueError, match=match):
        check_matrix(X)
    with pytest.raises(ValueError, match=match):
        Kernel("rbf", gamma=1.0).cache(X)


def test_feature_mismatch():
    with pytest.raises(ValueError, match="X has 6 features but Y has 5"):
        rbf_kernel(A, B[:, :5], gamma=1.0)


@pytest.mark.parametrize("size", [0, -1.0, np.nan, np.inf, "big"])
def test_bad_cache_size(size):
    with pytest.raises(ValueError, match="cache_size"):
        Kernel("rbf", gamma=1.0).cache(A, cache_size=size)


def test_fortran_and_integer_input_are_converted():
    F = np.asfortranarray(A)
    np.testing.assert_allclose(Kernel("rbf", gamma=0.5).cache(F).get_row(4), rbf_kernel(A, gamma=0.5)[4], rtol=1e-12)
    I = np.arange(12).reshape(4, 3)
    np.testing.assert_allclose(Kernel("linear").cache(I).get_row(1), (I @ I.T)[1].astype(float))


def test_precomputed_checks():
    K = rbf_kernel(A, gamma=0.5)
    np.testing.assert_array_equal(check_precomputed_kernel(K), K)
    with pytest.raises(ValueError, match="square"):
        check_precomputed_kernel(K[:, :10])
    asym = K.copy(); asym[0, 1] += 0.1
    with pytest.raises(ValueError, match="not symmetric"):
        check_precomputed_kernel(asym)
    indefinite = K.copy(); indefinite[0, 0] = -2.0
    with pytest.raises(ValueError, match="not positive semidefinite"):
        check_precomputed_kernel(indefinite)
    with pytest.raises(ValueError, match="not positive semidefinite"):
        Kernel("precomputed").cache(indefinite)


def test_precomputed_check_above_2000_points_uses_a_shifted_cholesky():
    # beyond 2000 points the check is a Cholesky factor of K + shift I, not a full eigendecomposition
    X = np.random.default_rng(3).normal(size=(2100, 4))
    K = rbf_kernel(X, gamma=0.5)
    np.testing.assert_array_equal(check_precomputed_kernel(K), K)
    indefinite = K.copy(); indefinite[0, 1] = indefinite[1, 0] = 3.0     # a 2x2 minor [[1, 3], [3, 1]] < 0
    with pytest.raises(ValueError, match="X is not positive semidefinite: K .* I has no Cholesky factor"):
        check_precomputed_kernel(indefinite, "X")


def test_precomputed_cache_serves_the_matrix_without_evaluations():
    K = rbf_kernel(A, gamma=0.5)
    cache = Kernel("precomputed").cache(K)
    np.testing.assert_array_equal(cache.get_rows([3, 9, 3]), K[[3, 9, 3]])
    assert cache.n_kernel_evals == 0 and cache.stats()["n_hits"] == 3
    np.testing.assert_array_equal(cache.diagonal, np.diag(K))


def test_row_capacity_floor_and_ceiling():
    assert row_capacity(10**6, 1e-12) == 2
    assert row_capacity(100, 1e9) == 100
    assert row_capacity(1000, 8 * 1000 * 37 / 2**20) == 37
    assert row_capacity(1, 1.0) == 1


def test_out_of_range_rows_raise_in_python_not_in_c():
    cache = Kernel("rbf", gamma=1.0).cache(A)
    for i in (-1, 50, 10**9):
        with pytest.raises(IndexError, match="out of range"):
            cache.get_row(i)
    with pytest.raises(IndexError, match="requests must lie in"):
        replay(cache, [0, 50])


def test_replay_counts_like_get_row():
    cache = Kernel("rbf", gamma=1.0).cache(A, cache_size=8 * 50 * 3 / 2**20)
    order = RNG.integers(0, 50, 200)
    assert replay(cache, order) == pytest.approx(len(order))  # the rbf diagonal is 1
    stats = cache.stats()
    other = Kernel("rbf", gamma=1.0).cache(A, cache_size=8 * 50 * 3 / 2**20)
    other.get_rows(order)
    assert other.stats() == stats


def test_cache_is_not_picklable_but_kernel_is():
    k = Kernel("poly", gamma=0.5, degree=2, coef0=1.0)
    assert pickle.loads(pickle.dumps(k)) == k
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(k.cache(A))


def test_clear_and_reset():
    cache = Kernel("rbf", gamma=1.0).cache(A)
    cache.get_rows([1, 2, 1])
    cache.clear()
    assert cache.cached_rows() == [] and cache.n_hits == 1
    cache.reset_stats()
    assert cache.stats()["n_hits"] == 0 and cache.n_kernel_evals == 0
    np.testing.assert_allclose(cache.get_row(2), rbf_kernel(A, gamma=1.0)[2], rtol=1e-12)


FULL = [Kernel(name, **params)(A[:23]) for name, params, _, _ in CASES]


@settings(max_examples=150, deadline=None)
@given(case=st.sampled_from(range(len(CASES))),
       capacity_rows=st.one_of(st.floats(min_value=1e-9, max_value=0.999), st.integers(min_value=1, max_value=30)),
       requests=st.lists(st.integers(min_value=0, max_value=22), min_size=1, max_size=200))
def test_cache_is_an_exact_lru_and_never_returns_a_wrong_row(case, capacity_rows, requests):
    """Against a reference LRU (OrderedDict): the same rows cached in the same order, the same hits and misses,
    and every returned row equal to the full matrix's row -- for caches from a fraction of a row to all rows."""
    name, params, _, _ = CASES[case]
    n = 23
    cache = Kernel(name, **params).cache(A[:n], cache_size=capacity_rows * 8 * n / 2**20)
    expected_capacity = min(n, max(2, int(capacity_rows)))
    assert cache.capacity == expected_capacity
    model, hits, misses = OrderedDict(), 0, 0
    full = FULL[case]
    for i in requests:
        row = cache.get_row(i)
        np.testing.assert_allclose(row, full[i], rtol=1e-12, atol=1e-12)
        if i in model:
            hits += 1
            model.move_to_end(i)
        else:
            misses += 1
            model[i] = True
            if len(model) > expected_capacity:
                model.popitem(last=False)
        assert cache.cached_rows() == list(reversed(model))
    assert (cache.n_hits, cache.n_misses, cache.n_kernel_evals) == (hits, misses, misses * n)


@pytest.mark.parametrize("name", ["rbf", "linear", "poly", "laplacian", "precomputed"])
def test_a_ridge_adds_to_each_training_points_own_entry_only(name):
    X = np.random.default_rng(4).normal(size=(25, 3))
    kernel = Kernel(name, gamma=0.3, degree=2, coef0=1.0)
    data = Kernel("rbf", gamma=0.3)(X) if name == "precomputed" else X
    K = data if name == "precomputed" else kernel(X)
    kept = data.copy()
    cache = kernel.cache(data, 1.0, ridge=0.7)
    np.testing.assert_allclose(cache.get_rows(np.arange(25)), K + 0.7 * np.eye(25), atol=1e-12)
    np.testing.assert_allclose(np.asarray(cache.diagonal), np.diag(K) + 0.7, atol=1e-12)
    assert np.array_equal(data, kept) and "ridge=0.7" in repr(cache)        # the caller's matrix is untouched


@pytest.mark.parametrize("name,params,reference,ref_params", CASES)
@pytest.mark.parametrize("n", [2, 31, 33, 256, 257, 600])
def test_fill_matches_sklearn_across_its_blocks(name, params, reference, ref_params, n):
    """fill computes K's upper part in blocks of 256 rows and mirrors it below the diagonal: every entry, on both sides
    of each block's edge and of each mirrored tile (32), is the kernel's, and the ridge sits on the diagonal only."""
    X = np.random.default_rng(n).normal(size=(n, 6))
    cache = Kernel(name, **params).cache(X, 8 * n * n / 2**20 + 1, ridge=0.3)
    assert cache.fill() and cache.stats()["n_misses"] == n
    K = cache.get_rows(np.arange(n))
    np.testing.assert_allclose(K, reference(X, **ref_params) + 0.3 * np.eye(n), rtol=1e-12, atol=1e-12)
    below = np.tril_indices(n, -256)                                 # mirrored entries equal their upper twins exactly
    assert np.array_equal(K[below], K.T[below])


@pytest.mark.parametrize("ridge", [-0.1, np.inf, np.nan, True, "1"])
def test_a_bad_ridge_is_named(ridge):
    with pytest.raises(ValueError, match="ridge="):
        Kernel("rbf").cache(np.eye(3), ridge=ridge)


@pytest.mark.parametrize("name,params", [("rbf", dict(gamma=0.2)), ("poly", dict(gamma=0.5, degree=2, coef0=1.0)),
                                         ("linear", {})])
def test_sparse_rows_agree_with_the_dense_matrix(name, params):
    "Mostly-zero X takes the sparse inner products; the rows match the whole matrix, through evictions too."
    rng = np.random.default_rng(7)
    X = np.where(rng.random((300, 25)) < 0.15, rng.integers(1, 3, size=(300, 25)), 0).astype(float)
    X[5] = 0.0                                                     # an all-zero point
    kernel = Kernel(name, **params)
    cache = kernel.cache(X, 8 * 300 * 20 / 2**20)                  # 20 rows: evictions on the way
    assert cache.sparse_rows and cache.capacity == 20
    order = rng.integers(0, 300, 200)
    np.testing.assert_allclose(cache.get_rows(order), kernel(X)[order], rtol=1e-13, atol=1e-14)
    assert not kernel.cache(rng.normal(size=(30, 4))).sparse_rows


def _ulps(ours, exact):
    "Distance in units of the last place of the exact value."
    return np.abs(ours - exact) / np.spacing(np.abs(exact))


@pytest.mark.parametrize("body", EXP_BODIES)
def test_row_exponential_within_two_ulps_and_libm_at_the_edges(body):
    """The kernel rows' vectorised exp against Python's math.exp (glibc: correctly rounded but for rare cases) on the
    RBF range, the whole finite range, and the edges it hands to libm (subnormal and zero results, overflow, inf,
    NaN); every build gives the same bits."""
    rng = np.random.default_rng(5)
    x = np.concatenate([-30 * rng.random(20_000), rng.uniform(-708, 709, 20_000), rng.uniform(-1e-8, 1e-8, 1000),
                        [0.0, -0.0, -708.0, 709.0, -708.0001, 709.0001, -745.2, -800.0, 710.0, 1e-300,
                         np.inf, -np.inf, np.nan]])
    ours = x.copy()
    vector_exp(ours, body)
    exact = np.array([math.exp(v) if v < 709.8 else math.inf for v in x])
    finite = np.isfinite(exact) & (exact > 0)
    assert _ulps(ours[finite], exact[finite]).max() <= 2.0
    assert np.array_equal(ours[~finite & ~np.isnan(x)], exact[~finite & ~np.isnan(x)]) and np.isnan(ours[-1])
    reference = x.copy()
    vector_exp(reference, "baseline")
    np.testing.assert_array_equal(ours, reference)


def test_vector_exp_refuses_an_unknown_build():
    with pytest.raises(ValueError, match="body='sse9'"):
        vector_exp(np.zeros(3), "sse9")


@pytest.mark.parametrize("offset", [1e4, 1e7])
def test_rbf_far_from_the_origin_keeps_its_digits(offset):
    # distances from the differences themselves: the exact values the expansion must reach after its shift
    train, test = RNG.normal(size=(25, 3)) + offset, RNG.normal(size=(7, 3)) + offset
    exact = lambda P, Q: np.exp(-0.4 * ((P[:, None, :] - Q[None, :, :]) ** 2).sum(-1))
    kernel = Kernel("rbf", gamma=0.4)
    np.testing.assert_allclose(kernel(test, train), exact(test, train), rtol=0, atol=1e-12)
    np.testing.assert_allclose(kernel(train), exact(train, train), rtol=0, atol=1e-12)
    cache = kernel.cache(train)
    np.testing.assert_allclose(cache.get_rows(np.arange(25)), exact(train, train), rtol=0, atol=1e-12)
    cache.fill()
    np.testing.assert_allclose(cache.matrix(), exact(train, train), rtol=0, atol=1e-12)


def test_scaled_data_is_not_shifted():
    # the shift only acts where the expansion would lose digits: scaled data keeps its bits
    unit = np.random.default_rng(3).random((40, 5))
    assert np.array_equal(rbf_kernel(unit, gamma=0.5), pairwise.rbf_kernel(unit, gamma=0.5))


@pytest.mark.parametrize("name", ["rbf", "linear", "poly", "laplacian"])
def test_dot_in_row_blocks_equals_one_product(name):
    rng = np.random.default_rng(3)
    X, Y, coef = rng.normal(size=(50, 4)), rng.normal(size=(7, 4)), rng.normal(size=(7, 2))
    kernel = Kernel(name, gamma=0.3)
    three_rows = 3 * 8 * len(Y) / 2**20                   # chunk_mb that holds three rows of K(X, Y)
    for chunk_mb in (three_rows, 2 * three_rows / 3, 64.0):  # 3 rows, 2 rows, one block
        np.testing.assert_allclose(kernel.dot(X, Y, coef, chunk_mb=chunk_mb), kernel(X, Y) @ coef, rtol=1e-12)
    np.testing.assert_allclose(kernel.dot(X, Y, coef[:, 0], chunk_mb=three_rows), kernel(X, Y) @ coef[:, 0], rtol=1e-12)
