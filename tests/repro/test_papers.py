"""The papers' protocols through the harness: Consolo et al.'s tables line up with the published ones, configuration
filters, the paper's averages, and the l1/2 chain's lockstep grid."""
import json

import numpy as np
import pandas as pd
import pytest

from klrlab.repro.harness import Experiment, Protocol, ReproError, expand, published, run


def test_consolo_tables_line_up_with_the_published_ones(tmp_path):
    from klrlab.repro.papers.consolo import CV, paper_grid
    small = Experiment(
        "cv",
        "small",
        ["wisconsin"],
        CV.configs,
        paper_grid([1.0, 100.0], 3),
        CV.run_point,
        CV.summarize,
        folds=[0, 1],
        load=CV.load,
        published=CV.published,
    )
    result = run(Protocol("consolo", "small", (small,)), profile="quick", out=tmp_path, progress=False)
    assert set(result.tables) == {"table2", "table3", "table4", "table5", "probabilities"}
    for name, table in result.tables.items():
        if name == "probabilities": continue                           # not in the paper
        mine = table[table.dataset == "wisconsin"].dropna(subset=["ours"])
        assert len(mine) and mine.paper.notna().all(), name          # every number of ours has the paper's beside it
    t3 = result.tables["table3"].set_index(["dataset", "method", "selection", "run", "metric"])
    for run_label in ("converged", "capped"):                           # both runs, each beside the paper's number
        assert t3.loc[("wisconsin", "KLR-2ord", "best", run_label, "ratio"), "paper"] == 0.978
    cells = result.cells["cv"].query("status == 'done'")
    assert (cells[cells.config.str.endswith("-capped")].n_iter <= 10_000).all()
    heuristic = cells[cells.config == "2ord-heuristic"]
    assert len(heuristic) and np.allclose(heuristic.lam, heuristic.C / 10)     # the lambda actually used is recorded
    t4 = result.tables["table4"].dropna(subset=["ours"])
    assert set(t4.run) == {"converged", "capped"} and set(t4.method) == {"S-KLR-1ord", "S-KLR-2ord", "2ord/1ord"}
    probs = result.tables["probabilities"]
    assert set(probs.metric) == {"log-loss", "Brier", "ECE", "accuracy", "ratio"} and probs.ours.notna().all()
    skipped = result.cells["cv"].query("status == 'skipped'")
    # no lambda grid for those
    assert (
        set(skipped.config) == {"SVM", "2ord-heuristic", "IVM", "IVM-all", "L1/2-KLR", "L1/2-SpaRSA", "SVC+Platt"}
        and (skipped.k > 0).all()
    )


def test_configs_filter_runs_only_those_and_rejects_unknown_names(tmp_path):
    from klrlab.repro.papers.consolo import PROTOCOL
    chains = expand(PROTOCOL, "quick", 0, configs=["2ord", "SVM"])
    assert {cells[0].config for _, cells in chains} == {"2ord", "SVM"}
    with pytest.raises(ReproError, match="unknown configuration of consolo '3ord'; accepted values: .*2ord-capped"):
        run("consolo", profile="quick", out=tmp_path, configs=["3ord"], progress=False)


def test_a_configuration_subset_still_writes_every_table(tmp_path):
    from klrlab.repro.papers.consolo import CV, paper_grid
    tiny = Experiment("cv", "tiny", ["wisconsin"], CV.configs, paper_grid([1.0], 2), CV.run_point, CV.summarize,
                      folds=[0], load=CV.load, published=CV.published)
    result = run(Protocol("consolo", "tiny", (tiny,)), profile="quick", out=tmp_path, configs=["SVM"], progress=False)
    assert set(result.tables) == {"table2", "table3", "table4", "table5", "probabilities"}
    assert result.tables["table3"].ours.isna().all() and len(result.tables["table3"])   # the paper's rows, none of ours
    svm = result.tables["table2"].query("method == 'SVM' and dataset == 'wisconsin'")
    assert svm.ours.notna().all() and len(svm) == 4


