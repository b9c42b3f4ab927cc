"""The reproduction harness: published tables (checked against the papers' own arithmetic), resume after a kill,
Dask = local, bad input, offline runs, selection rules, chains that hand their state on."""
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import friedmanchisquare, rankdata, wilcoxon

from klrlab.datasets import REGISTRY
from klrlab.repro.papers.frandi import signed_rank_test
from klrlab.repro.harness import (PAPERS, Experiment, Protocol, ReproError, code_fingerprint, key_columns, published,
                                  published_tables, run)


TABLES = [name.split("_", 1) for name in published_tables()]


def close(printed, recomputed, rel=1e-3):
    "Printed numbers are rounded: agree to 0.1 % of the number (or 0.001 absolute below 1)."
    return abs(printed - recomputed) <= rel * max(1.0, abs(printed))


def test_every_paper_has_tables():
    counts = {p: len(published_tables(p)) for p in PAPERS}
    assert counts == {"consolo": 5, "keerthi": 5, "frandi": 8, "zhou": 7, "ong": 4}, counts


@pytest.mark.parametrize("paper,table", TABLES)
def test_published_table_is_tidy(paper, table):
    frame = published(paper, table)
    if "value" not in frame:                               # text-only tables (hypotheses, complexity classes)
        assert len(frame) >= 3 and frame.shape[1] >= 3 and frame.iloc[:, 0].notna().any()
        return
    keys = key_columns(frame)
    assert not frame.duplicated(keys).any(), "each printed number appears once"
    assert pd.api.types.is_numeric_dtype(frame.value)
    missing = frame[frame.value.isna()]
    assert (missing.note != "").all(), "an omitted entry carries the paper's reason"
    if "dataset" in frame:
        names = set(frame.dataset) - {"average", "adult"}
        assert names <= set(REGISTRY), names - set(REGISTRY)


@pytest.mark.parametrize("table", ["table2", "table3", "table4", "table5"])
def test_consolo_averages_recompute_from_rows(table):
    frame = published("consolo", table)
    keys = [k for k in ("method", "selection", "metric") if k in frame]
    rows, average = frame[frame.dataset != "average"], frame[frame.dataset == "average"].set_index(keys)
    assert rows.dataset.nunique() == 12
    means, stds = rows.groupby(keys).value.mean(), rows.groupby(keys).value.std()
    for key, printed in average.iterrows():
        assert close(printed.value, means[key]), (key, printed.value, means[key])
        if not np.isnan(printed["std"]):
            assert close(printed["std"], stds[key]), (key, printed["std"], stds[key])


def test_consolo_table4_ratio_column():
    wide = (
        published("consolo", "table4")
        .query("dataset != 'average'")
        .pivot(index="dataset", columns="method", values="value")
    )
    assert np.allclose(wide["2ord/1ord"], wide["S-KLR-2ord"] / wide["S-KLR-1ord"], atol=1e-3)


def test_frandi_statistics_recompute_from_table3():
    "Table 5's Wilcoxon W and Iman-Davenport F for time recompute exactly from Table 3 (26 datasets)."
    times = published("frandi", "table3").pivot(index="dataset", columns="method", values="value")
    stats = published("frandi", "table5").query("quantity == 'time'").set_index(["comparison", "test"]).value
    for comparison in ("FW vs CVM", "MFW vs CVM", "FW vs MFW"):
        a, b = comparison.split(" vs ")
        assert wilcoxon(times[a], times[b], zero_method="pratt").statistic == stats[comparison, "W"]
    chi2 = friedmanchisquare(times.FW, times.MFW, times.CVM).statistic
    n, k = len(times), 3
    assert abs((n - 1) * chi2 / (n * (k - 1) - chi2) - stats["FW,MFW,CVM", "F"]) < 5e-3


def test_keerthi_table2_omissions():
    t2 = published("keerthi", "table2")
    assert t2.value.isna().sum() == 12 and set(t2.dataset) == {"banana", "splice", "raetsch-waveform", "tree", "image"}


