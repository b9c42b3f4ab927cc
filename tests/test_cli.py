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
        (["bench", "--datasets", "nope"], "unknown dataset"),
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
    assert main(["bench", "--datasets", "keerthi-gauss2d", "--repeats", "1", "--out", str(tmp_path)]) == 0
    record = json.loads(next(tmp_path.glob("bench-*.json")).read_text())
    assert {"git_commit", "numpy", "sklearn", "klrlab"} <= set(record["environment"])
    methods = {r["method"]: r for r in record["records"]}
    assert methods["klrlab KLR"]["ratio_to_klr"] == 1.0 and methods["klrlab KLR"]["n_train"] == 400
    assert "sklearn SVC + CalibratedClassifierCV" in methods and methods["sklearn SVC"]["median_seconds"] > 0
    assert "ratio = method / KLR" in capsys.readouterr().out
