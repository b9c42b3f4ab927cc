"""The loader's file handling without the real data: every test here writes its own small files in each source's
format, registers them as the canonical copies (size and sha256) for the test's duration, and checks what `load`
and `resolve` make of them. They run on a machine without the mirror (CI), where the real-data tests skip."""
import bz2
import functools
import hashlib
import http.server
import io
import shutil
import subprocess
import tarfile
import threading
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat

from conftest import settings_for

from klrlab import datasets as ds
from klrlab.datasets import (CANONICAL_FILES, CanonicalFile, ChecksumError, CorruptedCopyWarning, DatasetError,
                             DatasetUnavailable, download, load, make_monks, resolve, uncompress_z)

FIXTURES = Path(__file__).parent / "fixtures"


def register_files(monkeypatch, files):
    "Make `files` ({(dataset_dir, file): bytes}) the canonical copies for this test: their sizes and checksums."
    for key, content in files.items():
        monkeypatch.setitem(CANONICAL_FILES, key, replace(CANONICAL_FILES[key], bytes=len(content),
                                                          sha256=hashlib.sha256(content).hexdigest()))


def write_mirror(root, files):
    "A mirror folder holding `files` at <root>/<dataset_dir>/<file>."
    for (folder, name), content in files.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / name).write_bytes(content)
    return root


def load_synthetic(name, files, tmp_path, monkeypatch, **kw):
    "`load(name)` with `files` as its registered canonical files, from a mirror that holds only them."
    register_files(monkeypatch, files)
    data = load(name, settings=settings_for(tmp_path, [write_mirror(tmp_path / "mirror", files)]),
                allow_download=False, **kw)
    assert {f["origin"] for f in data.meta["files"]} == {"mirror"}
    assert {tuple(f["file"].split("/", 1)) for f in data.meta["files"]} == set(files)
    return data


def decimals(rng, shape, scale=10_000):
    "Random numbers with four decimals, so that their text form reads back exactly."
    return rng.integers(-scale, scale, shape) / scale


def lines(rows, sep=",", end="\n"):
    return "".join(sep.join(map(str, row)) + end for row in rows).encode()


def assert_loaded(data, X, y, X_test=None, y_test=None):
    assert data.X.dtype == np.float64 and data.X.flags.c_contiguous
    np.testing.assert_array_equal(data.X, X)
    np.testing.assert_array_equal(data.y, y)
    if X_test is None:
        assert "X_test" not in data
    else:
        np.testing.assert_array_equal(data.X_test, X_test)
        np.testing.assert_array_equal(data.y_test, y_test)


# ---- each kind of source file, parsed --------------------------------------------------------------------------

SONAR = ("sonar", "sonar.all-data")


def sonar_file(n=12, seed=0):
    "Sonar's format: 60 numbers then R or M; +1 = M."
    rng = np.random.default_rng(seed)
    X = np.abs(decimals(rng, (n, 60)))
    labels = np.where(np.arange(n) % 3 == 0, "M", "R")
    return lines(np.c_[[[f"{v:.4f}" for v in row] for row in X], labels]), X, np.where(labels == "M", 1.0, -1.0)


def test_sonar_comma_table_label_last(tmp_path, monkeypatch):
    content, X, y = sonar_file()
    assert_loaded(load_synthetic("sonar", {SONAR: content}, tmp_path, monkeypatch), X, y)