def test_consolo_averages_need_all_twelve_datasets():
    from klrlab.repro.papers.consolo import DATASETS, timing_rows, with_average
    rows = []
    for i, dataset in enumerate(DATASETS):
        for config, seconds, iterations in (("1ord-capped", 2.0 + i, 100.0), ("2ord-capped", 1.0 + i, 50.0)):
            rows.append(
                dict(
                    dataset=dataset,
                    config=config,
                    status="done",
                    fit_seconds=seconds,
                    n_iter=iterations,
                    converged=True,
                )
            )
    cells = pd.DataFrame(rows)
    table = with_average(timing_rows(cells, "capped"), len(DATASETS))
    ratio = table.query("dataset == 'average' and method == '2ord/1ord'")
    # mean of the ratios
    assert len(ratio) == 1 and np.isclose(ratio.value.iloc[0], np.mean([(1.0 + i) / (2.0 + i) for i in range(12)]))
    assert np.isnan(ratio["std"].iloc[0])                                       # the std is for accuracies only
    partial = with_average(timing_rows(cells[cells.dataset != "magic"], "capped"), len(DATASETS))
    assert "average" not in set(partial.dataset)                                # 11 datasets: no average


def test_consolo_l12_chain_fits_its_grid_once_and_hands_it_on():
    from klrlab.repro.papers.consolo import GRIDS, consolo_point, fold_parts, grid_from, load_consolo
    from klrlab.repro.harness import Cell, SkipPoint
    cell = lambda point, config="L1/2-KLR": Cell(
        "consolo", "cv", "wisconsin", "0", config, json.dumps(point, sort_keys=True), 0
    )
    assert grid_from(cell(GRIDS["paper"][20])) == [10.0 ** r for r in range(-2, 5)]      # C = 1e-2 and the larger ones
    assert grid_from(cell({"C": 3.0, "k": 0, "n_lam": 2})) == [3.0]                     # a point in no grid: its own C
    data = load_consolo("wisconsin")
    # C in {1e-2, 1, 1e2}, 4 lambda each
    quick = GRIDS["quick"]
    metrics, state = consolo_point(data, cell(quick[4]), None)                          # C = 1: fits C = 1 and 100
    assert sorted(state["models"]) == [1.0, 100.0]
    assert metrics["n_train"] == len(fold_parts(data, 0, 0)[1])                         # the fold's size, as run
    with pytest.raises(SkipPoint) as skip:
        consolo_point(data, cell(quick[5]), state)
    # k > 0: no fit, the models go on
    assert skip.value.state is state
    again, same = consolo_point(data, cell(quick[8]), state)                            # C = 100: taken from the state
    assert same is state and again["test_ratio"] == state["models"][100.0][1].support_fraction_
    with pytest.raises(SkipPoint) as skip:
        consolo_point(data, cell(quick[5], "SVM"), None)
    assert skip.value.state is None


def test_consolo_loads_each_set_whole_as_table_1_counts_it():
    from klrlab.datasets import REGISTRY
    from klrlab.repro.harness import loadable
    from klrlab.repro.papers.consolo import DATASETS, load_consolo
    table1 = published("consolo", "table1").query("metric == 'N'").set_index("dataset").value
    # the sets the mirror or the package can give; spambase: UCI's 4 601 rows, the paper's 4 597 are KEEL's copy
    here = [d for d in DATASETS if d != "spambase" and loadable(d, load_consolo)]
    if "coil2000" not in here: pytest.skip("coil2000 needs the dataset mirror")
    assert REGISTRY["coil2000"].n_train < table1["coil2000"]                            # the default split is smaller
    for name in here:
        assert len(load_consolo(name).y) == table1[name], name


