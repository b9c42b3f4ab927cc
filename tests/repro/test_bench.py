"""The fair KLR benchmark (issue 21): the records' fields, fairness invariants (same C, width and data per set across
methods; the tighter tolerance present), the calibrated question against scikit-learn's GridSearchCV on the same
folds, the peak-memory probe against a known allocation, the summaries against hand-computed medians, the stored
record, and bad input. No timed assertions: times are only checked to be positive."""
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import log_loss
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.svm import SVC

import klrlab.repro.bench as bench_module
from klrlab.config import load_settings
from klrlab import KernelLogisticRegression
from klrlab.cli import main
from klrlab.datasets import make_twonorm
from klrlab.repro.bench import (CALIBRATION_FOLDS, KLR_C, KLR_MATCHED_ROUTE, KLR_ROUTE, SVC_MATCHED_ROUTES, SVC_ROUTES,
                                TOLERANCES, bench, bench_calibrated, bench_fixed_C, calibrated_table, fixed_C_table,
                                headline, peak_rss_increase, pin_one_thread, read_bench_records, timing_change)
from klrlab.repro.harness import ReproError

STORED = Path(__file__).parents[2] / "nbs" / "results" / "bench_klr_before.json"
FIXED_FIELDS = {"question", "dataset", "method", "n_train", "n_test", "n_features", "C", "kernel", "gamma", "tol",
                "cache_mb", "repeats", "seconds", "median_seconds", "floor_seconds", "ratio_to_floor", "ratio_to_svc",
                "peak_rss_mib", "n_iter", "n_kernel_evals", "converged", "test_accuracy"}
CALIBRATED_FIELDS = {"question", "dataset", "method", "n_train", "n_test", "gamma", "grid", "folds", "svc_tuning",
                     "tol", "C_tuned", "cv_scores", "tune_seconds", "final_seconds", "total_seconds", "test_logloss",
                     "test_brier", "test_accuracy", "klr_time_ratio", "klr_logloss_no_worse"}


@pytest.fixture(scope="module")
def tiny():
    X, y = make_twonorm(260, n_features=4, seed=2)
    return X[:200], y[:200], X[200:], y[200:]


@pytest.fixture(scope="module")
def fixed_records(tiny):
    return bench_fixed_C("tiny", *tiny, repeats=1)


def test_fixed_C_records_have_every_field_and_every_method_at_every_C_and_tolerance(fixed_records):
    frame = pd.DataFrame(fixed_records)
    assert all(FIXED_FIELDS <= set(r) for r in fixed_records)
    methods = set(frame.method)
    assert {"klrlab KLR", "sklearn SVC"} <= methods
    combos = {(m, c, t) for m, c, t in zip(frame.method, frame.C, frame.tol)}
    assert combos == {(m, c, t) for m in methods for c in KLR_C for t in TOLERANCES}
    assert 1e-5 in set(frame.tol) and 1e-3 in set(frame.tol)                  # the tighter tolerance row is there


def test_fixed_C_is_fair_same_data_width_and_C_for_every_method(fixed_records):
    frame = pd.DataFrame(fixed_records)
    for _, part in frame.groupby(["C", "tol"]):
        assert part[["n_train", "n_test", "n_features", "gamma"]].nunique().eq(1).all()
    # each method's own cache: KLR the lab setting (it reads every row), LIBSVM its 200 MB (its support vectors' rows)
    assert frame[frame.method == "klrlab KLR"].cache_mb.eq(load_settings().cache_size).all()
    assert frame[frame.method != "klrlab KLR"].cache_mb.eq(200).all()
    assert frame.gamma.eq(0.5).all() and frame.floor_seconds.nunique() == 1 and (frame.floor_seconds > 0).all()
    assert (frame.median_seconds > 0).all() and frame.seconds.map(len).eq(1).all()
    assert np.allclose(frame[frame.method == "sklearn SVC"].ratio_to_svc, 1.0)
    assert np.allclose(frame.ratio_to_floor, frame.median_seconds / frame.floor_seconds)


def test_fixed_C_counts_and_accuracy_agree_with_independent_fits(tiny, fixed_records):
    X, y, X_test, y_test = tiny
    frame = pd.DataFrame(fixed_records).set_index(["method", "C", "tol"])
    for C in KLR_C:
        klr = KernelLogisticRegression(C=C, gamma=0.5, tol=1e-3).fit(X, y)       # deterministic: the same fit again
        row = frame.loc[("klrlab KLR", C, 1e-3)]
        assert row.n_iter == klr.n_iter_ and row.n_kernel_evals == klr.n_kernel_evals_ >= len(y) ** 2
        assert row.test_accuracy == klr.score(X_test, y_test) and row.converged
        svc = SVC(C=C, gamma=0.5, tol=1e-3).fit(X, y)
        assert frame.loc[("sklearn SVC", C, 1e-3)].n_iter == svc.n_iter_.sum()
        if ("libsvm-official svm_train", C, 1e-3) in frame.index:                 # the same LIBSVM, another binding
            libsvm = frame.loc[("libsvm-official svm_train", C, 1e-3)]
            assert abs(libsvm.test_accuracy - svc.score(X_test, y_test)) <= 1 / len(y_test) + 1e-12
            assert pd.isna(libsvm.n_iter) and pd.isna(libsvm.n_kernel_evals)


