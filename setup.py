# Only the compiled extensions live here; all metadata is in pyproject.toml.
import numpy as np
from Cython.Build import cythonize
from setuptools import Extension, setup

# The hand-written Cython modules, by dotted name: the kernel-row cache, then one compiled loop per solver.
CYTHON_MODULES = ["klrlab._kernels", "klrlab.solvers._smo", "klrlab.solvers._ivm"]

extensions = [
    Extension(
        name,
        [name.replace(".", "/") + ".pyx"],
        include_dirs=[np.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3", "-g0"],
    )
    for name in CYTHON_MODULES
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                             "cdivision": True, "initializedcheck": False},
    )
)