def test_frandi_protocol_tunes_C_with_cvm_and_reports_every_method(tmp_path):
    from types import SimpleNamespace

    from klrlab.datasets import make_twonorm
    from klrlab.repro.papers.frandi import CONFIGS, SPEED, grid
    X, y = make_twonorm(500, n_features=5, seed=2)

    def load_small(name, seed=0, offline=False):
        return SimpleNamespace(X=X[:300], y=y[:300], X_test=X[300:], y_test=y[300:])

    small = Experiment("speed", "small", ["twonorm"], CONFIGS, grid([1.0, 16.0]), SPEED.run_point, SPEED.summarize,
                       folds=["val", "test-r0"], load=load_small, published=SPEED.published, timed=True,
                       tune=SPEED.tune)
    result = run(Protocol("frandi", "small", (small,)), profile="quick", out=tmp_path, progress=False)
    cells = result.cells["speed"]
    val = cells[cells.fold == "val"]
    assert set(val[val.status == "done"].config) == {"CVM", "MFW"}          # CVM tunes, MFW validates beside it
    test = cells[cells.fold == "test-r0"]
    assert (test.status == "done").all() and len(test) == len(CONFIGS)      # each method once, at the chosen C
    assert test.C.nunique() == 1
    t2, t3 = result.tables["table2"].dropna(subset=["ours"]), result.tables["table3"].dropna(subset=["ours"])
    assert sorted(t2.method) == sorted(CONFIGS) and sorted(t3.method) == sorted(CONFIGS)
    assert t2.C.nunique() == 1 and t2.C.iloc[0] in (1.0, 16.0)
    cvm_val = val[(val.status == "done") & (val.config == "CVM")]
    best = cvm_val.sort_values(["accuracy_pct", "C"], ascending=[False, True]).C.iloc[0]
    assert t2.C.iloc[0] == best
    family = t2[t2.method != "SVC"].ours
    assert family.max() - family.min() < 1.0 and (t3.ours > 0).all()
    fw = cells[(cells.status == "done") & (cells.config != "SVC")]
    assert fw.gap.notna().all() and ((fw.gap <= fw.gap_tol) == fw.converged.astype(bool)).all()


def test_frandi_cells_of_a_multiclass_set_sum_the_pairs_steps_and_keep_the_worst_gap():
    from types import SimpleNamespace

    from klrlab.repro.harness import Cell, SkipPoint
    from klrlab.repro.papers.frandi import CVM_MAX_POINTS, speed_point, tuners
    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 6.0]])
    y = np.repeat([0, 1, 2], 60)
    X = centers[y] + rng.normal(size=(180, 2))
    data = SimpleNamespace(X=X[::2], y=y[::2], X_test=X[1::2], y_test=y[1::2])
    cell = Cell("frandi", "speed", "blobs", "test-r0", "MFW", '{"C": 4.0}', 0)
    metrics, _ = speed_point(data, cell, None)
    assert metrics["accuracy_pct"] > 90 and metrics["n_train"] == 90
    assert isinstance(metrics["gap"], float) and isinstance(metrics["n_iter"], int) and metrics["n_iter"] > 0
    assert metrics["converged"] == (metrics["gap"] <= metrics["gap_tol"])
    with pytest.raises(SkipPoint):                                   # FW does not validate
        speed_point(data, Cell("frandi", "speed", "blobs", "val", "FW", '{"C": 4.0}', 0), None)
    assert tuners("table8", 10) == ("MFW",) and tuners("speed", CVM_MAX_POINTS + 1) == ("MFW",)


