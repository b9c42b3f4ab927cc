"""One module per training algorithm; each solves a problem defined in `klrlab.dual` and returns a
`klrlab.base.SolverResult`.

smo (+ _smo.pyx): the SMO engine for the KLR, sparse-KLR and C-SVM duals, and its warm-started path
ivm (+ _ivm.pyx): the Import Vector Machine
half_thresholding: l1/2-regularised KLR by half thresholding
"""
