"""asv benchmarks of the cold start: a fresh interpreter imports tapegrad and computes
one gradient (``timeraw_``: each sample is a new process, timed from inside it, so
the interpreter's own start-up is not included).

``setup`` runs the same code once in a subprocess, untimed, so the timed samples
find Numba's on-disk cache warm (the figure a user sees on every run after the
first); ``timeraw_import_numba`` is the floor set by importing Numba itself.
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
        subprocess.run([sys.executable, "-c", ONE_GRADIENT], check=True)

    def timeraw_import_and_grad(self):
        return ONE_GRADIENT

    def timeraw_import_tapegrad(self):
        return "import tapegrad"

    def timeraw_import_numba(self):
        return "import numba"
