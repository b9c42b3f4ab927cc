"Each paper's reproduction protocol, exported from its nbs/9x_repro_<paper> notebook."