def test_frandi_equal_accuracy_counts_the_loosest_lasting_tolerance(tmp_path):
    from types import SimpleNamespace

    from klrlab.datasets import make_twonorm
    from klrlab.repro.papers.frandi import EQUAL, EQUAL_EPS, WITHIN, summarize_equal
    X, y = make_twonorm(600, n_features=5, seed=4)

    def load_small(name, seed=0, offline=False):
        return SimpleNamespace(X=X[:400], y=y[:400], X_test=X[400:], y_test=y[400:])

    small = Experiment("equal", "small", ["twonorm"], EQUAL.configs, EQUAL.grid, EQUAL.run_point, EQUAL.summarize,
                       folds=EQUAL.folds, load=load_small, timed=True)
    result = run(Protocol("frandi", "small", (small,)), profile="quick", out=tmp_path, progress=False)
    cells = result.cells["equal"]
    svc = cells[cells.config == "SVC"]
    assert (svc.status == "done").sum() == 1 and (svc.status == "skipped").sum() == len(EQUAL_EPS) - 1
    fw = cells[~cells.config.isin(["SVC", "L2-SMO"]) & (cells.status == "done")]
    assert len(fw) == 3 * len(EQUAL_EPS) and (fw.gap[fw.converged.astype(bool)] <= 2 * fw.eps + fw.eps**2).all()
    smo = cells[(cells.config == "L2-SMO") & (cells.status == "done")]
    assert len(smo) == len(EQUAL_EPS) and smo.converged.astype(bool).all() and smo.tolerance.is_monotonic_decreasing
    table = result.tables["equal"]
    target = table.svc_accuracy - WITHIN
    hit = table.dropna(subset=["tolerance"])
    assert (hit.accuracy >= target[hit.index]).all()
    # a made-up ladder: 1e-3 in the band, 1e-4 out of it, then in again: the count starts at 1e-5
    toy = pd.DataFrame(dict(dataset="d", config=["SVC"] + ["MFW"] * 4, status="done", n_train=10,
                            eps=[1e-3, 1e-3, 1e-4, 1e-5, 1e-6], accuracy_pct=[90.0, 89.8, 80.0, 89.6, 89.7],
                            seconds=[1.0, 0.1, 0.2, 0.5, 2.0], n_support=5, converged=True))
    row = summarize_equal(toy, "quick").iloc[0]
    assert row.tolerance == 1e-5 and row.seconds == 0.5 and row.ratio_to_svc == 0.5
    never = summarize_equal(toy.assign(accuracy_pct=[90.0, 80, 80, 80, 80]), "quick").iloc[0]
    assert pd.isna(never.tolerance) and pd.isna(never.ratio_to_svc) and never.tightest_accuracy == 80


def _example41_parts(m, seed):
    from types import SimpleNamespace

    from klrlab.datasets import make_zhou_example41
    X, y, Xt, yt = make_zhou_example41(m, seed=seed)
    return SimpleNamespace(X=X, y=y, X_test=Xt, y_test=yt, meta=dict(kind="generated"))


def test_zhou_real_set_protocol_reports_every_method_beside_the_paper(tmp_path):
    from klrlab.datasets import bayes_accuracy_zhou_example41
    from sklearn.svm import SVC

    from klrlab.repro.papers.zhou import CONFIGS, TABLE6
    data = _example41_parts(3000, seed=5)

    small = Experiment("table6", "small", ["ex41"], CONFIGS, TABLE6.grid, TABLE6.run_point, TABLE6.summarize,
                       folds=TABLE6.folds, load=lambda name, seed=0, offline=False: data,
                       published=TABLE6.published, timed=True)
    result = run(Protocol("zhou", "small", (small,)), profile="quick", out=tmp_path, progress=False)
    cells = result.cells["table6"].set_index("config")
    assert (cells.status == "done").all() and set(cells.index) == set(CONFIGS)
    nssvm = cells.loc[["NSSVM", "NSSVM-pure"]]
    assert (nssvm.NSV <= nssvm.s_final).all()                               # at most s support vectors
    pure = cells.loc["NSSVM-pure"]
    assert bool(pure.converged) and pure.residual <= pure.residual_tol      # the certificate of the pure optimiser
    assert pure.ACC_best_bias_pct >= pure.ACC_pct                           # the best bias cannot lose accuracy
    bayes = 100 * bayes_accuracy_zhou_example41()
    for config in ("NSSVM", "LSVM"):
        assert abs(cells.loc[config, "TACC_pct"] - bayes) < 1.5, (config, cells.loc[config, "TACC_pct"])
    # LIBLINEAR's NSV (its margin count at eps = 0.1) against LIBSVM's support of the same hinge model at C = 1
    exact = SVC(kernel="linear", C=1.0).fit(data.X, data.y).n_support_.sum()
    assert abs(cells.loc["LSVM", "NSV"] - exact) <= 0.05 * exact, (cells.loc["LSVM", "NSV"], exact)
    table = result.tables["table6"]
    ours = table.dropna(subset=["ours"])
    assert set(ours.method) == set(CONFIGS) and {"ACC_pct", "TACC_pct", "seconds", "NSV"} <= set(ours.metric)
    assert ours.paper.isna().all() and table.dropna(subset=["paper"]).ours.isna().all()   # no such set in the paper
    assert np.isclose(ours.query("method == 'LSVM' and metric == 'NSV_per_m'").ours.iloc[0],
                      cells.loc["LSVM", "NSV"] / 3000)


