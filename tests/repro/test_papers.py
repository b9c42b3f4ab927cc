"""The papers' protocols through the harness: Consolo et al.'s tables line up with the published ones, configuration
filters, the paper's averages, and the l1/2 chain's lockstep grid."""
import json

import numpy as np
import pandas as pd
import pytest

from klrlab.repro.harness import Experiment, Protocol, ReproError, expand, run


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
    from klrlab.repro.papers.consolo import GRIDS, consolo_point, grid_from, load_consolo
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
    with pytest.raises(SkipPoint) as skip:
        consolo_point(data, cell(quick[5]), state)
    # k > 0: no fit, the models go on
    assert skip.value.state is state
    again, same = consolo_point(data, cell(quick[8]), state)                            # C = 100: taken from the state
    assert same is state and again["test_ratio"] == state["models"][100.0][1].support_fraction_
    with pytest.raises(SkipPoint) as skip:
        consolo_point(data, cell(quick[5], "SVM"), None)
    assert skip.value.state is None


def test_frandi_protocol_tunes_C_with_cvm_and_reports_every_method(tmp_path):
    from types import SimpleNamespace

    from klrlab.datasets import make_twonorm
    from klrlab.repro.papers.frandi import CONFIGS, SPEED, grid
    X, y = make_twonorm(500, n_features=5, seed=2)

    def load_small(name, seed=0, offline=False):
        return SimpleNamespace(X=X[:300], y=y[:300], X_test=X[300:], y_test=y[300:])

    small = Experiment("speed", "small", ["twonorm"], CONFIGS, grid([1.0, 16.0]), SPEED.run_point, SPEED.summarize,
                       folds=["val", "test-r0"], load=load_small, published=SPEED.published, timed=True)
    result = run(Protocol("frandi", "small", (small,)), profile="quick", out=tmp_path, progress=False)
    cells = result.cells["speed"]
    val = cells[cells.fold == "val"]
    assert set(val[val.status == "done"].config) == {"CVM"}                 # C is tuned with CVM alone
    assert (cells[cells.fold == "test-r0"].status == "done").all()
    t2, t3 = result.tables["table2"].dropna(subset=["ours"]), result.tables["table3"].dropna(subset=["ours"])
    assert sorted(t2.method) == sorted(CONFIGS) and sorted(t3.method) == sorted(CONFIGS)
    assert t2.C.nunique() == 1 and t2.C.iloc[0] in (1.0, 16.0)
    best = val[val.status == "done"].sort_values(["accuracy_pct", "C"], ascending=[False, True]).C.iloc[0]
    assert t2.C.iloc[0] == best
    family = t2[t2.method != "SVC"].ours
    assert family.max() - family.min() < 1.0 and (t3.ours > 0).all()
    fw = cells[(cells.status == "done") & (cells.config != "SVC")]
    assert fw.gap.notna().all() and ((fw.gap <= fw.gap_tol) == fw.converged.astype(bool)).all()


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
