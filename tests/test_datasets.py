import hashlib
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm

from conftest import settings_for

from klrlab.config import Settings, load_settings
from klrlab import datasets as ds
from klrlab.datasets import (CANONICAL_FILES, REGISTRY, DatasetError, DatasetUnavailable, available, fetch_datasets,
                             load, scale_features, uncompress_z)

MIRROR = load_settings().mirrors
HAVE_MIRROR = bool(MIRROR) and all(Path(m).is_dir() for m in MIRROR)
needs_mirror = pytest.mark.skipif(not HAVE_MIRROR, reason="no mirror of canonical files configured (KLRLAB_MIRROR)")


def balance(y):
    values, counts = np.unique(y, return_counts=True)
    if set(values) <= {-1.0, 1.0} and len(values) == 2:
        return f"+1: {counts[values == 1][0]}, -1: {counts[values == -1][0]}"
    return f"{len(values)} classes"


# ---- the registry covers every paper ---------------------------------------------------------------------------

PAPER_DATASETS = {
    "000": [
        "banknote",
        "coil2000",
        "diabetes",
        "ionosphere",
        "magic",
        "monk2",
        "ringnorm",
        "sonar",
        "spambase",
        "twonorm",
        "waveform",
        "wisconsin",
        "consolo-synth",
    ],
    "001": [
        "banana",
        "splice",
        "raetsch-waveform",
        "tree",
        "image",
        "a1a",
        "a2a",
        "a3a",
        "a4a",
        "a5a",
        "a6a",
        "a7a",
        "a8a",
        "keerthi-gauss2d",
    ],
    "002": [
        "usps",
        "pendigits",
        "letter",
        "protein",
        "shuttle",
        "ijcnn1",
        "mnist",
        "usps-ext",
        "kdd99-10pc",
        "kdd99-full",
        "reuters",
    ]
    + [f"a{i}a" for i in range(1, 8)]
    + [f"w{i}a" for i in range(1, 9)],
    "003": [
        "zhou-example41",
        "dhrb",
        "mrpe",
        "aips",
        "sctp",
        "skin",
        "ccfd",
        "covtype-binary",
        "susy",
        "hepmass",
        "higgs",
    ]
    + [f"pcb{i}" for i in range(1, 6)]
    + [f"a{i}a" for i in range(5, 10)]
    + [f"rlc{i}" for i in range(1, 11)],
    "004": [
        "sonar",
        "heart",
        "ionosphere",
        "wbc",
        "monk1",
        "monk2",
        "monk3",
        "diabetes",
        "hillvalley",
        "german",
        "svmguide3",
        "madelon",
        "splice-c",
        "svmguide-c",
    ],
}


@pytest.mark.parametrize("paper", sorted(PAPER_DATASETS))
def test_every_paper_dataset_is_registered_with_its_stated_size(paper):
    for name in PAPER_DATASETS[paper]:
        assert name in REGISTRY, name
        assert paper in REGISTRY[name].papers, (name, paper)
    assert sorted(n for n, s in REGISTRY.items() if paper in s.papers) == sorted(set(PAPER_DATASETS[paper]))


def test_registry_is_consistent():
    for name, spec in REGISTRY.items():
        assert spec.kind in ("file", "generated", "derived", "substitute", "missing"), name
        assert all(f in CANONICAL_FILES for f in spec.files), name
        if spec.kind == "missing":
            assert spec.substitute in REGISTRY and name in REGISTRY[spec.substitute].substitute_for, name
            assert spec.notes, name
        else:
            assert spec.loader is not None and spec.licence and spec.source, name
        if spec.kind in ("file", "derived"):
            assert spec.files, name
    for f in CANONICAL_FILES.values():
        assert len(f.sha256) == 64 and f.url.startswith("http") and f.status in (
            "verified", "consensus", "git-blob-consensus", "single", "provisional")


