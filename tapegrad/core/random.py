"""tapegrad's random generators (``tg.Generator``, each a NumPy PCG64 generator, and
the default one ``tg.manual_seed`` seeds) and the rule that a function recorded for
replay draws no random numbers (a replay would reuse them)."""
import numpy as np

from . import tape as _tape
from .tensor import Tensor, check_device

_MASK = (1 << 64) - 1
_STATE_BYTES = 8 + 16 + 16 + 1 + 4       # seed, PCG64 state and increment, has_uint32, uinteger


def _fresh_seed():
    """A non-deterministic 64-bit seed (from the operating system's entropy)."""
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0])


def _seed_value(seed):
    """``seed`` as PyTorch reads it (``int(seed)``; a negative seed wraps to 64 bits)."""
    s = int(seed)
    if not -(1 << 63) <= s <= _MASK:
        raise ValueError("Overflow when unpacking long long")
    return s & _MASK


class Generator:
    """PyTorch's ``torch.Generator``: a random number generator (NumPy's PCG64) with
    ``manual_seed``, ``seed``, ``initial_seed``, ``get_state`` and ``set_state``; pass
    it as ``generator=`` to any random function.  Its numbers are not PyTorch's."""

    def __init__(self, device="cpu"):
        self._device = check_device(device)
        self._reset(_fresh_seed())

    def _reset(self, seed):
        self._seed = seed
        self._rng = np.random.Generator(np.random.PCG64(seed))

    @property
    def device(self):
        return self._device

    def manual_seed(self, seed):
        """Seed the generator (any integer in [-2**63, 2**64)); returns the generator."""
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, (bool, np.bool_)):
            raise RuntimeError("manual_seed expected a long, but got %s" % type(seed).__name__)
        self._reset(_seed_value(seed))
        return self

    def seed(self):
        """Seed the generator with a non-deterministic number, and return that number."""
        s = _fresh_seed()
        self._reset(s)
        return s

    def initial_seed(self):
        """The seed the generator was last seeded with."""
        return self._seed

    def get_state(self):
        """The generator's state as a uint8 tensor (``set_state`` restores it)."""
        st = self._rng.bit_generator.state
        buf = (self._seed.to_bytes(8, "little") + st["state"]["state"].to_bytes(16, "little")
               + st["state"]["inc"].to_bytes(16, "little") + bytes([st["has_uint32"]])
               + int(st["uinteger"]).to_bytes(4, "little"))
        return Tensor._const(np.frombuffer(buf, np.uint8).copy())

    def set_state(self, new_state):
        """Restore a state ``get_state`` returned; returns the generator."""
        if not isinstance(new_state, Tensor) or new_state.dtype != np.uint8:
            raise TypeError("RNG state must be a torch.ByteTensor")
        buf = new_state._data.tobytes()
        if len(buf) != _STATE_BYTES:
            raise RuntimeError("Expected a CPUGeneratorImplState of size %d but found the input RNG state size "
                               "to be %d" % (_STATE_BYTES, len(buf)))
        seed = int.from_bytes(buf[:8], "little")
        bg = np.random.PCG64()
        bg.state = {"bit_generator": "PCG64",
                    "state": {"state": int.from_bytes(buf[8:24], "little"), "inc": int.from_bytes(buf[24:40], "little")},
                    "has_uint32": buf[40], "uinteger": int.from_bytes(buf[41:45], "little")}
        self._seed = seed
        self._rng = np.random.Generator(bg)
        return self

    def __repr__(self):
        return "<tapegrad.Generator object at %#x>" % id(self)

    def __reduce__(self):
        raise TypeError("cannot pickle 'tapegrad.Generator' object")


default_generator = Generator()


def manual_seed(seed):
    """Seed tapegrad's default random generator (with ``int(seed)``, as PyTorch);
    returns it (a ``tg.Generator``)."""
    return default_generator.manual_seed(int(seed))


def seed():
    """Seed the default generator with a non-deterministic number, and return it."""
    return default_generator.seed()


def initial_seed():
    """The seed the default generator was last seeded with."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state (a uint8 tensor)."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore the default generator's state from ``get_rng_state()``."""
    default_generator.set_state(new_state)


def generator(gen=None, fname=None):
    """The NumPy generator for a draw (of ``gen``, a ``tg.Generator``, or of the default
    one): refused while a function is being recorded for replay."""
    if _tape.recording[0]:
        rec = _tape.state().rec
        if rec is not None:
            rec.refuse("it draws random numbers (a replay would reuse them)")
    if gen is None:
        return default_generator._rng
    if type(gen) is not Generator:
        raise TypeError("%s(): argument 'generator' must be torch.Generator, not %s"
                        % (fname or "random", type(gen).__name__))
    return gen._rng