def test_published_bad_names():
    with pytest.raises(ReproError, match="accepted values: consolo, keerthi, frandi, zhou, ong"):
        published("nobody", "table1")
    with pytest.raises(ReproError, match="table of zhou"):
        published("zhou", "table1")


TOY_SOURCE = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import numpy as np
    from klrlab.repro.harness import Experiment, Protocol, run

    LOG, SLEEP = None, 0.0          # set when run as a script; importing the module (for its protocol) needs neither

    def load(name, seed=0, offline=False):
        return np.arange(5.0)

    def point(data, cell, state):
        time.sleep(SLEEP)
        if LOG is not None:
            with open(LOG, "a") as f:
                f.write(" ".join([cell.dataset, cell.fold, cell.config, cell.params]) + "\\n")
        return {"score": float(data.sum() * cell.point["C"])}, None

    def summary(cells, profile):
        return cells.groupby("dataset").score.max().rename("value").reset_index().assign(metric="score")

    GRID = [{"C": float(c)} for c in range(1, 6)]
    TOY = Protocol("toy", "toy", (Experiment("grid", "toy", ["a", "b"], ["x", "y"], GRID, point, summary, folds=[0, 1],
                                             load=load),))
    if __name__ == "__main__":
        LOG, SLEEP = Path(sys.argv[2]), float(sys.argv[3])
        result = run(TOY, profile="quick", out=sys.argv[1], n_jobs=1, progress=False)
        print(result.computed, result.reused)
