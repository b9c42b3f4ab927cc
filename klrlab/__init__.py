__version__ = "0.1.0"

# The estimators, importable from the top level; loaded on first use so that `import klrlab` stays light.
_ESTIMATORS = {"KernelLogisticRegression": "klrlab.klr", "KernelLogisticRegressionCV": "klrlab.klr",
               "ImportVectorMachine": "klrlab.klr",
               "HalfThresholdingKLR": "klrlab.klr", "TemperatureScaled": "klrlab.calibration",
               "FrankWolfeSVC": "klrlab.svm", "SparseSVC": "klrlab.svm", "SVCPath": "klrlab.svm"}


def __getattr__(name):
    if name in _ESTIMATORS:
        import importlib
        return getattr(importlib.import_module(_ESTIMATORS[name]), name)
    raise AttributeError(f"module 'klrlab' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_ESTIMATORS))