def test_wisconsin_label_in_column_1_and_the_id_dropped(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    X, diagnosis = decimals(rng, (9, 30)), np.array(list("MBBMBBBMB"))
    rows = [[842302 + i, d, *row] for i, (d, row) in enumerate(zip(diagnosis, X))]
    data = load_synthetic("wisconsin", {("wdbc", "wdbc.data"): lines(rows)}, tmp_path, monkeypatch)
    assert_loaded(data, X, np.where(diagnosis == "M", 1.0, -1.0))


def test_wbc_rows_with_a_missing_value_are_dropped(tmp_path, monkeypatch):
    rng = np.random.default_rng(2)
    X, labels = rng.integers(1, 11, (8, 9)).astype(float), np.array([2, 4, 2, 2, 4, 4, 2, 2])
    rows = [[1000025 + i, *map(int, row), lab] for i, (row, lab) in enumerate(zip(X, labels))]
    rows[3][6] = "?"                              # UCI's missing value: the row goes
    data = load_synthetic("wbc", {("breast-cancer-wisconsin", "breast-cancer-wisconsin.data"): lines(rows)},
                          tmp_path, monkeypatch)
    keep = np.arange(8) != 3
    assert_loaded(data, X[keep], np.where(labels[keep] == 4, 1.0, -1.0))


def test_german_numeric_whitespace_table(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    X, labels = rng.integers(0, 70, (7, 24)).astype(float), np.array([1, 2, 1, 1, 2, 1, 2])
    text = "".join("".join(f"{int(v):4d}" for v in row) + f"{lab:4d} \n" for row, lab in zip(X, labels))
    data = load_synthetic("german", {("german", "german.data-numeric"): text.encode()}, tmp_path, monkeypatch)
    assert_loaded(data, X, np.where(labels == 2, 1.0, -1.0))


def test_pendigits_fixed_test_file_and_integer_classes(tmp_path, monkeypatch):
    rng = np.random.default_rng(4)
    parts = [(rng.integers(0, 101, (n, 16)).astype(float), rng.integers(0, 10, n)) for n in (10, 5)]
    files = {("pendigits", name): lines(np.c_[X.astype(int), y]) for name, (X, y) in
             zip(("pendigits.tra", "pendigits.tes"), parts)}
    data = load_synthetic("pendigits", files, tmp_path, monkeypatch)
    assert data.y.dtype == np.int64
    assert_loaded(data, parts[0][0], parts[0][1], parts[1][0], parts[1][1])


def libsvm_text(X, y):
    "LIBSVM's sparse format: 1-based indices, zeros left out."
    return "".join(f"{label:+d} " + " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(row) if v) + "\n"
                   for row, label in zip(X, y)).encode()


def test_splice_libsvm_pair_keeps_trailing_features_absent_from_the_file(tmp_path, monkeypatch):
    rng = np.random.default_rng(5)
    X = rng.integers(0, 5, (12, 60)).astype(float)
    X[:, -3:] = 0                                  # the last features never appear: the width comes from the spec
    y = np.where(np.arange(12) % 2, 1, -1)
    files = {("splice", "splice"): libsvm_text(X[:8], y[:8]), ("splice", "splice.t"): libsvm_text(X[8:], y[8:])}
    data = load_synthetic("splice", files, tmp_path, monkeypatch)
    assert_loaded(data, X[:8], y[:8].astype(float), X[8:], y[8:].astype(float))
    pooled = load_synthetic("splice-c", files, tmp_path, monkeypatch)   # the same files, pooled by default
    assert_loaded(pooled, X, y.astype(float))


def test_usps_bz2_libsvm_multiclass(tmp_path, monkeypatch):
    rng = np.random.default_rng(6)
    X, y = decimals(rng, (6, 256)), np.array([1, 2, 10, 3, 1, 7])
    text = "".join(f"{label} " + " ".join(f"{j + 1}:{v:.4f}" for j, v in enumerate(row)) + "\n"
                   for row, label in zip(X, y)).encode()
    data = load_synthetic("usps-test", {("usps", "usps.t.bz2"): bz2.compress(text)}, tmp_path, monkeypatch)
    assert data.y.dtype == np.int64
    assert_loaded(data, X, y)


def test_madelon_numbers_and_label_files(tmp_path, monkeypatch):
    rng = np.random.default_rng(7)
    parts = [(rng.integers(400, 600, (n, 500)).astype(float), np.where(np.arange(n) % 2, 1, -1)) for n in (6, 4)]
    files = {}
    for part, (X, y) in zip(("train", "valid"), parts):
        files[("madelon", f"madelon_{part}.data")] = lines(X.astype(int), sep=" ", end=" \n")
        files[("madelon", f"madelon_{part}.labels")] = lines(y[:, None])
    data = load_synthetic("madelon", files, tmp_path, monkeypatch)
    assert_loaded(data, parts[0][0], parts[0][1].astype(float), parts[1][0], parts[1][1].astype(float))


def test_dhrb_matlab_files(tmp_path, monkeypatch):
    rng = np.random.default_rng(8)
    X, y = rng.normal(size=(9, 17)), np.array([1, -1, -1, 1, -1, -1, -1, 1, -1.0])
    files = {}
    for name, content in (("dhrb.mat", {"X": X}), ("dhrbclass.mat", {"y": y[:, None]})):
        savemat(tmp_path / name, content)
        files[("dhrb", name)] = (tmp_path / name).read_bytes()
    assert_loaded(load_synthetic("dhrb", files, tmp_path, monkeypatch), X, y)


def test_raetsch_realisation_reads_its_own_four_files(tmp_path, monkeypatch):
    rng = np.random.default_rng(9)
    asc = lambda A: lines([[f"{v:15.7e}" for v in row] for row in np.atleast_2d(A)], sep="", end="\n")
    files, expected = {}, {}
    for k in (2, 3):                               # two realisations present: split=3 must read only its own
        X, Xt = rng.normal(size=(5, 13)), rng.normal(size=(4, 13))
        y, yt = np.array([1, -1, 1, -1, -1.0]), np.array([-1, 1, 1, -1.0])
        parts = {"train_data": X, "train_labels": y[:, None], "test_data": Xt, "test_labels": yt[:, None]}
        for part, A in parts.items():
            files[("raetsch-heart", f"heart_{part}_{k}.asc")] = asc(A)
        expected[k] = (np.array([[float(f"{v:.7e}") for v in row] for row in X]), y,
                       np.array([[float(f"{v:.7e}") for v in row] for row in Xt]), yt)
    register_files(monkeypatch, files)
    data = load("raetsch-heart", split=3, settings=settings_for(tmp_path, [write_mirror(tmp_path / "mirror", files)]),
                allow_download=False)
    assert_loaded(data, *expected[3])
    assert {f["file"] for f in data.meta["files"]} == {f"raetsch-heart/{n}" for (_, n) in files if n.endswith("_3.asc")}


def test_coil2000_tab_table_and_separate_targets(tmp_path, monkeypatch):
    rng = np.random.default_rng(10)
    X, y = rng.integers(0, 10, (8, 85)).astype(float), np.array([0, 1, 0, 0, 1, 0, 0, 0])
    Xt, yt = rng.integers(0, 10, (5, 85)).astype(float), np.array([1, 0, 0, 1, 0])
    files = {("coil2000", "ticdata2000.txt"): lines(np.c_[X.astype(int), y], sep="\t"),
             ("coil2000", "ticeval2000.txt"): lines(Xt.astype(int), sep="\t"),
             ("coil2000", "tictgts2000.txt"): lines(yt[:, None])}
    data = load_synthetic("coil2000", files, tmp_path, monkeypatch)
    assert_loaded(data, X, np.where(y == 1, 1.0, -1.0), Xt, np.where(yt == 1, 1.0, -1.0))


def monks_file(grid, labels):
    "UCI's MONK format: the class first, six attributes, then an id."
    return "".join(f" {int(c)} " + " ".join(str(int(v)) for v in row) + f" data_{i + 1}\n"
                   for i, (row, c) in enumerate(zip(grid, labels))).encode()


def test_monks_file_must_be_the_rule_labelled_grid(tmp_path, monkeypatch):
    grid, rule = make_monks(2)
    key = ("monks", "monks-2.test")
    good = load_synthetic("monk2", {key: monks_file(grid, rule > 0)}, tmp_path, monkeypatch)
    assert_loaded(good, grid, rule)
    assert "checked" in good.meta["notes"]
    flipped = (rule > 0).copy(); flipped[17] = ~flipped[17]
    with pytest.raises(DatasetError, match="monks-2.test is not the 432-point grid labelled by the MONK-2 rule"):
        load_synthetic("monk2", {key: monks_file(grid, flipped)}, tmp_path / "flipped", monkeypatch)


def test_waveform_binary_and_three_class_views_of_one_file(tmp_path, monkeypatch):
    rng = np.random.default_rng(11)
    X, labels = decimals(rng, (9, 21), 100), np.array([0, 1, 2, 1, 0, 2, 1, 0, 2])
    files = {("waveform", "waveform.data"): lines(np.c_[[[f"{v:.2f}" for v in row] for row in X], labels])}
    assert_loaded(load_synthetic("waveform", files, tmp_path, monkeypatch), X, np.where(labels == 1, 1.0, -1.0))
    assert_loaded(load_synthetic("waveform-3class", files, tmp_path / "3", monkeypatch), X, labels)


# ---- downloads: decoded, verified, and atomic in the cache ------------------------------------------------------

class _Server:
    "A tiny HTTP server on 127.0.0.1 serving a folder, for the download path."
    def __init__(self, folder):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(folder))
        handler.log_message = lambda *a: None
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    server = _Server(root)
    yield root, server.url
    server.close()


FIXTURE = b"1.0,2.0,a\n3.0,4.0,b\n5.0,6.5,a\n"


def _spec(url, content=FIXTURE, **kw):
    return CanonicalFile(
        "fixture", "fixture.csv", len(content), hashlib.sha256(content).hexdigest(), "single", url, **kw
    )


def _cache_files(cache):
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file()) if cache.exists() else []


