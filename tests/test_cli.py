import json
import subprocess
import sys
from pathlib import Path

import pytest

from klrlab.cli import main
from klrlab.docs import quarto_available

SCRIPT = Path(sys.executable).parent / "klrlab"


def test_console_script_is_installed_and_documents_its_commands():
    out = subprocess.run([str(SCRIPT), "--help"], capture_output=True, text=True, check=True).stdout
    assert "docs" in out and "settings" in out
    out = subprocess.run([str(SCRIPT), "docs", "--help"], capture_output=True, text=True, check=True).stdout
    assert "--renderer" in out and "--out" in out and "--no-check" in out


def test_settings_command(capsys):
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert "profile" in out and "KLRLAB_MIRROR" in out


def test_bad_setting_is_a_usage_error(capsys, monkeypatch):
    monkeypatch.setenv("KLRLAB_PROFILE", "fastest")
    assert main(["settings"]) == 2
    assert "profile = 'fastest'" in capsys.readouterr().err


def test_unknown_command_and_bad_choice_exit_2():
    with pytest.raises(SystemExit) as e:
        main(["fly"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["docs", "--renderer", "pdf"])
    assert e.value.code == 2


@pytest.mark.skipif(quarto_available(), reason="quarto is installed here")
def test_quarto_renderer_without_quarto_is_a_clear_error(capsys):
    assert main(["docs", "--renderer", "quarto"]) == 2
    assert "quarto command is not installed" in capsys.readouterr().err


def test_an_empty_table_is_named_not_dumped(capsys):
    import pandas as pd
    from klrlab.cli import _print_table
    _print_table("consolo probabilities", pd.DataFrame(columns=["dataset", "ours"]))
    out = capsys.readouterr().out
    assert "== consolo probabilities" in out and "no rows" in out and "Empty DataFrame" not in out


def test_cli_repro_help_documents_everything(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["repro", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for word in ("--profile", "--jobs", "--scheduler", "--out", "quick", "paper", "resume", "skipped.csv", "all"):
        assert word in text, word


@pytest.mark.parametrize(
    "argv,message",
    [
        (["repro", "nobody"], "invalid choice"),
        (["repro", "keerthi", "--profile", "full"], "invalid choice"),
        (["repro", "keerthi", "--out", "/proc/klrlab-x"], "not writable"),
        (["repro", "keerthi", "--bogus"], "klrlab repro: error: unrecognized arguments: --bogus"),
        (["data", "list", "--bogus"], "klrlab data list: error: unrecognized arguments: --bogus"),
        (["bench", "--datasets", "nope"], "unknown dataset"),
        (["repro", "consolo", "--datasets", "nosuchset"], "unknown dataset of consolo's quick profile 'nosuchset'"),
        (["repro", "all", "--datasets", "wisconsin,nosuchset"], "unknown dataset(s) nosuchset"),
        (["repro", "consolo", "--configs", "3ord"], "unknown configuration of consolo '3ord'"),
        (["repro", "keerthi", "--experiments", "table9"], "unknown experiment of keerthi 'table9'"),
        (["repro", "keerthi", "--jobs", "-5"], "n_jobs = -5"),
        (["repro", "keerthi", "--jobs", "0"], "n_jobs = 0"),
    ],
)
def test_cli_bad_input(argv, message, capsys):
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_cli_bench_writes_a_json_record(tmp_path, capsys):
    argv = ["bench", "--datasets", "keerthi-gauss2d", "--repeats", "1", "--grid", "0.1,1", "--out", str(tmp_path)]
    assert main(argv) == 0
    record = json.loads(next(tmp_path.glob("bench-klr-*.json")).read_text())
    assert {"git_commit", "numpy", "sklearn", "klrlab"} <= set(record["environment"])
    assert record["parameters"]["C"] == [1.0, 100.0] and record["parameters"]["grid"] == [0.1, 1.0]
    fixed = [r for r in record["records"] if r["question"] == "fixed_C"]
    klr = [r for r in fixed if r["method"] == "klrlab KLR"]
    assert len(klr) == 4 and all(r["n_train"] == 400 and r["median_seconds"] > 0 for r in klr)
    assert {r["method"] for r in record["records"] if r["question"] == "calibrated"} >= {
        "klrlab KLR, C by CV log-loss", "SVC + CalibratedClassifierCV(ensemble=False)"}
    out = capsys.readouterr().out
    assert "(a) fixed C" in out and "(b) calibrated probabilities" in out and "KLR / SVC, C=1 =" in out


def test_cli_bench_one_C_comparison_still_runs(tmp_path, capsys):
    argv = ["bench", "--datasets", "keerthi-gauss2d", "--repeats", "1", "--C", "1", "--tol", "1e-3", "--gamma",
            "scale", "--questions", "same_C", "--out", str(tmp_path), "--record", "one_c"]
    assert main(argv) == 0
    methods = {r["method"]: r for r in json.loads((tmp_path / "one_c.json").read_text())["records"]}
    assert methods["klrlab KLR"]["ratio_to_klr"] == 1.0 and methods["klrlab KLR"]["n_train"] == 400
    assert "sklearn SVC + CalibratedClassifierCV" in methods and methods["sklearn SVC"]["median_seconds"] > 0
    out = capsys.readouterr().out
    assert "ratio = method / KLR" in out and "replaced" not in out
    assert main(argv) == 0                                  # the same --record again says it replaced the first
    assert "one_c.json (it replaced the record of that name)" in capsys.readouterr().out


def test_interrupted_repro_says_how_to_resume_in_one_line(monkeypatch, capsys):
    import klrlab.repro.harness as harness

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(harness, "run", interrupted)
    assert main(["repro", "keerthi", "--quiet"]) == 130
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "interrupted" in err and "run the same command again to resume" in err
    assert "Traceback" not in err


def test_repro_with_a_dataset_filter_on_all_runs_only_the_papers_that_have_it(tmp_path, capsys):
    assert main(["repro", "all", "--datasets", "keerthi-gauss2d", "--experiments", "table3", "--quiet",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "keerthi table3" in out and "consolo" not in out


def test_cli_bench_svm_family_times_frank_wolfe_against_svc(tmp_path, capsys, monkeypatch):
    from types import SimpleNamespace

    import klrlab.repro.bench as bench_module
    from klrlab.datasets import make_twonorm
    X, y = make_twonorm(300, n_features=5, seed=1)
    monkeypatch.setattr(bench_module, "_bench_data", lambda name, family, seed, offline: SimpleNamespace(
        X=X[:200], y=y[:200], X_test=X[200:], y_test=y[200:]))
    argv = ["bench", "--family", "svm", "--datasets", "a1a", "--repeats", "1", "--C", "4", "--out", str(tmp_path)]
    assert main(argv) == 0
    record = json.loads(next(tmp_path.glob("bench-svm-*.json")).read_text())
    methods = {r["method"]: r for r in record["records"]}
    assert methods["sklearn SVC"]["ratio_to_svc"] == 1.0 and record["parameters"]["family"] == "svm"
    for algorithm in ("cvm", "fw", "mfw", "pairwise"):
        fw = methods[f"klrlab FrankWolfeSVC {algorithm}"]
        assert fw["converged"] and fw["certificate"] <= (1 + 1e-6) ** 2 - 1 and fw["C"] == 4.0
        assert abs(fw["test_accuracy"] - methods["sklearn SVC"]["test_accuracy"]) < 0.05
    assert "ratio = method / sklearn SVC" in capsys.readouterr().out


def test_cli_bench_svm_family_refuses_a_linear_kernel(capsys):
    assert main(["bench", "--family", "svm", "--kernel", "linear", "--datasets", "a1a"]) == 2
    assert "kernel 'linear'; accepted values: rbf" in capsys.readouterr().err


def test_cli_bench_linear_family_times_sparse_svc_against_liblinear(tmp_path, capsys, monkeypatch):
    from types import SimpleNamespace

    import klrlab.repro.bench as bench_module
    from klrlab.datasets import make_zhou_example41
    X, y, X_test, y_test = make_zhou_example41(2000, seed=3)
    monkeypatch.setattr(bench_module, "_bench_data", lambda name, family, seed, offline: SimpleNamespace(
        X=X, y=y, X_test=X_test, y_test=y_test))
    argv = ["bench", "--family", "linear", "--datasets", "a9a", "--repeats", "1", "--out", str(tmp_path)]
    assert main(argv) == 0
    record = json.loads(next(tmp_path.glob("bench-linear-*.json")).read_text())
    methods = {r["method"]: r for r in record["records"]}
    assert record["parameters"]["family"] == "linear" and record["parameters"]["kernel"] == "linear"
    assert methods["klrlab SparseSVC"]["ratio_to_sparse_svc"] == 1.0
    for name in ("klrlab SparseSVC", "klrlab SparseSVC, reference heuristics"):
        assert methods[name]["n_support"] <= methods[name]["s_final"] < len(y) and methods[name]["C"] == 0.25
    svc = methods["sklearn SVC linear"]           # LIBSVM at the same C: the hinge dual's support and accuracy
    hinge = methods["sklearn LinearSVC hinge, dual (-s 3)"]
    assert abs(hinge["n_support"] - svc["n_support"]) <= 0.1 * svc["n_support"]
    assert abs(hinge["test_accuracy"] - svc["test_accuracy"]) < 0.01
    for name, r in methods.items():                # Example 4.1's Bayes accuracy is 96.9 %: every fit gets near it
        assert 0.94 < r["test_accuracy"] < 0.98, name
    if "liblinear-official train -s 2" in methods:  # the same solver by two bindings: the same model
        assert abs(methods["liblinear-official train -s 2"]["test_accuracy"]
                   - methods["sklearn LinearSVC squared hinge, primal (-s 2)"]["test_accuracy"]) < 0.002
    assert "ratio = method / klrlab SparseSVC" in capsys.readouterr().out


def test_cli_bench_linear_family_refuses_an_rbf_kernel(capsys):
    assert main(["bench", "--family", "linear", "--kernel", "rbf", "--datasets", "a9a"]) == 2
    assert "kernel 'rbf'; accepted values: linear" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv,message",
    [
        (["repro", "consolo", "--datasets", ","], "--datasets ',' names nothing"),
        (["repro", "keerthi", "--experiments", " , "], "--experiments ' , ' names nothing"),
        (["bench", "--datasets", ",,"], "--datasets ',,' names nothing"),
        (["repro", "all", "--configs", "nosuch"], "unknown config(s) nosuch"),
        (["repro", "keerthi", "--datasets", "keerthi-gauss2d", "--configs", "linear"], "together the filters select"),
        (["repro", "keerthi", "--store", "/proc/klrlab-store/x"], "--store '/proc/klrlab-store/x'"),
        (["repro", "keerthi", "--store", ""], "--store ''"),
    ],
)
def test_cli_filters_that_name_nothing_are_refused_before_any_work(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_repro_all_applies_experiment_and_config_filters_per_paper():
    import argparse
    from klrlab.cli import _repro_plan
    args = argparse.Namespace(paper="all", profile="quick", datasets=None, experiments="table3", configs=None)
    plan = _repro_plan(args)
    assert plan and all(filters["experiments"] == ["table3"] for filters in plan.values())
    assert "consolo" not in plan or "table3" in [e.name for e in __import__("klrlab.repro.harness", fromlist=["x"])
                                                   .get_protocol("consolo").experiments]


def test_repro_all_with_filters_no_paper_has_together_refuses_instead_of_running_nothing(capsys):
    # keerthi-gauss2d is Keerthi's, the SVC configuration Frandi's: each name is known, the pair is no paper's
    assert main(["repro", "all", "--datasets", "keerthi-gauss2d", "--configs", "SVC", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no paper has all of --datasets keerthi-gauss2d; --configs SVC" in err and "Traceback" not in err


def test_cli_bench_with_one_question_prints_it_and_writes_strict_json(tmp_path, capsys):
    argv = ["bench", "--datasets", "keerthi-gauss2d", "--questions", "fixed_C", "--C", "1", "--tol", "1e-3",
            "--repeats", "1", "--no-memory", "--out", str(tmp_path), "--record", "one"]
    assert main(argv) == 0
    text = (tmp_path / "one.json").read_text()
    refuse = lambda token: (_ for _ in ()).throw(ValueError(f"non-standard JSON token {token}"))
    json.loads(text, parse_constant=refuse)                       # no NaN / Infinity tokens
    out = capsys.readouterr().out
    assert "(a) fixed C" in out and "(b) calibrated" not in out and str(tmp_path / "one.json") in out


def test_data_fetch_says_what_has_no_file_and_fails_for_a_missing_set(capsys):
    assert main(["data", "fetch", "twonorm", "--offline"]) == 0
    assert "twonorm: generated, no file to fetch" in capsys.readouterr().out
    assert main(["data", "fetch", "twonorm", "usps", "--offline"]) == 1
    assert "usps: missing" in capsys.readouterr().out
    assert main(["data", "fetch", "sonar", "--all"]) == 2


def test_bench_checks_eps_and_an_empty_out_before_loading_anything(capsys):
    assert main(["bench", "--family", "svm", "--datasets", "twonorm", "--eps", "-1"]) == 2
    assert "eps = -1.0; accepted: a number > 0" in capsys.readouterr().err
    assert main(["bench", "--datasets", "twonorm", "--out", ""]) == 2
    assert "is empty; give a folder" in capsys.readouterr().err


def test_bench_that_can_have_none_of_its_datasets_writes_no_record(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KLRLAB_MIRROR", "")
    monkeypatch.setenv("KLRLAB_DATA_HOME", str(tmp_path / "empty-home"))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "baseline.json").write_text("{}")        # a record the run must not replace
    argv = ["bench", "--datasets", "banana", "--repeats", "1", "--offline", "--out", str(tmp_path / "out"),
            "--record", "baseline"]
    assert main(argv) == 2
    assert "nothing was measured and no record written" in capsys.readouterr().err
    assert (tmp_path / "out" / "baseline.json").read_text() == "{}"


@pytest.mark.parametrize("gamma", ["1,7", "foo", "-1", "inf"])
def test_bench_gamma_takes_one_positive_number_or_scale(gamma, capsys):
    assert main(["bench", "--datasets", "keerthi-gauss2d", "--gamma", gamma, "--repeats", "1"]) == 2
    assert f"--gamma {gamma!r}; accepted: one number > 0, or scale" in capsys.readouterr().err


def test_data_list_with_no_match_says_so(capsys, monkeypatch):
    import klrlab.datasets as datasets
    every = datasets.available()
    monkeypatch.setattr(datasets, "available", lambda: every[every.status == "none such"])   # no row matches
    assert main(["data", "list", "--paper", "keerthi", "--status", "missing"]) == 0
    out = capsys.readouterr().out
    assert "no dataset matches --paper keerthi --status missing" in out and "Empty DataFrame" not in out