def test_peak_memory_probe_sees_a_known_allocation():
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("no /proc/self/clear_refs (not Linux): the probe reports NaN")
    grown = peak_rss_increase(lambda: np.ones(10_000_000).sum())             # 76.3 MiB of float64
    assert 66 < grown < 86
    assert abs(peak_rss_increase(lambda: None)) < 2


@pytest.fixture(scope="module")
def calibrated_records(tiny):
    return bench_calibrated("tiny", *tiny, grid=[0.1, 1.0, 10.0])


def test_calibrated_records_fields_and_sanity(calibrated_records):
    assert [r["method"] for r in calibrated_records] == [KLR_ROUTE, KLR_MATCHED_ROUTE, *SVC_ROUTES.values(),
                                                         *SVC_MATCHED_ROUTES.values()]
    for r in calibrated_records:
        assert CALIBRATED_FIELDS <= set(r)
        assert np.isfinite(r["test_logloss"]) and 0 <= r["test_brier"] <= 1 and 0 <= r["test_accuracy"] <= 1
        assert r["total_seconds"] > 0 and r["total_seconds"] == pytest.approx(r["tune_seconds"] + r["final_seconds"])
        assert r["C_tuned"] in r["grid"] and len(r["cv_scores"]) == len(r["grid"]) and r["folds"] == CALIBRATION_FOLDS
    assert calibrated_records[0]["klr_time_ratio"] == 1.0 and calibrated_records[0]["tol"] == 1e-5   # KLR's default
    assert calibrated_records[1]["tol"] == calibrated_records[2]["tol"] == 1e-3          # KLR at LIBSVM's, and LIBSVM's
    assert calibrated_records[4]["tol"] == calibrated_records[5]["tol"] == 1e-5          # LIBSVM at KLR's
    assert calibrated_records[1]["svc_tuning"] is None and calibrated_records[1]["C_tuned"] in [0.1, 1.0, 10.0]


def test_calibrated_tuning_matches_grid_search_on_the_same_folds(tiny, calibrated_records):
    X, y, X_test, y_test = tiny
    folds = StratifiedKFold(CALIBRATION_FOLDS, shuffle=True, random_state=0)
    grid = {"C": [0.1, 1.0, 10.0]}
    klr = GridSearchCV(KernelLogisticRegression(gamma=0.5), grid, scoring="neg_log_loss", cv=folds).fit(X, y)
    svc = GridSearchCV(SVC(gamma=0.5), grid, scoring="accuracy", cv=folds).fit(X, y)
    by = {r["method"]: r for r in calibrated_records}
    assert by[KLR_ROUTE]["C_tuned"] == klr.best_params_["C"]
    assert np.allclose(by[KLR_ROUTE]["cv_scores"], -klr.cv_results_["mean_test_score"])
    assert by[SVC_ROUTES[False]]["C_tuned"] == by[SVC_ROUTES[True]]["C_tuned"] == svc.best_params_["C"]
    svc_tight = GridSearchCV(SVC(gamma=0.5, tol=1e-5), grid, scoring="accuracy", cv=folds).fit(X, y)
    tight = [by[route] for route in SVC_MATCHED_ROUTES.values()]
    assert tight[0]["C_tuned"] == tight[1]["C_tuned"] == svc_tight.best_params_["C"]
    assert np.allclose(tight[0]["cv_scores"], svc_tight.cv_results_["mean_test_score"])
    refit = klr.best_estimator_
    assert by[KLR_ROUTE]["test_logloss"] == pytest.approx(log_loss(y_test, refit.predict_proba(X_test)[:, 1]))


def test_calibrated_log_loss_tuning_runs(tiny):
    records = bench_calibrated("tiny", *tiny, grid=[1.0, 10.0], svc_tuning="log_loss")
    assert all(np.isfinite(r["test_logloss"]) and r["total_seconds"] > 0 for r in records)
    assert [r["svc_tuning"] for r in records[2:]] == ["log_loss"] * 4                    # both SVC tolerances
    assert records[0]["svc_tuning"] is records[1]["svc_tuning"] is None                  # the two KLR routes


