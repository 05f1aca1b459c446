"""Record a function once, replay its tape with new inputs (``tg.compile``, ``tg.record``)."""
from .recording import *  # noqa: F401,F403
from .recording import (_Session, _WatchedArg, _extremum_lin, _live_lin, _record_call,  # noqa: F401
                        Recording, Compiled, Tape, TapeDivergence, NotReplayable, compile, load_tape, record)
