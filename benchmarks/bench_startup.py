"""asv benchmarks of the cold start: a fresh interpreter imports tapegrad and computes
one gradient (``timeraw_``: each sample is a new process, timed from inside it, so
the interpreter's own start-up is not included).

Such a small backward is interpreted in NumPy (Numba is not even imported; see
``tapegrad.autograd.engine``).  ``timeraw_import_and_compiled_grad`` forces the
compiled sweep instead (``TAPEGRAD_INTERPRET=never``): import Numba and load the
kernels from its on-disk cache, which ``setup`` fills (``python -m tapegrad warmup``,
untimed), so it is the figure of every run after the first that needs the kernels.
``timeraw_import_numba`` is the floor set by importing Numba itself.
"""
import subprocess
import sys

ONE_GRADIENT = """
import tapegrad as tg
x = tg.tensor([1.0, 2.0], requires_grad=True)
(x * x).sum().backward()
assert x.grad.tolist() == [2.0, 4.0]
"""


class ColdStart:
    timeout = 300           # the warm-up in setup may compile everything (empty cache)
    number = 1
    repeat = (1, 5, 30.0)

    def setup(self):
        # fill Numba's cache (compilation never lands inside a timing)
        subprocess.run([sys.executable, "-m", "tapegrad", "warmup"], check=True, stdout=subprocess.DEVNULL)

    def timeraw_import_and_grad(self):
        return ONE_GRADIENT

    def timeraw_import_and_compiled_grad(self):
        return "import os\nos.environ['TAPEGRAD_INTERPRET'] = 'never'\n" + ONE_GRADIENT

    def timeraw_import_tapegrad(self):
        return "import tapegrad"

    def timeraw_import_numba(self):
        return "import numba"
