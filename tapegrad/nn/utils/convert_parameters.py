"""A model's parameters as one flat vector and back (``torch.nn.utils.convert_parameters``)."""
from ... import functions as F
from ...core.tensor import Tensor
from ...core.tensor import typename as _typename

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated (recorded: gradients flow back)."""
    return F.cat([F.reshape(p, (-1,)) for p in parameters])


def vector_to_parameters(vec, parameters):
    """Make each parameter's data the next slice of ``vec`` (a view of it, as PyTorch's
    ``param.data = vec[i:j].view_as(param).data``)."""
    if not isinstance(vec, Tensor):
        raise TypeError("expected torch.Tensor, but got: {}".format(_typename(vec)))
    pointer = 0
    for param in parameters:
        n = param.numel()
        param.data = F.reshape(vec[pointer:pointer + n], param.shape).detach()
        pointer += n