def synthetic_records():
    """Two sets at C = 1 and C = 100, tolerance 1e-3: KLR / SVC is 2, 4 (C=1) and 6, 10 (C=100); floors 0.5 and 1;
    libsvm-official takes 4 s on a and 1 s on b; CPU seconds are half the wall time for KLR and its floor, equal
    for SVC."""
    rows = []
    for dataset, floor, svc, libsvm, klr in (("a", 0.5, 1.0, 4.0, [2.0, 6.0]), ("b", 1.0, 2.0, 1.0, [8.0, 20.0])):
        for C, klr_seconds in zip((1.0, 100.0), klr):
            for method, seconds, cpu in (("klrlab KLR", klr_seconds, klr_seconds / 2), ("sklearn SVC", svc, svc),
                                         ("libsvm-official svm_train", libsvm, libsvm)):
                rows.append(dict(question="fixed_C", group="bench", dataset=dataset, n_train=10, C=C, tol=1e-3,
                                 method=method, median_seconds=seconds, median_cpu_seconds=cpu, floor_seconds=floor,
                                 floor_cpu_seconds=floor / 2, n_iter=1, n_kernel_evals=100, peak_rss_mib=1.0))
    for dataset, klr, cal, cal_ens, ll in (("a", 1.0, 2.0, 4.0, [0.1, 0.2, 0.05]),
                                           ("b", 3.0, 2.0, 3.0, [0.3, 0.2, 0.4])):
        for method, seconds, loss in zip((KLR_ROUTE, *SVC_ROUTES.values()), (klr, cal, cal_ens), ll):
            rows.append(dict(question="calibrated", group="bench", dataset=dataset, n_train=10, method=method,
                             total_seconds=seconds, C_tuned=1.0, test_logloss=loss, test_brier=0.1,
                             test_accuracy=0.9))
    return rows


def test_summaries_reproduce_hand_computed_medians():
    records = synthetic_records()
    fixed = fixed_C_table(records)
    assert list(fixed.klr_over_svc) == [2.0, 6.0, 4.0, 10.0] and list(fixed.klr_over_floor) == [4.0, 12.0, 8.0, 20.0]
    assert list(fixed.klr_over_libsvm) == [0.5, 1.5, 8.0, 20.0] and list(fixed.floor_over_svc) == [0.5, 0.5, 0.5, 0.5]
    assert list(fixed.klr_over_svc_cpu) == [1.0, 3.0, 2.0, 5.0]
    assert list(fixed.klr_over_floor_cpu) == [4.0, 12.0, 8.0, 20.0]
    h = headline(records)
    assert h["KLR / SVC, C=1"] == 3.0 and h["KLR / SVC, C=100"] == 8.0 and h["KLR / floor, C=1"] == 6.0
    assert h["KLR / libsvm-official, C=1"] == 4.25 and h["KLR / libsvm-official, C=100"] == 10.75
    assert h["KLR / SVC (CPU time), C=1"] == 1.5 and h["KLR / floor (CPU time), C=100"] == 16.0
    assert h["KLR time / calibrated SVC (ensemble=False)"] == pytest.approx(np.median([0.5, 1.5]))
    assert h["KLR time / calibrated SVC (ensemble=True)"] == pytest.approx(np.median([0.25, 1.0]))
    assert h["KLR log-loss no worse (ensemble=False), sets"] == 1      # a: 0.1 <= 0.2; b: 0.3 > 0.2
    assert h["KLR log-loss no worse (ensemble=True), sets"] == 1       # a: 0.1 > 0.05; b: 0.3 <= 0.4
    assert h["calibrated sets"] == 2


def test_summaries_add_the_matched_tolerance_route_when_the_record_has_it():
    "A record with KLR's route at LIBSVM's tolerance gets its ratios and log-loss wins beside the default route's."
    records = synthetic_records()
    assert not any("LIBSVM's tol" in key for key in headline(records))            # an older record: no such route
    for dataset, seconds, loss in (("a", 0.5, 0.1), ("b", 1.0, 0.1)):
        records.append(dict(question="calibrated", group="bench", dataset=dataset, n_train=10, method=KLR_MATCHED_ROUTE,
                            total_seconds=seconds, C_tuned=1.0, test_logloss=loss, test_brier=0.1, test_accuracy=0.9))
    table, h = calibrated_table(records), headline(records)
    assert list(table.klr_matched_over_svc_cal) == [0.25, 0.5] and list(table.klr_over_svc_cal) == [0.5, 1.5]
    assert h["KLR at LIBSVM's tol time / calibrated SVC (ensemble=False)"] == pytest.approx(0.375)
    assert h["KLR at LIBSVM's tol time / calibrated SVC (ensemble=True)"] == pytest.approx(np.median([0.125, 1 / 3]))
    assert h["KLR at LIBSVM's tol log-loss no worse (ensemble=False), sets"] == 2      # 0.1 <= 0.2 on both
    assert h["KLR at LIBSVM's tol log-loss no worse (ensemble=True), sets"] == 1       # a: 0.1 > 0.05; b: 0.1 <= 0.4