""")


def toy_script(tmp_path):
    script = tmp_path / "toy.py"
    script.write_text(TOY_SOURCE)
    return script


def stored_cells(out):
    return sorted((Path(out) / "toy" / "cells" / "grid").glob("*.json"))


def test_kill_midway_then_resume_recomputes_nothing_finished(tmp_path):
    out, log1, log2 = tmp_path / "out", tmp_path / "first.log", tmp_path / "second.log"
    script = toy_script(tmp_path)
    proc = subprocess.Popen([sys.executable, str(script), str(out), str(log1), "0.15"], start_new_session=True)
    deadline = time.time() + 60
    while len(stored_cells(out)) < 8 and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)                  # no chance to clean up
    proc.wait()
    finished = {p.name: p.read_text() for p in stored_cells(out)}
    assert 8 <= len(finished) < 40, len(finished)
    for text in finished.values(): json.loads(text)      # every stored cell is whole
    done = subprocess.run(
        [sys.executable, str(script), str(out), str(log2), "0"], capture_output=True, text=True, check=True
    )
    computed, reused = map(int, done.stdout.split())
    assert reused == len(finished) and computed == 40 - len(finished)
    first_lines, second_lines = set(log1.read_text().splitlines()), set(log2.read_text().splitlines())
    assert len(second_lines) == computed
    recomputed = second_lines & first_lines
    assert len(recomputed) <= 1, "only the cell in flight at the kill may run again"
    assert {p.name: p.read_text() for p in stored_cells(out) if p.name in finished} == finished   # untouched


def test_bad_input_leaves_finished_results_intact(tmp_path):
    out = tmp_path / "out"
    script = toy_script(tmp_path)
    subprocess.run([sys.executable, str(script), str(out), str(tmp_path / "log"), "0"], check=True, capture_output=True)
    before = {p.name: p.read_bytes() for p in stored_cells(out)}
    sys.path.insert(0, str(tmp_path))
    try:
        import toy
    finally:
        sys.path.remove(str(tmp_path))
    wider = Protocol("toy", "toy", (Experiment("grid", "toy", ["a", "b", "c"], ["x", "y"], toy.TOY.experiments[0].grid,
                                               toy.TOY.experiments[0].run_point, toy.TOY.experiments[0].summarize,
                                               folds=[0, 1], load=toy.TOY.experiments[0].load),))
    with pytest.raises(ReproError, match="unreachable"):
        run(wider, profile="quick", out=out, scheduler="tcp://127.0.0.1:9", progress=False)
    with pytest.raises(ReproError, match="accepted values: quick, paper"):
        run(wider, profile="everything", out=out, progress=False)
    with pytest.raises(ReproError, match="n_jobs"):
        run(wider, profile="quick", out=out, n_jobs=0, progress=False)
    assert {p.name: p.read_bytes() for p in stored_cells(out)} == before


def test_unwritable_output_folder(tmp_path):
    with pytest.raises(ReproError, match="not writable"):
        run("keerthi", out="/proc/klrlab-cannot-write", progress=False)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ReproError, match="not writable"):
        run("keerthi", out=blocker / "sub", progress=False)
    with pytest.raises(ReproError, match="is a file; give a folder"):
        run("keerthi", out=blocker, progress=False)
    assert blocker.read_text() == "x"


def test_unknown_papers_and_every_paper_implemented():
    from klrlab.repro.harness import PAPERS, PROTOCOLS, get_protocol
    with pytest.raises(ReproError, match="accepted values: consolo, keerthi"):
        run("keerthy")
    assert set(PAPERS) <= set(PROTOCOLS) and get_protocol("ong").paper == "ong"


def small_klr_protocol():
    from klrlab.repro.papers.keerthi import TABLE3
    exp = Experiment(
        "table3",
        "small",
        ["keerthi-gauss2d"],
        ["KLR", "SVM"],
        [{"C": 1.0, "sigma": 1.0}, {"C": 10.0, "sigma": 1.0}],
        TABLE3.run_point,
        TABLE3.summarize,
        folds=["cv0", "cv1", "test"],
        load=TABLE3.load,
        published="table3",
    )
    return Protocol("keerthi", "small", (exp,))


def test_dask_cluster_gives_the_local_results(tmp_path):
    distributed = pytest.importorskip("distributed")
    protocol = small_klr_protocol()
    local = run(protocol, profile="quick", out=tmp_path / "local", n_jobs=2, progress=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        remote = run(
            protocol, profile="quick", out=tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False
        )
    assert local.computed == remote.computed == 12
    key = ["dataset", "fold", "config", "C", "sigma"]
    tidy = lambda r: r.cells["table3"].drop(columns="cell_seconds").sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(tidy(local), tidy(remote))
    pd.testing.assert_frame_equal(local.tables["table3"], remote.tables["table3"])
    table = local.tables["table3"].set_index(["method", "metric"])
    assert {"ours", "paper", "diff"} <= set(table.columns)
    assert table.loc[("KLR", "NLL"), "paper"] == 2663.4              # read from the CSV


def test_offline_without_mirror_lists_what_it_skipped(tmp_path, monkeypatch):
    monkeypatch.setenv("KLRLAB_MIRROR", "")
    monkeypatch.setenv("KLRLAB_DATA_HOME", str(tmp_path / "empty-cache"))
    result = run(
        "keerthi",
        profile="quick",
        out=tmp_path / "out",
        experiments=["table4", "table2", "adult"],
        offline=True,
        progress=False,
    )
    assert result.computed == 0
    skipped = set(zip(result.skipped.experiment, result.skipped.dataset))
    assert skipped == {
        ("table4", "banana"),
        ("table4", "raetsch-waveform"),
        ("table2", "banana"),
        ("table2", "raetsch-waveform"),
        ("adult", "a1a"),
        ("adult", "a2a"),
        ("adult", "a3a"),
    }
    assert result.skipped.reason.str.len().min() > 10
    assert pd.read_csv(tmp_path / "out" / "keerthi" / "skipped.csv").shape[0] == 7
    from klrlab.repro.harness import load_dataset
    assert len(load_dataset("keerthi-gauss2d", offline=True).y) == 400          # generated: always there


def test_fingerprint_is_stable():
    assert code_fingerprint() == code_fingerprint() and len(code_fingerprint()) == 16


def test_selection_rules_break_ties_as_documented():
    from klrlab.repro.harness import select_best, sparsest_of_top
    scores = pd.DataFrame({"acc": [0.9, 0.95, 0.95, 0.95, 0.8], "ratio": [0.1, 0.9, 0.5, 0.5, 0.0]})
    assert select_best(scores, "acc").name == 1                        # the earliest of the tied
    assert select_best(scores, "acc", tie_break="ratio").name == 2     # the sparsest of the tied, then the earliest
    assert select_best(scores, "ratio", higher_is_better=False).name == 4
    assert sparsest_of_top(scores, "acc", "ratio", 2).name == 2        # all three tied rows compete, not just two
    assert sparsest_of_top(scores, "acc", "ratio", 2, ties="first").name == 2
    assert sparsest_of_top(scores, "acc", "ratio", 4).name == 0        # the 4th best (0.9) joins
    assert sparsest_of_top(scores, "acc", "ratio", 10).name == 4       # k beyond the rows: all of them
    with pytest.raises(ValueError, match="ties='none'; accepted values"):
        sparsest_of_top(scores, "acc", "ratio", ties="none")


def test_a_skipped_point_can_hand_its_state_to_the_next():
    from klrlab.repro.harness import Cell, SkipPoint, run_chain
    seen = []

    def point(data, cell, state):
        seen.append(state)
        if cell.point["C"] == 2.0: raise SkipPoint("nothing to fit here", state="kept")
        if cell.point["C"] == 4.0: raise SkipPoint("infeasible")
        return {"score": 1.0}, cell.point["C"]

    experiment = Experiment(
        "grid",
        "toy",
        ["a"],
        ["x"],
        [],
        point,
        lambda cells, profile: cells,
        load=lambda name, seed=0, offline=False: None,
    )
    cells = [Cell("toy", "grid", "a", "0", "x", json.dumps({"C": float(c)}), 0) for c in range(1, 6)]
    records = run_chain(experiment, cells, None, "fingerprint")
    assert seen == [None, 1.0, "kept", 3.0, None]          # a plain SkipPoint still means a cold start
    assert [r["status"] for r in records] == ["done", "skipped", "done", "skipped", "done"]


def test_a_tuning_stage_runs_first_and_the_other_folds_only_at_the_chosen_point(tmp_path):
    import numpy as np
    from klrlab.repro.harness import Experiment, Protocol, run
    calls = []

    def point(data, cell, state):
        calls.append((cell.dataset, cell.fold, cell.point["C"]))
        return {"score": -abs(cell.point["C"] - (2.0 if cell.dataset == "a" else 4.0))}, None

    def tune(cells, profile):
        assert set(cells.fold) == {"val"}                          # only the tuning cells are seen
        best = cells.loc[cells.groupby("dataset").score.idxmax()]
        return {d: {"C": float(C)} for d, C in zip(best.dataset, best.C)}

    def summary(cells, profile):
        test = cells[cells.fold == "test"]
        return test[["dataset", "C"]].rename(columns={"C": "value"}).assign(metric="chosen C")

    exp = Experiment("tuned", "toy", ["a", "b"], ["x"], [{"C": float(c)} for c in range(1, 6)], point, summary,
                     folds=["val", "test"], load=lambda name, seed=0, offline=False: np.arange(3.0), tune=tune)
    result = run(Protocol("toy", "toy", (exp,)), profile="quick", out=tmp_path, n_jobs=1, progress=False)
    assert [c for c in calls if c[1] == "test"] == [("a", "test", 2.0), ("b", "test", 4.0)]
    assert calls.index(("a", "test", 2.0)) > max(i for i, c in enumerate(calls) if c[1] == "val")
    assert result.computed == 2 * 5 + 2
    assert dict(zip(result.tables["tuned"].dataset, result.tables["tuned"].ours)) == {"a": 2.0, "b": 4.0}
    again = run(Protocol("toy", "toy", (exp,)), profile="quick", out=tmp_path, n_jobs=1, progress=False)
    assert again.computed == 0 and again.reused == 12


def test_a_tuning_that_chose_nothing_is_reported_not_a_crash(tmp_path):
    import numpy as np
    from klrlab.repro.harness import Experiment, Protocol, SkipPoint, run

    def point(data, cell, state):
        if cell.fold == "val" and cell.config != "tuner": raise SkipPoint("only the tuner validates")
        return {"score": float(cell.point["C"])}, None

    def tune(cells, profile):
        done = cells[cells.status == "done"]
        return {d: {"C": float(part.C.max())} for d, part in done.groupby("dataset")}

    def summary(cells, profile):                 # needs the metric: would fail on skipped cells alone
        return cells[["dataset", "score"]].rename(columns={"score": "value"}).assign(metric="score")

    exp = Experiment("tuned", "toy", ["a"], ["tuner", "other"], [{"C": 1.0}, {"C": 2.0}], point, summary,
                     folds=["val", "test"], load=lambda name, seed=0, offline=False: np.arange(3.0), tune=tune)
    result = run(Protocol("toy", "toy", (exp,)), profile="quick", out=tmp_path, n_jobs=1, progress=False,
                 configs=["other"])
    assert "tuned" not in result.tables and (tmp_path / "toy" / "tuned_cells.csv").is_file()
    assert result.skipped.reason.str.contains("chose no grid point").all() and len(result.skipped) == 1


def test_a_name_given_twice_runs_once_and_filters_that_select_nothing_are_refused():
    from klrlab.repro.harness import Experiment, Protocol, ReproError, expand
    point = lambda data, cell, state: ({"score": 1.0}, None)
    summary = lambda cells, profile: cells
    grid = [{"C": 1.0}, {"C": 2.0}]
    toy = Protocol("toy", "toy", (Experiment("one", "toy", ["a"], ["x"], grid, point, summary),
                                  Experiment("two", "toy", ["b"], ["y"], grid, point, summary)))
    once = expand(toy, "quick", 0, experiments=["one"])
    assert len(once) == 1 and expand(toy, "quick", 0, experiments=["one", "one"]) == once
    with pytest.raises(ReproError, match="together the filters select nothing"):
        expand(toy, "quick", 0, datasets=["b"], configs=["x"])          # each matches something, together nothing


@pytest.mark.parametrize("alternative", ["less", "greater", "two-sided"])
def test_signed_rank_test_is_exact_with_ties_and_zeros(alternative):
    # against SciPy's exact test where nothing ties, and against every sign assignment where ranks tie or differences vanish
    rng = np.random.default_rng(1)
    for _ in range(50):
        a, b = rng.normal(size=12), rng.normal(size=12)
        ours, theirs = signed_rank_test(a, b, alternative), wilcoxon(a, b, alternative=alternative, method="exact")
        assert ours[0] == theirs.statistic and np.isclose(ours[1], theirs.pvalue, rtol=1e-12, atol=0)
    for _ in range(50):
        a, b = rng.integers(0, 4, 9).astype(float), rng.integers(0, 4, 9).astype(float)
        d = a - b
        ranks = rankdata(np.abs(d))
        nonzero, observed = ranks[d != 0], ranks[d > 0].sum()
        sums = np.array([np.dot(nonzero, signs) for signs in itertools.product([0, 1], repeat=len(nonzero))])
        below, above = np.mean(sums <= observed + 1e-9), np.mean(sums >= observed - 1e-9)
        expected = {"less": below, "greater": above, "two-sided": min(1.0, 2 * min(below, above))}[alternative]
        assert np.isclose(signed_rank_test(a, b, alternative)[1], expected, rtol=1e-12)
    with pytest.raises(ValueError, match="alternative='both'; accepted values"):
        signed_rank_test([1.0, 2.0], [0.0, 0.0], "both")


def test_an_interrupted_figure_save_leaves_no_truncated_image(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from klrlab.repro.harness import _atomic_save_figure
    fig, ax = plt.subplots(); ax.plot([0, 1], [1, 0])
    target = tmp_path / "table.png"
    _atomic_save_figure(fig, target, dpi=50)
    good = target.read_bytes()
    assert good.startswith(b"\x89PNG")
    def interrupted(path, **kwargs):
        Path(path).write_bytes(good[:100]); raise KeyboardInterrupt     # half an image, then Ctrl-C
    fig.savefig = interrupted
    with pytest.raises(KeyboardInterrupt):
        _atomic_save_figure(fig, target, dpi=50)
    assert target.read_bytes() == good and [p.name for p in tmp_path.iterdir()] == ["table.png"]
    plt.close(fig)
