"""What many test files share: running a backward compiled or interpreted.

``with backward("compiled"):`` runs every backward pass in the block through the
compiled sweep (the kernels are compiled or loaded at the first), ``"interpreted"``
through the NumPy walk; ``MODES`` names both, for tests that check each.
"""
import contextlib

MODES = ("compiled", "interpreted")
_ENGINE_MODE = {"compiled": "never", "interpreted": "always"}


@contextlib.contextmanager
def backward(mode):
    from tapegrad.autograd import engine
    saved = engine.INTERPRET[0]
    engine.INTERPRET[0] = _ENGINE_MODE[mode]    # (in place: the background compile reads the same list)
    try:
        yield
    finally:
        engine.INTERPRET[0] = saved
