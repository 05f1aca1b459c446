"""Record a function once, replay its tape with new inputs.

``tg.compile(fn)`` and ``tg.record(fn, *args)`` run ``fn`` eagerly once under a
recording session (``_Session``) that keeps everything a replay needs:

* the tape itself (all of it on one tape: no rotation while recording), with the
  output shape of every non-elementwise entry;
* where each leaf and constant came from (``sources``): an argument, read anew at
  each replay; a tensor the function captured (closure, module parameter), read
  live, so parameters updated by an optimizer are used and receive ``.grad``;
  or a comparison of recorded values (``x > 0``), recomputed;
* a guard for every place Python read a recorded value (``bool``, ``float``,
  ``item``, ``tolist``, ``numpy``, a tensor used as an index, an integer argument
  read by library code): the value seen then, checked at replay.

Anything the session cannot follow (a value computed outside the tape from a
recorded one: ``detach``, ``argmax``, random numbers, a captured non-leaf) makes
the recording *not replayable*: ``tg.compile`` then always runs the function
eagerly for that signature and ``tg.record`` raises, so a replay is never wrong.

A replay (``Recording.forward``) recomputes every entry from its inputs with the
family's ``replay_rule`` (the same NumPy call the recorder made), checks the
guards, and builds a sealed tape over the new values: the ordinary compiled
reverse sweep then differentiates it, accumulating into the live leaves.

The modules, each importing only those above it in this list:

* ``session``: the recording observer (``_Session``), watched integer arguments,
  guards, live gathers, argument keys;
* ``forward``: the forward strategies (Python, scalar, arena) and value containers;
* ``fuse``: the fused replay, a tape compiled into generated Numba loops (``fuse=``);
* ``replayed``: ``ReplayedTape``, the tape of one replay, and its plan, how
  backward sweeps it;
* ``recording``: ``Recording`` (snapshot, program, guards, outputs) and the
  recording of one call;
* ``compile``: ``tg.compile``;
* ``tapefile``: the data-only tape file format;
* ``record``: ``tg.record``, ``RecordedTape``, save and ``tg.load_tape``.
"""
from .compile import Compiled, CompileStats, compile  # noqa: F401
from .record import RecordedTape, load_tape, record  # noqa: F401
from .recording import Recording, _record_call  # noqa: F401
from .session import NotReplayable, TapeDivergence, _Session, _WatchedArg, _extremum_lin, _live_lin, _order_lin  # noqa: F401
