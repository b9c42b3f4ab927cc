import json
import re
import shutil
from pathlib import Path

import pytest

from klrlab.docs import (
    MATH_SCRIPT,
    build_docs,
    check_site,
    doc_notebooks,
    markdown_starts,
    notebook_figures,
    page_name,
    polish_site,
    quarto_available,
    readme_headings,
    stage_quarto_names,
)

ROOT = Path(__file__).resolve().parents[1]
FOOTER = "klrlab: kernel classifiers trained in the dual"


def test_quarto_yml_has_one_copy():
    link = ROOT / "nbs" / "_quarto.yml"
    assert link.is_symlink() and link.resolve() == (ROOT / "_quarto.yml").resolve()
    assert FOOTER in (ROOT / "_quarto.yml").read_text()


def test_readme_and_index_say_the_same():
    nb = json.loads((ROOT / "nbs" / "index.ipynb").read_text())
    parts = []
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        parts.append(src if cell["cell_type"] == "markdown" else f"```python\n{src}\n```")
    squash = lambda s: re.sub(r"\s+", " ", s).strip()
    assert squash("\n\n".join(parts)) == squash((ROOT / "README.md").read_text())


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    out = tmp_path_factory.mktemp("docs") / "site"
    report = build_docs(renderer="auto", out=out)
    return report


def test_site_builds_with_every_page_figure_and_link(built_site):
    report = built_site
    assert report.problems == [], report.problems
    assert report.renderer == ("quarto" if quarto_available() else "fallback")
    for page in ["index.html", "config.html", "kernels.html", "base.html", "docs.html", "cli.html"]:
        assert page in report.pages
    kernels = (report.site / "kernels.html").read_text()
    assert kernels.count("data:image/png") >= 1 and "replay" in kernels  # the figure, and the .pyx source
    assert notebook_figures(ROOT / "nbs" / "01_kernels.ipynb") >= 1


def test_both_renderers_read_the_top_level_quarto_yml(built_site):
    # nbdev's processing stages nbs/_quarto.yml (the link) into _proc/; the renderer reads that copy
    staged = ROOT / "_proc" / "_quarto.yml"
    assert staged.read_bytes() == (ROOT / "_quarto.yml").read_bytes()
    assert FOOTER in (built_site.site / "index.html").read_text()