def test_summaries_add_the_svc_routes_at_klr_tolerance_when_the_record_has_them():
    "A record with the SVC routes at KLR's tolerance gets KLR's ratios and log-loss wins against them too."
    records = synthetic_records()
    assert not any("at KLR's tol" in key for key in headline(records))            # an older record: no such routes
    for dataset, cal, cal_ens, ll in (("a", 4.0, 8.0, [0.3, 0.05]), ("b", 3.0, 6.0, [0.3, 0.4])):
        for route, seconds, loss in zip(SVC_MATCHED_ROUTES.values(), (cal, cal_ens), ll):
            records.append(dict(question="calibrated", group="bench", dataset=dataset, n_train=10, method=route,
                                total_seconds=seconds, C_tuned=1.0, test_logloss=loss, test_brier=0.1,
                                test_accuracy=0.9))
    table, h = calibrated_table(records), headline(records)
    assert list(table.klr_over_svc_cal_tight) == [0.25, 1.0] and list(table.klr_over_svc_cal_ens_tight) == [0.125, 0.5]
    assert list(table.klr_over_svc_cal) == [0.5, 1.5]                              # the default pairing unchanged
    assert h["KLR time / calibrated SVC at KLR's tol (ensemble=False)"] == pytest.approx(0.625)
    assert h["KLR time / calibrated SVC at KLR's tol (ensemble=True)"] == pytest.approx(0.3125)
    assert h["KLR log-loss no worse at KLR's tol (ensemble=False), sets"] == 2     # 0.1 <= 0.3; 0.3 <= 0.3
    assert h["KLR log-loss no worse at KLR's tol (ensemble=True), sets"] == 1      # a: 0.1 > 0.05; b: 0.3 <= 0.4
    assert h["KLR time / calibrated SVC (ensemble=False)"] == pytest.approx(1.0)   # and the default ones stay


def test_timing_change_recovers_each_methods_factor_fit_by_fit():
    "The same fits twice, each method slowed by its own factors: the lowest, median and highest of each are found."
    earlier = synthetic_records()
    slower = {"klrlab KLR": {"a": 3.0, "b": 1.0}, "sklearn SVC": {"a": 2.0, "b": 2.0},
              "libsvm-official svm_train": {"a": 0.5, "b": 1.5}}
    later = [dict(r) for r in earlier]
    for r in later:
        if r["question"] != "fixed_C": continue
        r["median_seconds"] *= slower[r["method"]][r["dataset"]]
        r["floor_seconds"] *= 4.0
    change = timing_change(earlier, later)
    assert list(change.index) == ["floor (rbf_kernel)", "KLR", "SVC", "libsvm-official"]
    assert (change.fits == 4).all()                                                 # two sets at two C
    assert change.loc["KLR"].tolist()[:3] == [1.0, 2.0, 3.0] and change.loc["SVC"].tolist()[:3] == [2.0, 2.0, 2.0]
    assert change.loc["libsvm-official"].tolist()[:3] == [0.5, 1.0, 1.5]
    assert change.loc["floor (rbf_kernel)"].tolist()[:3] == [4.0, 4.0, 4.0]
    only_b = [r for r in later if r.get("dataset") != "a"]
    assert (timing_change(earlier, only_b).fits == 2).all()                         # the fits both records have
    with pytest.raises(ValueError, match="share no fixed-C fit"):
        timing_change(earlier, later, tol=1e-5)


def test_read_bench_records_orders_by_run_time(tmp_path):
    runs = (("bench_klr_new", "2026-11-26T00:00:00Z"), ("bench_klr_before", "2026-11-25T00:00:00Z"),
            ("bench-klr-20261127T000000Z", "2026-11-27T00:00:00Z"), ("bench-svm-20261128T000000Z", "2026-11-28T"))
    for name, when in runs:
        (tmp_path / f"{name}.json").write_text(json.dumps(dict(environment=dict(when=when), records=[])))
    # the stored records and the command's own (bench-klr-<time>), not another family's
    assert list(read_bench_records(tmp_path)) == ["bench_klr_before", "bench_klr_new", "bench-klr-20261127T000000Z"]


def test_pin_one_thread_sets_every_thread_variable(monkeypatch):
    for name in bench_module.ONE_THREAD_VARIABLES: monkeypatch.setenv(name, "4")
    monkeypatch.setitem(sys.modules, "libsvm.svmutil", sys.modules.get("libsvm.svmutil", object()))
    with pytest.warns(RuntimeWarning, match="imported before OMP_NUM_THREADS=1"):   # too late for OpenMP: say so
        previous = pin_one_thread()
    assert previous == dict.fromkeys(bench_module.ONE_THREAD_VARIABLES, "4")
    assert all(os.environ[name] == "1" for name in bench_module.ONE_THREAD_VARIABLES)


