# Only the compiled extensions live here; all metadata is in pyproject.toml.
from pathlib import Path

import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

# Every hand-written Cython module of the package (the kernel-row cache, one compiled loop per solver), by its path.
CYTHON_SOURCES = sorted(p.as_posix() for p in Path("klrlab").rglob("*.pyx"))

extensions = [
    Extension(
        source[: -len(".pyx")].replace("/", "."),
        [source],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        # no contraction of a * b + c into one rounding: the C rounds as written, on every target
        extra_compile_args=["-O3", "-g0", "-ffp-contract=off"],
    )
    for source in CYTHON_SOURCES
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                             "cdivision": True, "initializedcheck": False},
    )
)
