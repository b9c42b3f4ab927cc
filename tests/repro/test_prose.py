"""The reproduction pages of Consolo et al. (nb 90) and Keerthi et al. (nb 91) type no result by hand: every number in
their prose is rendered from the tables by a hidden code cell, so a rerun that changes a table changes the sentence.
What their markdown (and the literal text of their rendering cells) may still hold is listed here: references (section,
table, equation numbers, dataset names, code spans: `klrlab.docs.typed_numbers` sets them aside) and the protocol's
settings, each of which the notebook asserts against its code next to the text."""
import json
from pathlib import Path

import pytest

from klrlab.docs import notebook_prose, typed_numbers

NBS = Path(__file__).resolve().parents[2] / "nbs"

# names and notation that carry digits
NOTATION = ["$\\lambda = 0$", "$\\lambda > 0$", "λ > 0", "sparsest of 3", "sparsest-of-3", "$\\beta = 0$", "2-core",
            "2-D", "$(0, C)$", "\\log_{10}", "$\\sigma^2$", "P(y = +1\\mid x)", "P(y = +1)", "[0, 1]"]

ALLOWED = {
    "90_repro_consolo.ipynb": NOTATION + [
        # the protocol (§5.1), asserted by the cell after the constants
        "$\\sigma = 1$ ($\\gamma = 0.5$)", "stratified 5 %", "other 95 %", "on the 95 %", "being 5 % of it",
        "$C \\in \\{10^{-4}, \\dots, 10^4\\}$", "$\\lambda = kC/9$, $k = 0..9$", "$k = 0$", "$\\gamma = 10^{-5}$",
        "a 5 % validation split of sonar is 9 points", "$\\lambda = C/10$", "150 candidates", "2.5 GB",
        "10 000 iterations", "$\\tau = 10^{-5}$", "at most 20 000 of the 15 000 points", "the paper's $10^4$ iterations",
        "10 equal-width bins",
        # the grid's first step and the safe step's formula
        "$\\lambda = C/9$", "$\\lambda \\ge C/9$", "$k \\ge 1$", "$1/L$", "$L = \\frac{C}{4}\\|[K\\ 1]\\|_2^2$",
        "$10^{-3}$", "ratio of 0", "ratio is 0", "towards 1", "near 1",
        # the sparsity-gap section: the paper's start, cap and grid, the alternative thresholds, monk2's definition,
        # each asserted beside its text
        "$\\alpha_i = 1/m_k$", "from $1/m_k$,", "start $1/m_k$,", "stops at $10^4$ iterations", "$10^4$ iterations",
        "(ten values $kC/9$)", "$9 \\times 10$ grid", "on 95 % (validation)", "$\\alpha_i < 10^{-3}C$",
        "validation splits of 5 %", "within 0.005 of the fold's best", "0.05 of the paper's",
        "$3 \\cdot 3 \\cdot 2 \\cdot 3 \\cdot 4 \\cdot 2 = 432$", "432 × 6", "all 432 points", "169-point",
        "σ = 1 Gaussian",
    ],
    "91_repro_keerthi.ipynb": NOTATION + [
        "500 MHz", "realisation 1", "1000/2175", "10×10", "20×20",
        # Table 2's protocol (§6) and caps, asserted beside TABLE2
        "$\\tau = 10^{-6}$", "$E_{\\text{BFGS}} \\le E_{\\text{SMO}}(1 + 10^{-9})$", "(20 s quick, 300 s paper)",
        "more than 50000 s",
        # the Adult series as the paper states it, asserted beside ADULT_KERNELS
        "from 1605 to 22696 points", "($C = 0.05$)", "($C = 1$, $\\sigma^2 = 10$)", "$\\propto m^{2.2}$", "1000 MB",
        # the benchmark's defaults, asserted before it runs
        "$C = 1$", "paper 000", "median of 3",
    ],
}


def typed_by_hand(notebook: Path, allowed) -> list:
    return [(i, found) for i, text in notebook_prose(notebook) if (found := typed_numbers(text, allowed))]


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_no_number_in_the_prose_is_typed_by_hand(name):
    assert typed_by_hand(NBS / name, ALLOWED[name]) == []


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_the_rendering_cells_read_as_prose(name):
    "Each cell that renders Markdown hides its source and has a saved output, so the page shows the sentence."
    cells = json.loads((NBS / name).read_text(encoding="utf-8"))["cells"]
    rendering = [c for c in cells if c["cell_type"] == "code" and "Markdown(" in "".join(c["source"])]
    assert len(rendering) >= 5
    for cell in rendering:
        source = "".join(cell["source"])
        assert source.startswith("#| echo: false\n"), source[:80]
        assert any("text/markdown" in o.get("data", {}) for o in cell["outputs"]), source[:80]


def test_a_typed_number_is_caught_in_markdown_and_in_a_rendering_cell(tmp_path):
    "The check is not vacuous: the stale sentences of the audit, typed back into a copy of nb 90, fail it."
    nb = json.loads((NBS / "90_repro_consolo.ipynb").read_text(encoding="utf-8"))
    stale = "Between 5 and 27 % of the points end at the bound"
    nb["cells"].append({"cell_type": "markdown", "id": "stale1", "metadata": {}, "source": [stale]})
    nb["cells"].append({"cell_type": "code", "id": "stale2", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": ["#| echo: false\n", 'Markdown(f"LIBSVM and SVC within a factor of 2 ({x:.1f}×)")']})
    copy = tmp_path / "90_repro_consolo.ipynb"
    copy.write_text(json.dumps(nb), encoding="utf-8")
    found = dict(typed_by_hand(copy, ALLOWED["90_repro_consolo.ipynb"]))
    n = len(nb["cells"])
    assert {i: v for i, v in found.items() if i >= n - 2} == {n - 2: ["5", "27"], n - 1: ["2"]}
