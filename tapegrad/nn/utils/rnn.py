"""``torch.nn.utils.rnn``: padding a batch of sequences of different lengths.

``pad_sequence`` and ``unpad_sequence`` are recorded compositions (gradients flow
through them).  tapegrad has no ``PackedSequence``: ``pack_padded_sequence``,
``pad_packed_sequence``, ``pack_sequence`` and ``unpack_sequence`` raise, naming the
padded form (a padded batch and its lengths or a mask) to use instead.
"""
from ... import creation as C
from ... import functions as F
from ...core.tensor import Tensor

__all__ = ["pad_sequence", "unpad_sequence", "pack_padded_sequence", "pad_packed_sequence", "pack_sequence",
           "unpack_sequence", "PackedSequence"]

_NO_PACKING = ("tapegrad has no PackedSequence, so {} is not supported: pass the padded batch "
               "(nn.utils.rnn.pad_sequence) to the recurrent layer and mask the padded steps, or run the "
               "sequences one at a time")


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack tensors of shapes ``(L_i, *)`` into ``(max L_i, B, *)`` (``(B, max L_i, *)``
    with ``batch_first``), padding each with ``padding_value`` after its end (before
    its start with ``padding_side="left"``), in the first tensor's dtype."""
    if padding_side not in ("left", "right"):
        raise RuntimeError("Expected padding_side to be one of left or right, but got {}.".format(padding_side))
    seqs = list(sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    first = seqs[0]
    rest = tuple(first.shape[1:])
    longest = max(s.shape[0] for s in seqs)
    padded = []
    for s in seqs:
        if tuple(s.shape[1:]) != rest:
            d = next(i for i, (a, b) in enumerate(zip(rest, s.shape[1:])) if a != b) + 1 \
                if s.ndim == first.ndim else 0
            if d:
                raise RuntimeError("The size of tensor a ({}) must match the size of tensor b ({}) at "
                                   "non-singleton dimension {}".format(first.shape[d], s.shape[d], d))
            raise RuntimeError("pad_sequence: every sequence must have the shape (L, *) of the first, {}, "
                               "with its own L; got {}".format(tuple(first.shape), tuple(s.shape)))
        if s.dtype != first.dtype:
            s = s.to(first.dtype)
        n = longest - s.shape[0]
        if n:
            fill = C.full((n,) + rest, padding_value, dtype=first.dtype)
            s = F.cat([s, fill] if padding_side == "right" else [fill, s])
        padded.append(s)
    return F.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The inverse of ``pad_sequence`` (right padding): the list of ``lengths[i]``-long
    sequences."""
    x = padded_sequences if batch_first else F.transpose(padded_sequences, 0, 1)
    lens = lengths.tolist() if isinstance(lengths, Tensor) else list(lengths)
    return [x[i, :int(n)] for i, n in enumerate(lens)]


class PackedSequence:
    """PyTorch's packed batch of sequences, which tapegrad does not have."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(_NO_PACKING.format("PackedSequence"))


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    raise NotImplementedError(_NO_PACKING.format("pack_padded_sequence"))


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    raise NotImplementedError(_NO_PACKING.format("pad_packed_sequence"))


def pack_sequence(sequences, enforce_sorted=True):
    raise NotImplementedError(_NO_PACKING.format("pack_sequence"))


def unpack_sequence(packed_sequences):
    raise NotImplementedError(_NO_PACKING.format("unpack_sequence"))