def test_download_plain_bz2_z_and_tar_member(served, tmp_path):
    root, url = served
    (root / "plain.csv").write_bytes(FIXTURE)
    (root / "packed.csv.bz2").write_bytes(bz2.compress(FIXTURE))
    shutil.copyfile(FIXTURES / "ncompress-16bit-clear.Z", root / "packed.csv.Z")
    with tarfile.open(root / "bundle.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("deep/dir/fixture.csv"); info.size = len(FIXTURE)
        tar.addfile(info, io.BytesIO(FIXTURE))
    for remote, extra, content in [
            ("plain.csv", {}, FIXTURE), ("packed.csv.bz2", {"compression": "bz2"}, FIXTURE),
            ("packed.csv.Z", {"compression": "Z"}, z_fixture_content()),
            ("bundle.tar.gz", {"compression": "tar", "member": "deep/dir/fixture.csv"}, FIXTURE)]:
        cache = tmp_path / f"cache-{remote}"
        path = download(_spec(f"{url}/{remote}", content, **extra), cache)
        assert path == cache / "fixture" / "fixture.csv" and path.read_bytes() == content
        assert _cache_files(cache) == ["fixture/fixture.csv"]  # no partial files left behind


def test_download_with_wrong_checksum_leaves_cache_untouched(served, tmp_path):
    root, url = served
    (root / "plain.csv").write_bytes(FIXTURE.replace(b"6.5", b"6.6"))
    cache = tmp_path / "cache"
    (cache / "fixture").mkdir(parents=True)
    (cache / "fixture" / "other.txt").write_text("keep me")
    with pytest.raises(ChecksumError, match="downloaded file .* has sha256"):
        download(_spec(f"{url}/plain.csv"), cache)
    assert _cache_files(cache) == ["fixture/other.txt"]


def test_download_failures_are_clear(served, tmp_path):
    root, url = served
    with pytest.raises(DatasetUnavailable, match="could not download .*404"):
        download(_spec(f"{url}/nothing.csv"), tmp_path / "cache")
    (root / "notbz2.csv").write_bytes(FIXTURE)
    with pytest.raises(DatasetError, match="could not be decoded as bz2"):
        download(_spec(f"{url}/notbz2.csv", compression="bz2"), tmp_path / "cache")
    assert _cache_files(tmp_path / "cache") == []


def test_unreachable_host_is_unavailable(tmp_path):
    closed = _spec("http://127.0.0.1:9/fixture.csv")  # the discard port: nothing listens
    with pytest.raises(DatasetUnavailable):
        download(closed, tmp_path / "cache", timeout=5)


# ---- resolution: cache, mirrors, download; checksums -----------------------------------------------------------

@pytest.fixture
def sonar(monkeypatch):
    "A synthetic sonar file registered as the canonical one: (its bytes, X, y)."
    content, X, y = sonar_file()
    register_files(monkeypatch, {SONAR: content})
    return content, X, y


def flipped(content):
    "The same bytes with one bit flipped: same size, other checksum."
    raw = bytearray(content); raw[123] ^= 0x01
    return bytes(raw)


def test_load_downloads_into_the_cache_then_reads_it(sonar, served, tmp_path, monkeypatch):
    (content, X, y), (root, url) = sonar, served
    (root / "sonar.all-data").write_bytes(content)
    monkeypatch.setitem(CANONICAL_FILES, SONAR, replace(CANONICAL_FILES[SONAR], url=f"{url}/sonar.all-data"))
    settings = settings_for(tmp_path)          # no mirror: the file must come from the URL
    first = load("sonar", settings=settings)
    assert first.meta["files"][0]["origin"] == "download"
    assert_loaded(first, X, y)
    assert _cache_files(tmp_path / "cache") == ["sonar/sonar.all-data"]
    second = load("sonar", settings=settings)
    assert second.meta["files"][0]["origin"] == "cache" and np.array_equal(first.X, second.X)


def test_corrupted_mirror_file_raises_and_caches_nothing(sonar, tmp_path):
    mirror = write_mirror(tmp_path / "mirror", {SONAR: flipped(sonar[0])})
    with pytest.raises(ChecksumError, match="mirror file .* has sha256"):
        load("sonar", settings=settings_for(tmp_path, [mirror]), allow_download=False)
    assert _cache_files(tmp_path / "cache") == []


def test_a_corrupted_mirror_copy_is_passed_over_for_the_next_mirror(sonar, tmp_path):
    bad, good = (write_mirror(tmp_path / name, {SONAR: c}) for name, c in (("bad", flipped(sonar[0])),
                                                                           ("good", sonar[0])))
    with pytest.warns(CorruptedCopyWarning, match="1 corrupted copy skipped"):
        path, origin = resolve(CANONICAL_FILES[SONAR], settings_for(tmp_path, [bad, good]), allow_download=False)
    assert origin == "mirror" and Path(path) == good / "sonar" / "sonar.all-data"


def test_a_corrupted_cached_copy_is_passed_over_for_a_good_mirror_copy(sonar, tmp_path):
    cache = write_mirror(tmp_path / "home", {SONAR: flipped(sonar[0])})       # the flipped file, in the data home
    good = write_mirror(tmp_path / "good", {SONAR: sonar[0]})
    with pytest.warns(CorruptedCopyWarning, match="1 corrupted copy skipped.*cached file .* Remove it"):
        path, origin = resolve(CANONICAL_FILES[SONAR], settings_for(tmp_path, [good], cache), allow_download=False)
    assert origin == "mirror" and Path(path) == good / "sonar" / "sonar.all-data"
    with pytest.raises(ChecksumError, match="cached file .* Remove it: a download or fetch puts"):
        resolve(CANONICAL_FILES[SONAR], settings_for(tmp_path, [], cache), allow_download=False)


def test_a_corrupted_copy_with_no_good_source_raises_its_checksum_error(sonar, tmp_path, monkeypatch):
    def no_network(spec, cache_dir, timeout=60.0):
        raise DatasetUnavailable("could not download: no network")
    monkeypatch.setattr(ds, "download", no_network)
    bad = write_mirror(tmp_path / "bad", {SONAR: flipped(sonar[0])})
    with pytest.raises(ChecksumError, match="mirror file .* has sha256.*No other source has a good copy: could not"):
        resolve(CANONICAL_FILES[SONAR], settings_for(tmp_path, [bad]))
    assert _cache_files(tmp_path / "cache") == []


def test_cache_comes_before_mirrors(sonar, tmp_path):
    cache = write_mirror(tmp_path / "home", {SONAR: sonar[0]})
    mirror = write_mirror(tmp_path / "mirror", {SONAR: b"garbage"})
    path, origin = resolve(CANONICAL_FILES[SONAR], settings_for(tmp_path, [mirror], cache))
    assert origin == "cache" and Path(path) == cache / "sonar" / "sonar.all-data"


# ---- Unix compress (.Z) -----------------------------------------------------------------------------------------

def _hash_stream(tag: bytes, n: int) -> bytes:
    out, i = bytearray(), 0
    while len(out) < n:
        out += hashlib.sha256(b"%s %d" % (tag, i)).digest(); i += 1
    return bytes(out[:n])


def z_fixture_content() -> bytes:
    """What tests/fixtures/ncompress-16bit-clear.Z holds: 300 000 bytes of comma-separated digits (enough to fill the
    16-bit code table) then 30 000 random bytes (the ratio drops, so compress emits a CLEAR code and restarts at 9
    bits). See tests/fixtures/README.md for how the file was made."""
    digits, text = _hash_stream(b"text", 300_000), bytearray()
    for k, b in enumerate(digits):
        text += b"%d.%02d" % (b % 10, b % 97) + (b"\n" if k % 8 == 7 else b",")
    return bytes(text[:300_000]) + _hash_stream(b"random", 30_000)


def test_uncompress_z_decodes_unix_compress_through_16_bits_and_a_clear_code():
    stream = (FIXTURES / "ncompress-16bit-clear.Z").read_bytes()
    assert stream[:3] == b"\x1f\x9d\x90"          # magic, block mode, 16-bit codes
    assert uncompress_z(stream) == z_fixture_content()


@pytest.mark.skipif(shutil.which("gzip") is None, reason="gzip not installed")
def test_the_z_fixture_is_what_gzip_decodes_too():
    "gzip decodes .Z independently: the fixture and its stated content agree without our decoder."
    out = subprocess.run(["gzip", "-dc"], input=(FIXTURES / "ncompress-16bit-clear.Z").read_bytes(),
                         capture_output=True, check=True).stdout
    assert out == z_fixture_content()


def test_a_truncated_z_stream_decodes_a_prefix_or_fails_clearly():
    stream, full = (FIXTURES / "ncompress-16bit-clear.Z").read_bytes(), z_fixture_content()
    for cut in (3, 1000, 60_000):
        try:
            out = uncompress_z(stream[:cut])
        except DatasetError as e:
            assert "corrupt" in str(e)
        else:
            assert full.startswith(out) and len(out) < len(full)



# ---- a series rebuilt from its neighbours (Adult's a4a-a6a, the web set's w2a and w5a) ------------------------------

SERIES = {"s1": 4, "s2": 7, "s3": 10, "pool": 16}       # s2 has no file: it is derived between s1 and s3


def series_lines(seed=12):
    "A pool of 16 LIBSVM lines (two of them duplicates) and the nested members s1 (4 lines) and s3 (10) drawn from it."
    rng = np.random.default_rng(seed)
    X, y = rng.integers(0, 4, (14, 5)).astype(float), np.where(rng.random(14) < 0.4, 1, -1)
    pool = libsvm_text(np.r_[X, X[[2, 5]]], np.r_[y, y[[2, 5]]]).decode().splitlines()
    order = rng.permutation(16)
    return pool, [pool[i] for i in order[:4]], [pool[i] for i in order[:10]]


def series_fetch(tmp_path, monkeypatch, members):
    "Write each member's lines as its own file, register it, and return a fetch for the loader."
    for name, content in members.items():
        (tmp_path / name).write_text("\n".join(content) + "\n")
        monkeypatch.setitem(CANONICAL_FILES, (name, name), CanonicalFile(name, name, 0, "", "single", ""))
    return lambda folder, file: tmp_path / file


def parsed(lines_):
    return ds._parse_libsvm_lines(lines_, 5)


def row_counts(X, y):
    "The rows of (X, y) as a multiset."
    return Counter(map(tuple, np.c_[X, y]))


def test_a_missing_series_member_is_nested_between_its_neighbours(tmp_path, monkeypatch):
    pool, s1, s3 = series_lines()
    fetch = series_fetch(tmp_path, monkeypatch, {"s1": s1, "s3": s3, "pool": pool})
    load_s2 = ds._series_loader("s2", SERIES, "pool", 5)
    data, again, other = (load_s2(fetch, seed, None) for seed in (0, 0, 1))
    train, test = row_counts(data.X, data.y), row_counts(data.X_test, data.y_test)
    rows = lambda lines_: row_counts(*parsed(lines_))
    assert sum(train.values()) == 7 and sum(test.values()) == 9
    assert not (rows(s1) - train) and not (train - rows(s3))      # s1 ⊂ s2 ⊂ s3, duplicates counted
    assert train + test == rows(pool)                              # the test part is the pool less the training part
    assert np.array_equal(data.X, again.X) and not np.array_equal(data.X, other.X)   # the draw follows the seed
    assert "all of s1 plus 3 lines drawn (seed 0) from s3 minus s1" in data.notes


def test_a_present_series_member_reads_its_file_and_rebuilds_its_test_part(tmp_path, monkeypatch):
    pool, s1, s3 = series_lines()
    fetch = series_fetch(tmp_path, monkeypatch, {"s1": s1, "s3": s3, "pool": pool})
    data = ds._series_loader("s3", SERIES, "pool", 5)(fetch, 0, None)
    X, y = parsed(s3)
    assert np.array_equal(data.X, X) and np.array_equal(data.y, y) and len(data.y_test) == 6
    assert "s3.t rebuilt exactly as pool minus s3" in data.notes


def test_a_series_that_is_not_nested_is_refused(tmp_path, monkeypatch):
    pool, s1, s3 = series_lines()
    stranger = "+1 1:9 2:9"                                        # a line the larger member does not hold
    fetch = series_fetch(tmp_path, monkeypatch, {"s1": s1[:-1] + [stranger], "s3": s3, "pool": pool})
    with pytest.raises(DatasetError, match="1 line\\(s\\) are not in the pool: the series is not nested"):
        ds._series_loader("s2", SERIES, "pool", 5)(fetch, 0, None)