@pytest.mark.filterwarnings("ignore:libsvm-official was imported before")
def test_bench_writes_a_named_record_with_both_questions(tiny, tmp_path, monkeypatch):
    from types import SimpleNamespace
    X, y, X_test, y_test = tiny
    monkeypatch.setattr(bench_module, "_bench_data", lambda name, family, seed, offline: SimpleNamespace(
        X=X, y=y, X_test=X_test, y_test=y_test))
    frame = bench(["twonorm"], scaling=["a1a"], repeats=1, grid=[1.0, 10.0], out=tmp_path, record="bench_klr_test",
                  memory=False)
    payload = json.loads((tmp_path / "bench_klr_test.json").read_text())
    assert {"environment", "parameters", "records", "skipped"} <= set(payload)
    p = payload["parameters"]
    assert p["C"] == list(KLR_C) and p["tol"] == list(TOLERANCES) and p["gamma"] == 0.5 and p["grid"] == [1.0, 10.0]
    assert p["threads"]["OMP_NUM_THREADS"] == "1" and p["memory"] is None and p["scaling"] == ["a1a"]
    assert set(frame.group) == {"bench", "scaling"} and set(frame.question) == {"fixed_C", "calibrated"}
    assert frame[frame.question == "fixed_C"].peak_rss_mib.isna().all()


def test_same_C_question_keeps_the_one_C_comparison(tiny, monkeypatch):
    from types import SimpleNamespace
    X, y, X_test, y_test = tiny
    monkeypatch.setattr(bench_module, "_bench_data", lambda name, family, seed, offline: SimpleNamespace(
        X=X, y=y, X_test=X_test, y_test=y_test))
    frame = bench(["twonorm"], C=1.0, gamma="scale", tol=1e-3, questions=["same_C"], repeats=1)
    assert set(frame.question) == {"same_C"} and "sklearn SVC + CalibratedClassifierCV" in set(frame.method)
    assert frame.ratio_to_klr.iloc[0] == 1.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(questions=["nope"]), "unknown question 'nope'"),
    (dict(C=-1), "C = -1; accepted: a number > 0"),
    (dict(C=[1, "x"]), "accepted: a number > 0 or a list of them"),
    (dict(tol=0), "tol = 0; accepted"),
    (dict(gamma="auto"), "gamma = 'auto'; accepted: 'scale' or a number > 0"),
    (dict(grid=[0.1, 0]), "grid = [0.1, 0]; accepted"),
    (dict(svc_tuning="brier"), "unknown svc_tuning 'brier'"),
    (dict(record="a/b"), "record = 'a/b'; accepted: a file name without folders"),
    (dict(record=".."), "record = '..'; accepted: a file name without folders"),
    (dict(kernel="linear", questions=["fixed_C"]), "with the linear kernel: same_C"),
    (dict(family="svm", C=[1, 100]), "the svm family takes one C and one tolerance"),
    (dict(family="svm", datasets=["a1a"], scaling=["a1a"]), "only the klr family has scaling sets"),
    (dict(scaling=["nosuchset"]), "unknown dataset 'nosuchset'"),
    (dict(calibrated_repeats=0), "calibrated_repeats = 0"),
])
def test_bad_input_names_the_parameter(kwargs, message):
    kwargs = dict(datasets=[]) | kwargs
    with pytest.raises(ReproError) as error:
        bench(**kwargs)
    assert message in str(error.value)


def test_bench_calibrated_refuses_a_bad_grid(tiny):
    with pytest.raises(ReproError, match="grid"):
        bench_calibrated("tiny", *tiny, grid=[])