def test_no_data_file_is_committed():
    root = Path(__file__).resolve().parents[1]
    tracked = subprocess.run(
        ["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True
    ).stdout.split()
    canonical_names = {f.file for f in CANONICAL_FILES.values()}
    assert not [t for t in tracked if Path(t).name in canonical_names]
    own_fixtures = {"tests/fixtures/ncompress-16bit-clear.Z"}         # made here; tests/fixtures/README.md says how
    assert not [t for t in tracked if Path(t).suffix in (".mat", ".asc", ".bz2", ".Z", ".data", ".t")
                and t not in own_fixtures]


# ---- every local dataset loads with the registered shape and balance ---------------------------------------------

LOCAL = [n for n, s in REGISTRY.items() if s.kind in ("file", "derived")]
SMALL_GENERATED = [n for n, s in REGISTRY.items()
                   if s.kind in ("generated", "substitute") and (s.n_train + s.n_test) * s.n_features <= 5_000_000]


@needs_mirror
@pytest.mark.parametrize("name", LOCAL)
def test_file_datasets_load_as_registered(name):
    spec = REGISTRY[name]
    data = load(name, allow_substitute=True, allow_download=False)
    y_all = np.concatenate([data.y, data.get("y_test", np.array([]))])
    assert (len(data.y), len(data.get("y_test", [])), data.X.shape[1], balance(y_all)) == \
           (spec.n_train, spec.n_test, spec.n_features, spec.balance)
    assert data.X.dtype == np.float64 and data.X.flags.c_contiguous and np.isfinite(data.X).all()
    assert data.meta["files"] and all(f["origin"] in ("mirror", "cache") for f in data.meta["files"])
    assert all(len(f["sha256"]) == 64 for f in data.meta["files"])
    assert (data.meta["substitute_for"] is not None) == (spec.kind == "derived")


@pytest.mark.parametrize("name", SMALL_GENERATED)
def test_generated_datasets_load_as_registered(name):
    spec = REGISTRY[name]
    data = load(name, allow_substitute=True, allow_download=False)
    y_all = np.concatenate([data.y, data.get("y_test", np.array([]))])
    assert (len(data.y), len(data.get("y_test", [])), data.X.shape[1]) == (spec.n_train, spec.n_test, spec.n_features)
    if not spec.balance.startswith("as generated"):
        assert balance(y_all) == spec.balance
    again = load(name, allow_substitute=True, allow_download=False)
    assert np.array_equal(again.X, data.X) and np.array_equal(again.y, data.y)


# ---- generators match their published definitions -----------------------------------------------------------------

def test_twonorm_bayes_error_and_means():
    X, y = ds.make_twonorm(100_000, seed=5)
    assert abs(np.mean(np.sign(X.sum(1)) != y) - norm.cdf(-2)) < 0.002
    assert np.allclose(X[y > 0].mean(0), 2 / np.sqrt(20), atol=0.02) and np.allclose(
        X[y < 0].mean(0), -2 / np.sqrt(20), atol=0.02
    )


def test_ringnorm_bayes_error_and_variances():
    X, y = ds.make_ringnorm(100_000, seed=5)
    assert 0.010 < ds.bayes_error_ringnorm(X, y) < 0.016
    assert np.allclose(X[y > 0].var(0), 4.0, rtol=0.05) and np.allclose(X[y < 0].var(0), 1.0, rtol=0.05)


def test_keerthi_gaussians_bayes_error_is_the_papers():
    X, y, Xt, yt = ds.make_keerthi_gaussians(400, 200_000, seed=2)
    assert X.shape == (400, 2) and Xt.shape == (200_000, 2)
    assert 0.040 < ds.bayes_error_keerthi(Xt, yt) < 0.052  # paper: 4.9 % on its 20000-point sample


def test_zhou_example41_bayes_accuracy_for_both_variances():
    for variance, expected in [(0.2, 0.9804), (0.5, 0.9693)]:
        X, y, Xt, yt = ds.make_zhou_example41(100_000, variance=variance, seed=1)
        # the Bayes rule: equal covariances, so it is linear (LDA) in the true parameters
        w = np.array([1.0 / variance, -6.0 / 3.0])
        accuracy = np.mean(np.sign(Xt @ w) == yt)
        assert abs(accuracy - expected) < 0.003, (variance, accuracy)
        assert (y == 1).sum() + (yt == 1).sum() == 100_000
        assert np.isclose(ds.bayes_accuracy_zhou_example41(variance), expected, atol=1e-4)


@pytest.mark.parametrize("m, chunk", [(11, 4), (10, 3), (1001, 1_000_000), (5000, 998)])
def test_zhou_example41_balances_each_part_chunk_by_chunk(m, chunk):
    X, y, Xt, yt = ds.make_zhou_example41(m, seed=3, chunk=chunk)
    assert X.shape == Xt.shape == (m, 2) and np.isfinite(X).all()
    assert (y > 0).sum() == (yt > 0).sum() == (m + 1) // 2 and set(np.unique(y)) == {-1.0, 1.0}
    again = ds.make_zhou_example41(m, seed=3, chunk=chunk)
    assert all(np.array_equal(a, b) for a, b in zip((X, y, Xt, yt), again))      # the seed decides everything


@pytest.mark.parametrize("kw, name", [(dict(m=1), "m"), (dict(m=2.5), "m"), (dict(chunk=0), "chunk"),
                                      (dict(variance=0.0), "variance")])
def test_zhou_example41_bad_input_is_named(kw, name):
    with pytest.raises(ValueError, match=name):
        ds.make_zhou_example41(**{"m": 10, **kw})


def test_waveform_generator_matches_uci_statistics():
    X, y = ds.make_waveform(30_000, seed=3)
    assert X.shape == (30_000, 21) and set(np.unique(y)) == {0, 1, 2}
    # class 0 mixes h1 and h2 (peaks at 11 and 15): mean at i = 13 is (4 + 4)/2... checked against the formula
    i = np.arange(1, 22)
    h1, h2 = np.maximum(6 - abs(i - 11), 0), np.maximum(6 - abs(i - 15), 0)
    assert np.allclose(X[y == 0].mean(0), (h1 + h2) / 2, atol=0.1)


@pytest.mark.parametrize("problem,counts", [(1, (216, 216)), (2, (142, 290)), (3, (228, 204))])
def test_monks_grid(problem, counts):
    X, y = ds.make_monks(problem)
    assert X.shape == (432, 6) and len({tuple(r) for r in X}) == 432
    assert ((y == 1).sum(), (y == -1).sum()) == counts


def test_monks_rule_rejects_unknown_problem():
    with pytest.raises(DatasetError, match="1, 2 and 3"):
        ds.monk_label(4, (1,) * 6)


@needs_mirror
def test_wisconsin_falls_back_to_sklearns_copy_of_the_same_values(tmp_path):
    canonical = load("wisconsin", allow_download=False)
    fallback = load("wisconsin", allow_download=False, settings=settings_for(tmp_path))
    assert "scikit-learn" in fallback.meta["source"] and not fallback.meta["files"]
    np.testing.assert_allclose(fallback.X, canonical.X, rtol=1e-12)
    np.testing.assert_array_equal(fallback.y, canonical.y)


# ---- derived series -----------------------------------------------------------------------------------------------

def _rows(X, y):
    return Counter(map(bytes, np.c_[X, y]))


@needs_mirror
def test_derived_adult_members_are_nested_and_complete():
    a3, a4, a5, a7 = (load(n, allow_substitute=True, allow_download=False) for n in ("a3a", "a4a", "a5a", "a7a"))
    r3, r4, r5, r7 = (_rows(d.X, d.y) for d in (a3, a4, a5, a7))
    assert not (r3 - r4) and not (r4 - r5) and not (r5 - r7)   # a3a ⊂ a4a ⊂ a5a ⊂ a7a
    a9 = load("a9a", allow_download=False)
    assert _rows(a4.X, a4.y) + _rows(a4.X_test, a4.y_test) == _rows(a9.X, a9.y)  # a4a ∪ a4a.t = a9a
    other_seed = load("a4a", allow_substitute=True, allow_download=False, seed=1)
    assert not np.array_equal(other_seed.X, a4.X) and not (r3 - _rows(other_seed.X, other_seed.y))


@needs_mirror
def test_rebuilt_web_test_sets_complete_w8a():
    w1, w8 = load("w1a", allow_download=False), load("w8a", allow_download=False)
    assert _rows(w1.X, w1.y) + _rows(w1.X_test, w1.y_test) == _rows(w8.X, w8.y)
    assert "rebuilt exactly" in w1.meta["notes"]


def test_substitutes_refused_unless_asked():
    with pytest.raises(DatasetUnavailable, match="allow_substitute=True"):
        load("a4a")
    with pytest.raises(DatasetUnavailable, match="substitute is 'hill-valley-like'"):
        load("hillvalley")
    sub = load("hillvalley", allow_substitute=True)
    assert sub.meta["substitute_for"] == ("hillvalley",) and sub.X.shape == (606, 100)


# ---- resolution (the rest, on synthetic files, is in test_dataset_files.py) ----------------------------------

def test_missing_everywhere_without_download(tmp_path):
    with pytest.raises(DatasetUnavailable, match="not in the cache .* or any mirror"):
        load("sonar", settings=settings_for(tmp_path), allow_download=False)
    # a loader that parses its own files (dhrb's MATLAB files) still reports a missing file as unavailable
    with pytest.raises(DatasetUnavailable, match="not in the cache .* or any mirror"):
        load("dhrb", settings=settings_for(tmp_path), allow_download=False)


def test_unparseable_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2:x 3\n")
    with pytest.raises(DatasetError, match="cannot parse"):
        ds.read_libsvm(bad)


@needs_mirror
def test_uncompress_z_reproduces_uci_shuttle():
    z = Path(MIRROR[0]) / "shuttle" / "shuttle.trn.Z"
    assert (
        hashlib.sha256(uncompress_z(z.read_bytes())).hexdigest() == CANONICAL_FILES[("shuttle", "shuttle.trn")].sha256
    )


def test_uncompress_z_rejects_garbage():
    with pytest.raises(DatasetError, match="magic"):
        uncompress_z(b"not compressed")
    with pytest.raises(DatasetError, match="corrupt"):
        uncompress_z(b"\x1f\x9d\x90" + bytes([0xFF, 0xFF, 0xFF, 0xFF]))


# ---- API: names, splits, scalings, seeds --------------------------------------------------------------------------

def test_unknown_name_suggests_close_matches():
    with pytest.raises(DatasetError, match="unknown dataset 'ionosphre'; did you mean 'ionosphere'"):
        load("ionosphre")
    with pytest.raises(DatasetError, match="klrlab data list"):
        load("zzzzzz")
    with pytest.raises(DatasetError, match="unknown dataset 'nosuch'; `klrlab data list`"):   # no far-fetched hint
        load("nosuch")


def test_settings_must_be_settings_or_none():
    with pytest.raises(TypeError, match="settings='x'; give None"):
        load("keerthi-gauss2d", settings="x")
    with pytest.raises(TypeError, match="settings=3; give None"):
        available(settings=3)


def test_generated_sets_say_their_test_part_is_generated():
    assert load("keerthi-gauss2d").meta["split"] == "the generator's own training and test parts"
    assert load("twonorm").meta["split"] == "all points (no fixed test set)"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(split="train"), "split='train'"),
        (dict(split=1.5), "strictly between 0 and 1"),
        (dict(split=0.0), "strictly between"),
        (dict(split=3), "has none"),
        (dict(split=True), "split=True"),
        (dict(scale="unit"), "scale='unit'"),
        (dict(seed=-1), "seed=-1"),
        (dict(seed=1.5), "seed=1.5"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(DatasetError, match=match):
        load("twonorm", **kwargs)


@needs_mirror
def test_realisations_and_their_bounds():
    r1, r2 = load("banana", split=1), load("banana", split=2)
    assert r1.X.shape == r2.X.shape == (400, 2) and not np.array_equal(r1.X, r2.X)
    with pytest.raises(DatasetError, match="realisations 1..10"):
        load("banana", split=11)


def test_splits_all_and_fraction():
    pooled = load("keerthi-gauss2d", split="all")
    assert pooled.X.shape == (20400, 2) and "X_test" not in pooled
    held = load("keerthi-gauss2d", split=0.25, seed=7)
    assert held.X_test.shape[0] == 5100 and held.X.shape[0] == 15300
    assert abs(np.mean(held.y_test == 1) - np.mean(np.r_[held.y, held.y_test] == 1)) < 0.005  # stratified


def test_scalings_are_fitted_on_training_only():
    X = np.array([[0.0, 5.0, 1.0], [10.0, 5.0, 3.0]])
    Xt = np.array([[20.0, 5.0, 2.0]])
    a, at = scale_features(X, Xt, "minmax01")
    np.testing.assert_allclose(a, [[0, 0, 0], [1, 0, 1]]); np.testing.assert_allclose(at, [[2, 0, 0.5]])
    b, bt = scale_features(X, Xt, "minmax11")
    np.testing.assert_allclose(b, [[-1, -1, -1], [1, -1, 1]]); np.testing.assert_allclose(bt, [[3, -1, 0]])
    c, ct = scale_features(X, Xt, "zscore")
    np.testing.assert_allclose(c, [[-1, 0, -1], [1, 0, 1]]); np.testing.assert_allclose(ct, [[3, 0, 0]])
    data = load("twonorm", scale="zscore")
    np.testing.assert_allclose(data.X.mean(0), 0, atol=1e-12); np.testing.assert_allclose(data.X.std(0), 1, rtol=1e-12)


def test_available_lists_every_name_without_loading(tmp_path):
    table = available(settings_for(tmp_path))
    assert set(table.name) == set(REGISTRY)
    assert set(table.status) <= {"cached", "mirror", "generated", "bundled", "substitute", "missing"}
    assert table.set_index("name").loc["sonar", "status"] == "missing"       # no mirror, nothing cached
    assert table.set_index("name").loc["twonorm", "status"] == "generated"
    assert table.set_index("name").loc["hillvalley", "substitute"] == "hill-valley-like"


@needs_mirror
def test_fetch_reports_each_file(tmp_path):
    report = fetch_datasets(["sonar", "banana"], allow_download=False)
    assert len(report) == 1 + 40 and (report.error == "").all() and set(report.origin) == {"mirror"}
    failed = fetch_datasets(["sonar"], settings=settings_for(tmp_path), allow_download=False)
    assert failed.error.iloc[0].startswith("sonar/sonar.all-data is not in the cache")


# ---- found by an audit: splits, seeds, fallbacks, the data home --------------------------------------------------

def test_monks_grids_are_generated_without_their_file_and_listed_so(tmp_path):
    from klrlab.datasets import make_monks, status
    settings = settings_for(tmp_path)                             # no mirror, no cache, no download
    data = load("monk2", settings=settings, allow_download=False)
    grid, rule = make_monks(2)
    assert np.array_equal(data.X, grid) and np.array_equal(data.y, rule) and data.meta["files"] == []
    assert status(REGISTRY["monk2"], settings) == "generated" and status(REGISTRY["wisconsin"], settings) == "bundled"
    assert status(REGISTRY["sonar"], settings) == "missing"


@needs_mirror
def test_monks_file_is_the_generated_grid():
    from klrlab.datasets import make_monks
    for k in (1, 2, 3):
        data = load(f"monk{k}", allow_download=False)
        assert data.meta["files"] and np.array_equal(data.X, make_monks(k)[0])


@needs_mirror
@pytest.mark.parametrize("split", ["all", 0.3, np.float32(0.3)])
def test_raetsch_sets_pool_realisation_1_for_all_and_fractions(split):
    data = load("banana", split=split, allow_download=False)
    total = len(data.y) + (len(data.y_test) if "y_test" in data else 0)
    assert total == 5300 and "realisation 1" in data.meta["notes"]


@pytest.mark.parametrize("split", [0.999, 0.001])
def test_a_fraction_too_extreme_for_a_stratified_split_is_a_dataset_error(split):
    with pytest.raises(DatasetError, match=f"split={split:g} leaves too few points"):
        load("consolo-synth", split=split)             # 99 points


def test_a_seed_beyond_32_bits_is_refused_by_load():
    with pytest.raises(DatasetError, match=r"seed=4294967296; a seed must be an integer in \[0, 2\*\*32\)"):
        load("twonorm", split=0.3, seed=2**32)


def test_an_unusable_data_home_names_itself(tmp_path):
    blocker = tmp_path / "a-file"; blocker.write_text("not a folder")
    settings = Settings(data_home=blocker / "cache", mirrors=(), profile="quick", seed=0, n_jobs=1, scheduler="local",
                        out_dir=tmp_path / "out")
    with pytest.raises(DatasetUnavailable, match="KLRLAB_DATA_HOME"):
        load("sonar", settings=settings)


def test_an_offline_miss_names_the_dataset_and_the_way_to_get_it(tmp_path):
    with pytest.raises(DatasetUnavailable, match=r"dataset 'diabetes': .*downloads are off\. Set KLRLAB_MIRROR"):
        ds.load("diabetes", allow_download=False, settings=settings_for(tmp_path))
