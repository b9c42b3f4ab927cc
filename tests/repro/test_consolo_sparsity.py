"Consolo et al.'s sparsity gap: the stored hypothesis table and the stored cells against fresh fits."

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from klrlab.repro.harness import loadable
from klrlab.repro.papers.consolo import (FIT_VARIANTS, GAMMA, HYPOTHESES, HYPOTHESIS_SETS, KernelLogisticRegression,
                                         fold_parts, full_cache_mb, hypothesis_fits, hypothesis_rows, load_consolo)

RESULTS = Path(__file__).parents[2] / "nbs" / "results"


@pytest.fixture(scope="module")
def cells():
    return pd.read_csv(RESULTS / "consolo_paper_cells.csv.gz")


def test_stored_hypotheses_equal_what_the_function_computes_on_one_fold():
    dataset, fold = "sonar", 1
    if not loadable(dataset, load_consolo): pytest.skip(f"{dataset} needs the dataset mirror")
    stored = pd.read_csv(RESULTS / "consolo_sparsity_hypotheses.csv")
    assert set(HYPOTHESIS_SETS) <= set(stored.dataset) and list(stored.change.unique()) == [h[1] for h in HYPOTHESES]
    again = hypothesis_rows(pd.concat([hypothesis_fits(dataset, v, folds=[fold]) for v in FIT_VARIANTS]))
    mine = stored[(stored.dataset == dataset) & (stored.fold == fold)].reset_index(drop=True)
    pd.testing.assert_frame_equal(again, mine, check_dtype=False, rtol=1e-12)


@pytest.mark.parametrize("variant,config", [("ours", "2ord"), ("capped", "2ord-capped")])
def test_the_hypotheses_baseline_fits_are_the_paper_profiles_cells(cells, variant, config):
    "Our two runs, refitted by the hypothesis machinery, give the stored paper-profile cells point for point."
    fits = hypothesis_fits("wisconsin", variant, folds=[2]).set_index(["C", "k"])      # scikit-learn ships wisconsin
    stored = cells.query("dataset == 'wisconsin' and fold == 2 and config == @config").set_index(["C", "k"])
    assert len(fits) == len(stored) == 90
    for ours, theirs in [("val_accuracy", "val_accuracy"), ("test_accuracy", "test_accuracy"),
                         ("test_ratio[gamma]", "test_ratio"), ("val_ratio[gamma]", "val_ratio")]:
        np.testing.assert_allclose(fits[ours], stored.loc[fits.index, theirs], rtol=0, atol=1e-12)


def test_hypothesis_rules_differ_where_they_should():
    counts = ("gamma", "gamma (1 + 1e-3)", "gamma + 1e-3 C")
    fits = pd.DataFrame({"dataset": "d", "variant": "ours", "fold": 0, "C": [1.0, 1.0, 1.0, 10.0], "k": [0, 1, 2, 0],
                         "val_accuracy": [0.9, 0.9, 0.8, 0.9], "test_accuracy": [0.8, 0.85, 0.7, 0.9], "n_train": 90,
                         "n_test": 10, "converged": [True, False, True, True],
                         **{f"{p}_ratio[{c}]": [1.0, 0.3, 0.1, 0.6] for p in ("val", "test") for c in counts}})
    rows = hypothesis_rows(fits).set_index("change")
    best, s3 = rows["table2 best ratio"], rows["table2 s3 ratio"]
    assert best.iloc[0] == 0.3 and rows["table2 best capped"].iloc[0] == 1.0       # ties to the sparser point
    assert s3.iloc[0] == 0.3                                                      # the 3 best by validation: 0.1 is 4th
    assert best["ties to the grid order (the first point)"] == 1.0
    assert best["ties to the last grid point (largest C, lambda)"] == 0.6
    assert best["ratio over all N points (train + test)"] == pytest.approx(0.27)
    assert rows["table5 best ratio"].iloc[0] == 0.6                               # on the test fold: 0.9 is best
    assert set(rows.loc[rows.hypothesis == "a"].index) == set()                    # fits of other variants are absent


def test_heuristic_cells_record_the_lambda_they_were_fitted_with(cells):
    heuristic = cells[(cells.config == "2ord-heuristic") & (cells.status == "done")]
    assert len(heuristic) > 500 and np.allclose(heuristic.lam, heuristic.C / 10, rtol=1e-15, atol=0)
    row = heuristic.query("dataset == 'wisconsin' and fold == 0 and C == 1000").iloc[0]
    X, y, Xt, yt, _, _ = fold_parts(load_consolo("wisconsin"), 0, 0)
    refit = KernelLogisticRegression.from_preset("S-KLR-2ord", C=row.C, lam=row.lam, gamma=GAMMA,
                                                 cache_size=full_cache_mb(len(y))).fit(X, y)
    assert len(refit.support_) / len(y) == pytest.approx(row.test_ratio, abs=1e-12)
    assert np.mean(refit.predict(Xt) == yt) == pytest.approx(row.test_accuracy, abs=1e-12)
    lam_zero = cells.query("dataset == 'wisconsin' and fold == 0 and C == 1000 and config == '2ord' and k == 0").iloc[0]
    assert lam_zero.test_ratio != row.test_ratio                  # lambda = 0 would not have given the stored cell