@pytest.mark.parametrize("argv, message", [
    (["bench", "--C", "1,abc"], "--C '1,abc'; accepted: comma-separated numbers"),
    (["bench", "--gamma", "wide"], "--gamma 'wide'; accepted"),
    (["bench", "--questions", "fixed_C,other", "--datasets", "wisconsin"], "unknown question 'other'"),
])
def test_cli_bad_bench_input_exits_2(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(not STORED.exists(), reason="no stored before-record")
def test_stored_record_is_complete_and_fair():
    payload = json.loads(STORED.read_text())
    p, records = payload["parameters"], payload["records"]
    assert p["family"] == "klr" and p["threads"]["OMP_NUM_THREADS"] == "1" and p["repeats"] >= 3
    assert {"tree"} <= {s["dataset"] for s in payload["skipped"]}            # a set the mirror lacks is listed
    fixed = pd.DataFrame([r for r in records if r["question"] == "fixed_C"])
    assert set(fixed.C) == set(p["C"]) == {1.0, 100.0} and set(fixed.tol) == set(p["tol"]) == {1e-3, 1e-5}
    for _, part in fixed.groupby(["dataset", "C", "tol"]):
        assert part.method.nunique() == len(part) >= 2
        assert part[["n_train", "n_test", "n_features", "gamma", "floor_seconds"]].nunique().eq(1).all()
    klr = fixed[fixed.method == "klrlab KLR"]
    assert (klr.n_kernel_evals >= klr.n_train ** 2).all() and klr.converged.all()
    calibrated = pd.DataFrame([r for r in records if r["question"] == "calibrated"])
    assert set(calibrated.dataset) == set(fixed.dataset)
    assert np.isfinite(calibrated.test_logloss).all() and (calibrated.total_seconds > 0).all()
    assert calibrated.C_tuned.isin(p["grid"]).all()
    assert len(headline(records)) >= 10 and len(calibrated_table(records)) == calibrated.dataset.nunique()


def test_fair_questions_see_features_scaled_to_the_unit_interval(monkeypatch):
    from types import SimpleNamespace
    from klrlab.datasets import scale_features
    X, y = make_twonorm(200, n_features=4, seed=5)                  # unit-variance features, far outside [0, 1]
    X, X_test, y, y_test = 3 * X[:150] + 2, 3 * X[150:] + 2, y[:150], y[150:]
    monkeypatch.setattr(bench_module, "_bench_data", lambda name, family, seed, offline: SimpleNamespace(
        X=X, y=y, X_test=X_test, y_test=y_test))
    frame = bench(["twonorm"], C=[1.0], tol=[1e-3], questions=["fixed_C"], repeats=1, memory=False)
    klr = frame[frame.method == "klrlab KLR"].iloc[0]
    X01, X01_test = scale_features(X, X_test, "minmax01")
    assert X01.min() == 0 and X01.max() == 1
    oracle = KernelLogisticRegression(C=1.0, gamma=0.5, tol=1e-3).fit(X01, y)
    assert klr.n_iter == oracle.n_iter_ and klr.test_accuracy == oracle.score(X01_test, y_test)


def test_the_floor_computes_every_kernel_row_once_also_in_blocks(monkeypatch):
    import sklearn.metrics.pairwise as pairwise
    X = np.random.default_rng(0).random((50, 3))
    rows = []
    real = pairwise.rbf_kernel
    def counting(A, B, gamma):
        rows.append((len(A), len(B))); return real(A, B, gamma=gamma)
    monkeypatch.setattr(pairwise, "rbf_kernel", counting)
    monkeypatch.setattr(bench_module, "FLOOR_BLOCK_BYTES", 8 * 50 * 7)     # blocks of 7 rows
    wall, cpu = bench_module.kernel_floor(X, 0.5, repeats=1)
    per_matrix = rows[: len(rows) // 2]                                      # the warm-up, then the timed matrix
    assert sum(a for a, _ in per_matrix) == 50 and all(b == 50 for _, b in rows) and max(a for a, _ in rows) == 7
    assert wall > 0 and cpu >= 0


# ---- the path family ----------------------------------------------------------------------------------------------
STORED_PATH = Path(__file__).resolve().parents[2] / "nbs" / "results" / "bench_path.json"


@pytest.mark.filterwarnings("ignore:libsvm-official was imported before")
def test_path_family_times_the_path_the_sweeps_and_both_cv_routes(monkeypatch, tmp_path):
    from types import SimpleNamespace
    X, y = make_twonorm(90, n_features=4, seed=3)
    monkeypatch.setattr(bench_module, "_bench_data", lambda name, family, seed, offline: SimpleNamespace(X=X, y=y))
    frame = bench(["sonar"], family="path", gamma=0.2, repeats=1, out=tmp_path, record="bench_path_test")
    payload = json.loads((tmp_path / "bench_path_test.json").read_text())
    assert payload["parameters"]["family"] == "path" and payload["parameters"]["gamma"] == 0.2
    assert set(frame.question) == {"path", "cv"} and len(frame) == 5 and (frame.median_seconds > 0).all()
    path = frame[frame.question == "path"].set_index("method")
    assert path.ratio_to_path["klrlab SVCPath"] == 1.0 and path.certificate.dropna().iloc[0] <= 1e-3
    cv = frame[frame.question == "cv"].set_index("method")
    grid = cv.loc[f"GridSearchCV(SVC, {bench_module.PATH_GRID_SIZE} C)"]
    low, high = 1e-4, 1e3
    assert low <= cv.chosen_C.min() and cv.chosen_C.max() <= high
    assert cv.path_cv_error["klrlab cv_path + SVCPath"] <= grid.path_cv_error + 1e-12   # the curve's minimum


def test_path_family_default_width_is_the_papers_sigma():
    from klrlab.kernels import gamma_from_sigma
    assert bench_module.PATH_GAMMA == gamma_from_sigma(0.5)
    with pytest.raises(ReproError, match="the path family takes one C and one tolerance"):
        bench([], family="path", tol=[1e-3, 1e-5])


@pytest.mark.skipif(not STORED_PATH.exists(), reason="no stored path record")
def test_stored_path_record_has_every_set_and_both_questions():
    payload = json.loads(STORED_PATH.read_text())
    p, records = payload["parameters"], pd.DataFrame(payload["records"])
    assert p["family"] == "path" and p["threads"]["OMP_NUM_THREADS"] == "1" and p["repeats"] >= 3
    assert set(records.dataset) == set(p["datasets"]) == set(bench_module.PATH_BENCH_DATASETS)
    assert (records.groupby("dataset").method.nunique() == 5).all() and (records.median_seconds > 0).all()
    path = records[records.method == "klrlab SVCPath"]
    assert (path.certificate <= 1e-3).all()
    cv = records[records.question == "cv"].pivot_table(index="dataset", columns="method", values="path_cv_error")
    assert (cv.iloc[:, 1] <= cv.iloc[:, 0] + 1e-12).all()       # the path's choice is the exact curve's minimum


def test_large_fit_runs_each_method_in_its_own_process_and_refuses_an_unknown_one():
    "issue 21's memory-and-scale record: a fresh process per fit, its own peak memory, KLR certified; bad method named."
    from klrlab.repro.bench import bench_large, large_fit, large_fit_table
    klr, svc = (large_fit("keerthi-gauss2d", method) for method in ("klr", "svc"))
    assert klr["pid"] != svc["pid"] != os.getpid()
    assert klr["converged"] and klr["kkt_violation"] <= klr["tol"] and klr["kernel_evals_over_n2"] >= 1
    assert svc["n_support"] > 0 and svc["gamma"] == klr["gamma"] and svc["n_train"] == klr["n_train"] == 400
    table = large_fit_table([klr, svc])
    assert table.klr_over_svc.iloc[0] == pytest.approx(klr["wall_seconds"] / svc["wall_seconds"])
    with pytest.raises(ReproError, match="method"):
        large_fit("keerthi-gauss2d", "liblinear")


def test_stored_large_fit_record_has_both_methods_on_each_large_set():
    path = Path(__file__).parents[2] / "nbs" / "results" / "klr_large_fits.json"
    if not path.exists(): pytest.skip("the large-set record is not stored in this checkout")
    from klrlab.repro.bench import LARGE_SETS, large_fit_table
    records = json.loads(path.read_text())["records"]
    assert {(r["dataset"], r["method"]) for r in records} == {(s, m) for s in LARGE_SETS for m in ("klr", "svc")}
    assert all(r["converged"] and r["kkt_violation"] <= r["tol"] for r in records if r["method"] == "klr")
    assert len(large_fit_table(records)) == len(LARGE_SETS)


@pytest.mark.parametrize("family", ["svm", "linear"])
def test_a_set_without_a_test_file_gets_the_default_hold_out_in_every_family(family):
    from klrlab.repro.bench import _bench_data
    data = _bench_data("twonorm", family, 0, True)            # generated: no test part of its own
    assert data.X_test is not None and len(data.y_test) == round(0.3 * (len(data.y) + len(data.y_test)))


@pytest.fixture
def calibrated_payload(tiny, tmp_path, monkeypatch):
    "A question (b) record of a two-set grid on `tiny`, which the bench's loader then returns for any set name."
    from types import SimpleNamespace
    X, y, X_test, y_test = tiny
    monkeypatch.setattr(bench_module, "_bench_data", lambda name, family, seed, offline: SimpleNamespace(
        X=X, y=y, X_test=X_test, y_test=y_test))
    bench(["twonorm"], repeats=1, grid=[1.0, 10.0], out=tmp_path, record="calibrated", memory=False,
          questions=["calibrated"])
    return json.loads((tmp_path / "calibrated.json").read_text())


def test_paired_log_loss_refits_the_record_and_pairs_point_by_point(tiny, calibrated_payload):
    from sklearn.calibration import CalibratedClassifierCV
    X, y, X_test, y_test = tiny
    payload = calibrated_payload
    pairs = bench_module.paired_log_loss(payload)
    assert len(pairs) == 2 and list(pairs.ensemble) == [False, True] and (pairs.n_test == len(y_test)).all()
    # an independent pairing: the SVC route's refit (ensemble=False) scored by scikit-learn, point by point, on the
    # features as the bench's fair questions see them (scaled to [0, 1] on the training part)
    from klrlab.datasets import scale_features
    X, X_test = scale_features(X, X_test, "minmax01")
    svc_row = next(r for r in payload["records"] if r["method"] == SVC_ROUTES[False])
    folds = StratifiedKFold(CALIBRATION_FOLDS, shuffle=True, random_state=0)
    svc = CalibratedClassifierCV(SVC(C=svc_row["C_tuned"], gamma=svc_row["gamma"], tol=svc_row["tol"]), cv=folds,
                                 ensemble=False).fit(X, y)
    klr_row = next(r for r in payload["records"] if r["method"] == KLR_ROUTE)
    klr = KernelLogisticRegression(C=klr_row["C_tuned"], gamma=klr_row["gamma"], tol=klr_row["tol"]).fit(X, y)
    point = lambda model: np.array([log_loss([t], model.predict_proba(x[None]), labels=model.classes_)
                                    for x, t in zip(X_test, y_test)])
    difference = point(klr) - point(svc)
    row = pairs.iloc[0]
    assert np.isclose(row.difference, difference.mean(), rtol=1e-6, atol=1e-9)
    assert np.isclose(row.paired_se, difference.std(ddof=1) / np.sqrt(len(difference)), rtol=1e-6)
    assert np.isclose(row.svc_cal_logloss, svc_row["test_logloss"], rtol=1e-9)


def test_tempered_log_loss_reruns_klr_route_with_and_without_the_temperature(tiny, calibrated_payload):
    "The plain rerun reproduces the record; the tempered one has TemperatureScaled's T at its C; SVC's: the record's."
    from klrlab import TemperatureScaled
    from klrlab.datasets import scale_features
    X, y, X_test, y_test = tiny
    payload = calibrated_payload
    row = bench_module.tempered_log_loss(payload).iloc[0]
    by_route = {r["method"]: r for r in payload["records"]}
    assert np.isclose(row.klr_logloss, by_route[KLR_ROUTE]["test_logloss"], rtol=1e-3) and row.klr_C in (1.0, 10.0)
    assert row.svc_cal_logloss == by_route[SVC_ROUTES[False]]["test_logloss"]
    assert row.svc_cal_ens_logloss == by_route[SVC_ROUTES[True]]["test_logloss"] and row.tempered_over_plain_time > 0
    X, X_test = scale_features(X, X_test, "minmax01")
    folds = StratifiedKFold(CALIBRATION_FOLDS, shuffle=True, random_state=0)
    klr = by_route[KLR_ROUTE]
    wrapped = TemperatureScaled(KernelLogisticRegression(C=row.tempered_C, gamma=klr["gamma"], tol=klr["tol"]),
                                cv=folds).fit(X, y)
    assert np.isclose(row.temperature, wrapped.temperature_, rtol=1e-4)
    assert np.isclose(row.tempered_logloss, log_loss(y_test, wrapped.predict_proba(X_test)), rtol=1e-4)


@pytest.mark.parametrize("compare", ["paired_log_loss", "tempered_log_loss"])
def test_record_comparisons_refuse_a_record_their_refits_do_not_reproduce(calibrated_payload, compare):
    "A record made on other data or code is refused, not compared; so is one without question (b)."
    payload = calibrated_payload
    tampered = dict(payload, records=[dict(r, test_logloss=r["test_logloss"] * 1.1) if r["method"] == KLR_ROUTE else r
                                      for r in payload["records"]])
    with pytest.raises(ReproError, match="other data or code"):
        getattr(bench_module, compare)(tampered)
    with pytest.raises(ReproError, match="question"):
        getattr(bench_module, compare)(dict(payload, records=[]))
    if compare == "tempered_log_loss":
        with pytest.raises(ReproError, match="repeats = 0"):
            bench_module.tempered_log_loss(payload, repeats=0)

def test_binary_families_refuse_a_multi_class_set_by_name(monkeypatch):
    from types import SimpleNamespace
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3)), np.repeat([0, 1, 2], 20)
    monkeypatch.setattr(bench_module, "_bench_data", lambda name, family, seed, offline: SimpleNamespace(
        X=X, y=y, X_test=X, y_test=y))
    for family in ("svm", "linear", "path"):
        with pytest.raises(ReproError, match="dataset 'waveform-3class' has 3 classes; the .* family's methods are binary"):
            bench(["waveform-3class"], family=family, repeats=1)


def test_a_stand_in_set_is_skipped_with_the_benchmarks_reason():
    frame = bench(["tree-like"], repeats=1, offline=True)
    (skip,) = frame.attrs["skipped"]
    assert skip["dataset"] == "tree-like" and "benchmark times canonical sets only" in skip["reason"]
