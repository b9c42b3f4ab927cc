"""Each paper's protocol, exported from its reproduction notebook (nbs/9x_repro_<paper>.ipynb)."""
