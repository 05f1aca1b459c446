"""tapegrad's random generator (a NumPy Generator) and the rule that a function
recorded for replay draws no random numbers (a replay would reuse them)."""
import numpy as np

from . import tape as _tape

_generator = np.random.default_rng()


def manual_seed(seed):
    """Seed tapegrad's random generator (a NumPy Generator)."""
    global _generator
    _generator = np.random.default_rng(seed)
    return _generator


def generator():
    """The generator for a draw: refused while a function is being recorded for replay."""
    if _tape.recording[0]:
        rec = _tape.state().rec
        if rec is not None:
            rec.refuse("it draws random numbers (a replay would reuse them)")
    return _generator