def test_zhou_example41_protocol_averages_trials_and_skips_liblinear_beyond_its_m(tmp_path, monkeypatch):
    from klrlab.datasets import bayes_accuracy_zhou_example41
    from klrlab.repro.papers import zhou
    monkeypatch.setattr(zhou, "LSVM_MAX_M", 2500)
    small = Experiment("table7", "small", [zhou.EXAMPLE41], ["NSSVM", "LSVM"], [{"m": 2000}, {"m": 3000}],
                       zhou.TABLE7.run_point, zhou.TABLE7.summarize, folds=["t0", "t1"], load=zhou.load_zhou,
                       published="table7", timed=True)
    result = run(Protocol("zhou", "small", (small,)), profile="quick", out=tmp_path, progress=False)
    cells = result.cells["table7"]
    skipped = cells[cells.status == "skipped"]
    assert set(zip(skipped.config, skipped.m)) == {("LSVM", 3000)} and len(skipped) == 2
    done = cells[cells.status == "done"]
    draws = done.groupby(["m", "fold"]).TACC_pct.first()
    assert draws.loc[2000, "t0"] != draws.loc[2000, "t1"]                   # each trial is a fresh draw
    table = result.tables["table7"]
    ours = table.dropna(subset=["ours"]).set_index(["m", "method", "metric"])
    nsv = done[(done.config == "NSSVM") & (done.m == 2000)].NSV
    assert ours.loc[(2000, "NSSVM", "NSV"), "trials"] == 2 and np.isclose(ours.loc[(2000, "NSSVM", "NSV"), "ours"],
                                                                           nsv.mean())
    assert np.isclose(ours.loc[(3000, "NSSVM", "NSV_per_m"), "ours"],
                      done[(done.config == "NSSVM") & (done.m == 3000)].NSV.mean() / 3000)
    assert np.allclose(ours.bayes_pct, 100 * bayes_accuracy_zhou_example41())
    assert table[table.m == 100000].ours.isna().all() and table[table.m == 100000].paper.notna().all()


def test_zhou_parameter_study_follows_s_of_beta_and_ignores_tiny_eta(tmp_path):
    from klrlab.repro.papers import zhou
    from klrlab.solvers.nssvm import sparsity_level
    grid = [zhou.point(2000, beta=0.2), zhou.point(2000, beta=0.6), zhou.point(2000, eta=1e-8),
            zhou.point(2000, eta=1e-7)]
    small = Experiment("fig4", "small", [zhou.EXAMPLE41], ["Alg1"], grid, zhou.parameter_point,
                       zhou.summarize_parameters, folds=["t0"], load=zhou.load_zhou)
    result = run(Protocol("zhou", "small", (small,)), profile="quick", out=tmp_path, progress=False)
    cells = result.cells["fig4"]
    assert (cells.status == "done").all() and cells.converged.astype(bool).all()
    by_beta = cells.dropna(subset=["beta"]).set_index("beta")
    for beta in (0.2, 0.6):
        assert by_beta.loc[beta, "s"] == sparsity_level(2000, 2, beta)
    assert (by_beta.nnz <= by_beta.s).all()
    tiny = cells.dropna(subset=["eta"]).set_index("eta")
    assert (tiny.s == 10).all()                                             # s = 0.005 m without beta
    # eta far below 1/m only breaks ties among alpha = 0: the same working sets, the same fit
    for column in ("ACC_pct", "TACC_pct", "iterations"):
        assert tiny.loc[1e-8, column] == tiny.loc[1e-7, column]