def test_the_check_fails_when_a_page_or_figure_is_missing(built_site, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(built_site.site, site)
    assert check_site(site, ROOT / "nbs") == []
    (site / "base.html").unlink()
    problems = check_site(site, ROOT / "nbs")
    assert any("missing page: base.html" in p for p in problems)
    assert any("broken link base.html" in p for p in problems)  # the sidebar links to it
    kernels = site / "kernels.html"
    kernels.write_text(re.sub(r'<img src="data:image/png[^"]*"', '<img alt="gone"', kernels.read_text()))
    assert any(re.search(r"kernels.html: shows 0 image\(s\) but 01_kernels.ipynb has \d+ saved figure", p)
               for p in check_site(site, ROOT / "nbs"))


def toy_notebook(path, figures=0, hidden=0):
    png = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo="}, "metadata": {}}
    cells = [{"cell_type": "code", "source": "plot()", "outputs": [png], "metadata": {}}] * figures
    for directive in ["#| hide", "#| include: false", "#| output: false", "#| eval: false"][:hidden]:
        cells.append({"cell_type": "code", "source": f"{directive}\nplot()", "outputs": [png], "metadata": {}})
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


def test_page_names_and_notebook_selection(tmp_path):
    assert page_name("01_kernels.ipynb") == "kernels.html" and page_name("index.ipynb") == "index.html"
    assert page_name("10a_smo.ipynb") == "smo.html"
    for name in ["index.ipynb", "01_a.ipynb", "_hidden.ipynb"]:
        toy_notebook(tmp_path / name)
    (tmp_path / ".ipynb_checkpoints").mkdir()
    toy_notebook(tmp_path / ".ipynb_checkpoints" / "01_a-checkpoint.ipynb")
    assert [p.name for p in doc_notebooks(tmp_path)] == ["01_a.ipynb", "index.ipynb"]


def test_hidden_figures_are_not_required(tmp_path):
    toy_notebook(tmp_path / "a.ipynb", figures=2, hidden=4)
    assert notebook_figures(tmp_path / "a.ipynb") == 2


def test_link_checks(tmp_path):
    nbs, site = tmp_path / "nbs", tmp_path / "site"
    nbs.mkdir(); site.mkdir(); (site / "sub").mkdir()
    toy_notebook(nbs / "01_a.ipynb", figures=1)
    (site / "a.html").write_text(
        '<h2 id="x">A</h2><img src="fig/one.png">'
        '<a href="#x">ok</a><a href="#nope">bad fragment</a>'
        '<a href="/sub/">root-relative dir</a><a href="https://site.org/a.html#x">own site, absolute</a>'
        '<a href="https://site.org/gone.html">own site, missing</a><a href="https://other.org/gone.html">external</a>'
        '<a href="mailto:a@b.c">mail</a><link rel="stylesheet" href="missing.css">')
    problems = check_site(site, nbs, site_url="https://site.org")
    assert any("broken link fig/one.png" in p for p in problems)
    assert any("names #nope" in p for p in problems)
    assert any("broken link /sub/" in p for p in problems)
    assert any("broken link https://site.org/gone.html" in p for p in problems)
    assert any("broken link missing.css" in p for p in problems)
    assert not any("other.org" in p or "mailto" in p or "#x," in p for p in problems)
    (site / "fig").mkdir(); (site / "fig" / "one.png").write_bytes(b"png")
    (site / "sub" / "index.html").write_text("<p>sub</p>")
    (site / "gone.html").write_text("<p>back</p>")
    (site / "missing.css").write_text("")
    (site / "a.html").write_text((site / "a.html").read_text().replace("#nope", "#x"))
    assert check_site(site, nbs, site_url="https://site.org") == []


def test_missing_site_folder(tmp_path):
    assert check_site(tmp_path / "nowhere", tmp_path) == [f"the site folder {tmp_path / 'nowhere'} does not exist"]


def test_stage_quarto_names(tmp_path):
    def processed(name, output):
        front = {"cell_type": "raw", "metadata": {}, "source": f"---\ntitle: t\noutput-file: {output}\n---\n"}
        (tmp_path / name).write_text(json.dumps({"cells": [front], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    processed("01_kernels.ipynb", "kernels.html")
    processed("index.ipynb", "index.html")
    (tmp_path / "sidebar.yml").write_text("contents:\n  - index.ipynb\n  - 01_kernels.ipynb\n  - 101_kernels.ipynb\n")
    renamed = stage_quarto_names(tmp_path)
    assert renamed == {"01_kernels.ipynb": "kernels.ipynb"}
    assert sorted(p.name for p in tmp_path.glob("*.ipynb")) == ["index.ipynb", "kernels.ipynb"]
    assert "output-file" not in (tmp_path / "kernels.ipynb").read_text()
    assert (
        tmp_path / "sidebar.yml"
    ).read_text() == "contents:\n  - index.ipynb\n  - kernels.ipynb\n  - 101_kernels.ipynb\n"


def test_bad_renderer():
    with pytest.raises(ValueError, match="renderer='pdf'; accepted values"):
        build_docs(renderer="pdf")
    if not quarto_available():
        with pytest.raises(RuntimeError, match="quarto command is not installed"):
            build_docs(renderer="quarto")


def test_readme_is_well_formed():
    text = (ROOT / "README.md").read_text()
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert len(text) < 20_000, "README.md has grown implausibly: a bad edit?"
    assert headings.count("# klrlab") == 1 and len(headings) == len(set(headings)), "each README heading appears once"
    for section in ["## Set-up: two commands", "## A short example", "## The daily loop"]:
        assert section in headings
    assert "make main" in text and "make test" in text


def test_the_real_site_reads_offline(built_site):
    site = built_site.site
    assert check_site(site, ROOT / "nbs", readme=ROOT / "README.md") == []
    assert (site / MATH_SCRIPT).is_file() and (site / "site_libs/mathjax/output/chtml/fonts/woff-v2").is_dir()
    for page in site.glob("*.html"):
        html = page.read_text()
        assert not re.search(r"""<(?:script|link)\b[^>]*(?:src|href)=["'](?:https?:)?//""", html), page.name
        if 'class="math inline"' in html or 'class="math display"' in html:
            assert MATH_SCRIPT in html, page.name
    smo = (site / "smo.html").read_text()
    assert smo.index('<details class="klr-listing" id="source-_smo-pyx">') > smo.index('id="solve_dual"')
    index_headings = readme_headings(ROOT / "README.md")
    assert len(index_headings) >= 5 and "set up two commands" in index_headings


@pytest.fixture
def site_copy(built_site, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(built_site.site, site)
    return site


def test_a_cdn_script_fails_the_check(site_copy):
    page = site_copy / "smo.html"
    page.write_text(page.read_text().replace(
        "</head>", '<script src="https://cdn.jsdelivr.net/npm/katex@0.16.11/dist/katex.min.js"></script></head>'))
    problems = check_site(site_copy, ROOT / "nbs")
    assert problems == ["smo.html: loads https://cdn.jsdelivr.net/npm/katex@0.16.11/dist/katex.min.js from the network "
                        "(the site must work offline)"]


def test_maths_without_a_local_renderer_fails_the_check(site_copy):
    page = site_copy / "dual.html"
    page.write_text(re.sub(r'<script defer id="MathJax-script"[^>]*></script>', "", page.read_text()))
    assert check_site(site_copy, ROOT / "nbs") == [
        "dual.html: has maths but no local MathJax/KaTeX script: formulas would show as raw TeX"]


def test_a_remote_font_import_fails_the_check(site_copy):
    css = site_copy / "styles.css"
    css.write_text("@import url(https://fonts.googleapis.com/css2?family=Source+Sans+Pro);\n" + css.read_text())
    assert check_site(site_copy, ROOT / "nbs") == [
        "styles.css: imports a stylesheet from the network (the site must work offline)"]


def test_a_table_outside_a_scroll_box_fails_the_check(site_copy):
    page = site_copy / "repro_consolo.html"
    html = page.read_text()
    assert html.count('<div class="klr-table-scroll">') >= 10
    page.write_text(html.replace('<div class="klr-table-scroll"><table', '<div><table', 1))
    problems = check_site(site_copy, ROOT / "nbs")
    assert len(problems) == 1 and problems[0].startswith("repro_consolo.html: 1 table(s) outside a scroll box")
    polish_site(site_copy, ROOT / "nbs")  # polishing boxes it again
    assert check_site(site_copy, ROOT / "nbs") == []


def test_a_lost_heading_or_paragraph_fails_the_check(site_copy):
    page = site_copy / "smo.html"
    html = page.read_text()
    assert "shrinking measured and left out" in markdown_starts(ROOT / "nbs" / "11_smo.ipynb")
    page.write_text(re.sub(r"<h2[^>]*>Shrinking: measured, and left out</h2>", "", html))
    assert check_site(site_copy, ROOT / "nbs") == [
        "smo.html: lost the text of 11_smo.ipynb's markdown starting 'shrinking measured and left out'"]
    paragraph = re.search(r"<p>A step moves a pair.*?</p>", html, re.S).group(0)
    page.write_text(html.replace(paragraph, ""))
    assert check_site(site_copy, ROOT / "nbs") == [
        "smo.html: lost the text of 11_smo.ipynb's markdown starting 'a step moves a pair'"]


def test_the_landing_page_shows_every_readme_section(site_copy):
    page = site_copy / "index.html"
    html = page.read_text()
    assert check_site(site_copy, ROOT / "nbs", readme=ROOT / "README.md") == []
    page.write_text(re.sub(r"(<h2[^>]*>)A short example(</h2>)", r"\1An example\2", html))
    problems = check_site(site_copy, ROOT / "nbs", readme=ROOT / "README.md")
    assert "index.html: lacks the README section 'a short example'" in problems


def test_an_unwritable_site_folder_is_refused_before_the_build():
    from klrlab.docs import _site_destination
    with pytest.raises(ValueError, match="out='/proc/1/klrlab-site' cannot be written"):
        _site_destination("/proc/1/klrlab-site")


def test_an_interrupted_copy_leaves_the_previous_site_and_the_next_copy_proceeds(tmp_path, monkeypatch):
    import klrlab.docs as docs
    old_site, new_site, out = tmp_path / "old", tmp_path / "new", tmp_path / "site"
    for site, text in ((old_site, "old"), (new_site, "new")):
        site.mkdir(); (site / "index.html").write_text(text); (site / docs.SITE_MARK).write_text("mark")
    docs._swap_in(old_site, out)
    real_copytree = shutil.copytree
    def interrupted(source, target, **kwargs):
        Path(target).mkdir(); (Path(target) / "index.html").write_text("ne")     # a partial copy, then Ctrl-C
        raise KeyboardInterrupt
    monkeypatch.setattr(docs.shutil, "copytree", interrupted)
    with pytest.raises(KeyboardInterrupt):
        docs._swap_in(new_site, out)
    assert (out / "index.html").read_text() == "old"                  # the previous site, whole
    monkeypatch.setattr(docs.shutil, "copytree", real_copytree)
    assert docs._site_destination(out) == out                         # still a site: the next run may replace it
    docs._swap_in(new_site, out)
    assert (out / "index.html").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old", "site"]   # no staging left behind
