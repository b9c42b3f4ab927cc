from pathlib import Path

import pytest

from klrlab.config import SETTING_KEYS, SettingsError, describe_settings, find_settings_file, load_settings

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path, body):
    path = tmp_path / "settings.ini"
    path.write_text("[klrlab]\n" + body)
    return path


def test_project_file_is_found_and_documents_every_key():
    found = find_settings_file(ROOT / "nbs", env={})
    assert found == ROOT / "settings.ini"
    text = found.read_text()
    assert "nbdev does not read this file" in text
    for key, (_, var, _) in SETTING_KEYS.items():
        assert key in text and var in text


def test_defaults_without_file(tmp_path):
    s = load_settings(write(tmp_path, ""), env={})
    assert s.profile == "quick" and s.seed == 0 and s.n_jobs == 1 and s.scheduler == "local"
    assert s.mirrors == () and s.data_home == Path("~/.cache/klrlab").expanduser()


def test_relative_paths_are_relative_to_the_file(tmp_path):
    s = load_settings(write(tmp_path, "data_home = data\nmirrors = m1:/abs/m2\nout_dir = results\n"), env={})
    assert s.data_home == tmp_path / "data" and s.out_dir == tmp_path / "results"
    assert s.mirrors == (tmp_path / "m1", Path("/abs/m2"))


def test_environment_wins(tmp_path):
    path = write(tmp_path, "profile = quick\nseed = 1\n")
    s = load_settings(
        path,
        env={
            "KLRLAB_PROFILE": "paper",
            "KLRLAB_SEED": "7",
            "KLRLAB_SCHEDULER": "tcp://127.0.0.1:8786",
            "KLRLAB_DATA_HOME": "/tmp/x",
            "KLRLAB_N_JOBS": "-1",
        },
    )
    assert (s.profile, s.seed, s.scheduler, s.data_home, s.n_jobs) == (
        "paper",
        7,
        "tcp://127.0.0.1:8786",
        Path("/tmp/x"),
        -1,
    )


@pytest.mark.parametrize("body,env,match", [
    ("profile = fast\n", {}, r"profile = 'fast' \(from .*settings.ini\); accepted values: quick, paper"),
    ("", {"KLRLAB_PROFILE": "full"}, r"profile = 'full' \(from \$KLRLAB_PROFILE\)"),
    ("seed = x\n", {}, "seed = 'x'.*not an integer"),
    ("seed = -3\n", {}, r"seed = -3.*must be an integer in \[0, 2\*\*32\)"),
    ("", {"KLRLAB_SEED": "99999999999999"}, r"seed = 99999999999999 \(from \$KLRLAB_SEED\)"),
    ("n_jobs = 0\n", {}, "n_jobs = 0"),
    ("", {"KLRLAB_N_JOBS": "-4"}, r"n_jobs = -4 \(from \$KLRLAB_N_JOBS\); use a positive number"),
    ("", {"KLRLAB_N_JOBS": "two"}, "n_jobs = 'two'"),
    ("scheduler = my cluster\n", {}, "scheduler = 'my cluster'.*tcp://"),
    ("data_home =\n", {}, "data_home is empty"),
    ("colour = blue\n", {}, r"unknown key\(s\) \['colour'\]"),
])
def test_bad_values_name_key_origin_and_accepted_values(tmp_path, body, env, match):
    with pytest.raises(SettingsError, match=match):
        load_settings(write(tmp_path, body), env=env)


def test_klrlab_settings_variable(tmp_path):
    path = write(tmp_path, "seed = 11\n")
    assert find_settings_file(env={"KLRLAB_SETTINGS": str(path)}) == path
    assert load_settings(env={"KLRLAB_SETTINGS": str(path)}).seed == 11
    with pytest.raises(SettingsError, match="KLRLAB_SETTINGS"):
        find_settings_file(env={"KLRLAB_SETTINGS": str(tmp_path / "missing.ini")})


def test_files_without_the_section_are_skipped(tmp_path):
    (tmp_path / "settings.ini").write_text("[DEFAULT]\nlib_name = other\n")  # e.g. an nbdev 2 project's file
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    found = find_settings_file(sub, env={})
    assert found is None or found == ROOT / "settings.ini"  # falls through to beside the package


def test_describe_lists_every_key():
    text = describe_settings(load_settings(env={}))
    for key, (_, var, _) in SETTING_KEYS.items():
        assert key in text and var in text


@pytest.mark.parametrize("body,where", [("[klrlab]\nseed = 1\nseed = 2\n", r"line\W+3"), ("seed = 1\n", r"line\W+1"),
                                         ("[klrlab]\nprofile = quick\n)garbage(\n", r"line\W+3")])
def test_an_unreadable_settings_file_is_an_error_naming_it_not_skipped(tmp_path, body, where):
    (tmp_path / "settings.ini").write_text("[klrlab]\nseed = 7\n")            # the file above it must not be used instead
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "settings.ini").write_text(body)
    with pytest.raises(SettingsError, match=rf"{sub / 'settings.ini'} cannot be read.*{where}"):
        find_settings_file(sub, env={})
    with pytest.raises(SettingsError, match="cannot be read"):
        load_settings(env={"KLRLAB_SETTINGS": str(sub / "settings.ini")})


def test_another_tools_defaults_are_not_inherited(tmp_path):
    (tmp_path / "settings.ini").write_text("[DEFAULT]\nlib_name = other\n\n[klrlab]\nseed = 5\n")   # nbdev 2 style
    assert load_settings(tmp_path / "settings.ini", env={}).seed == 5