def test_zhou_accuracy_bias_is_the_best_cut():
    from klrlab.repro.papers.zhou import accuracy_bias
    rng = np.random.default_rng(0)
    for _ in range(30):
        f, y = rng.normal(size=40), np.where(rng.random(40) < 0.4, 1.0, -1.0)
        cuts = np.concatenate([[-np.inf], np.sort(f)])                      # predict +1 above each cut, brute force
        best = max(np.mean(np.where(f > c, 1.0, -1.0) == y) for c in cuts)
        assert np.mean(np.where(f + accuracy_bias(f, y) > 0, 1.0, -1.0) == y) == best


def test_zhou_loader_scales_and_marks_derived_sets():
    from klrlab.datasets import DatasetUnavailable
    from klrlab.repro.papers.zhou import load_zhou
    try:
        a5a, dhrb = load_zhou("a5a", offline=True), load_zhou("dhrb", offline=True)
    except DatasetUnavailable:
        pytest.skip("the dataset mirror is not available")
    assert a5a.meta["kind"] == "derived" and len(a5a.y) == 6414
    for data in (a5a, dhrb):
        assert np.abs(data.X).max() <= 1 and np.abs(data.X_test).max() <= 1
    peak = np.maximum(np.abs(dhrb.X).max(0), np.abs(dhrb.X_test).max(0))
    assert np.allclose(peak[peak > 0], 1.0)                                 # every non-zero column reaches 1
    assert abs(len(dhrb.y_test) / (len(dhrb.y) + len(dhrb.y_test)) - 0.1) < 1e-3


def test_zhou_aim_verdict_states_each_criterion():
    import pandas as pd
    from klrlab.repro.papers.zhou import aim_verdict
    rows = [("NSSVM-pure", 1.0, 90.0, 100), ("NSSVM", 4.0, 91.5, 50),
            ("LIBLINEAR -s 3", 2.0, 92.0, 1000), ("LIBLINEAR -s 2", 0.5, 91.0, 400)]
    aim = pd.DataFrame([dict(dataset="d", method=m, seconds=s, TACC_pct=a, NSV=n) for m, s, a, n in rows])
    v = aim_verdict(aim).set_index(["ours", "against"])
    assert len(v) == 4
    pure3, pure2 = v.loc[("NSSVM-pure", "LIBLINEAR -s 3")], v.loc[("NSSVM-pure", "LIBLINEAR -s 2")]
    assert pure3.time_ratio == 2.0 and pure3.TACC_diff == -2.0 and pure3.NSV_ratio == 10.0
    assert pure3.faster and not pure3.accurate and pure3.sparser and not pure3.aim_holds
    assert not pure2.faster and pure2.NSV_ratio == 4.0 and not pure2.sparser
    code3 = v.loc[("NSSVM", "LIBLINEAR -s 3")]                  # 2x slower, 0.5 points lower, 20x sparser
    assert not code3.faster and code3.accurate and code3.sparser and not code3.aim_holds
    code2 = v.loc[("NSSVM", "LIBLINEAR -s 2")]
    assert code2.time_ratio == 0.125 and code2.TACC_diff == 0.5 and code2.NSV_ratio == 8.0


def test_zhou_aim_measures_every_method_and_the_fit_memory():
    from klrlab.datasets import bayes_accuracy_zhou_example41
    from klrlab.repro.papers.zhou import AIM_METHODS, EXAMPLE41, measure_aim
    aim = measure_aim({EXAMPLE41: 4000}, repeats=2).set_index("method")
    assert list(aim.index) == AIM_METHODS and (aim.repeats == 2).all()
    assert (aim.seconds_min <= aim.seconds).all() and (aim.seconds <= aim.seconds_max).all()
    for method in AIM_METHODS:                                              # near the Bayes accuracy, all of them
        assert abs(aim.loc[method, "TACC_pct"] - 100 * bayes_accuracy_zhou_example41()) < 2.0, method
    ours = aim.loc[["NSSVM-pure", "NSSVM"]]
    assert (ours.NSV <= ours.s_final).all() and (ours.s_final < 4000).all()
    # the fit's own peak allocation in a fresh process: positive, and within the process's peak resident set
    assert (ours.fit_peak_mb > 0).all() and (ours.fit_peak_mb < ours.peak_rss_mb).all()
    assert (ours.rss_before_mb <= ours.peak_rss_mb).all()
    assert aim.loc["LIBLINEAR -s 3", "NSV"] > aim.loc["NSSVM", "NSV"]        # the hinge keeps every margin violator


def test_ong_path_protocol_reports_the_tables_metrics_against_libsvm(tmp_path):
    from types import SimpleNamespace

    from klrlab.repro.papers.ong import CONFIGS, TABLE3, standardize
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(0.0, 1.0, (30, 3)), rng.normal(1.0, 1.0, (20, 3))])
    y = np.r_[np.ones(30), -np.ones(20)]
    data = SimpleNamespace(X=standardize(X), y=y, meta=dict(kind="generated"))
    points = [dict(kernel="linear", n_lambdas=8), dict(kernel="rbf", n_lambdas=8)]
    small = Experiment("table3", "small", ["blobs"], CONFIGS, points, TABLE3.run_point, TABLE3.summarize,
                       folds=["all"], load=lambda name, seed=0, offline=False: data, published=TABLE3.published,
                       timed=True)
    result = run(Protocol("ong", "small", (small,)), profile="quick", out=tmp_path, progress=False)
    cells = result.cells["table3"]
    assert (cells.status == "done").all() and len(cells) == 2 * len(CONFIGS)
    assert cells.finished.astype(bool).all() and (cells.kkt_violation <= 1e-3).all()
    assert (cells.E_max <= 50).all() and (cells.E_max >= 1).all()
    assert (cells.loc[cells.kernel == "linear", "E_max"] <= 3 + 1).all()     # |E| <= n + 1 with a linear kernel
    checked = cells[cells.config != "qr-update-nokkt"]
    regular = checked[checked.groupby("kernel").rank_deficiency_max.transform("max") == 0]
    assert (regular.groupby("kernel").iota_max.nunique() == 1).all()          # same breakpoints, any factorisation
    costs = cells.dropna(subset=["c_max_pct"])
    assert set(costs.config) == {"qr-update", "qr-update-nokkt"}
    assert (costs.c_max_pct <= 0.25).all() and (costs.c_above_max_pct <= 1e-4).all()   # LIBSVM's cost, or lower
    table = result.tables["table3"].dropna(subset=["ours"])
    assert {"E_max", "iota_max", "t_S_SVD", "t_S_QR", "t_S_UD", "c_max_SL_pct", "c_max_SL2_pct"} <= set(table.metric)
    assert table.paper.isna().all() and set(table.kernel) == {"linear", "rbf"}
    for kernel in ("linear", "rbf"):
        rows = table[table.kernel == kernel].set_index("metric").ours
        ud = cells[(cells.kernel == kernel) & (cells.config == "qr-update")].iloc[0]
        assert rows["E_max"] == ud.E_max and rows["t_S_UD"] == ud.t_S and rows["c_max_SL_pct"] == ud.c_max_pct
