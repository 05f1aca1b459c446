"""Every public function, Tensor method and class constructor tapegrad has, compared
with PyTorch's documented signature: parameter names, order, kinds (positional /
keyword-only / variadic) and defaults.

PyTorch's signatures are in tests/data/torch_signatures.json, written by
``python tests/torch_signatures.py`` (parsed from the signature lines of the
docstrings of its builtins, read with ``inspect`` from its Python functions); the
test runs without torch, and with torch installed it derives them again and
checks that the file is current.

A difference either is fixed or is listed in DEVIATIONS below with its reason; the
test fails on a difference not listed and on a listed one that no longer differs.
Rules that apply to every name:

* Parameters PyTorch has and tapegrad omits everywhere: ``out`` (tapegrad writes no
  output tensors in place; where tapegrad accepts ``out=None`` it refuses any other
  value), ``layout``, ``pin_memory``, ``memory_format`` (one dense layout, on the CPU),
  ``generator`` (one generator, ``tg.manual_seed``), ``device`` (the CPU only: see
  docs/differences.md).  A tapegrad signature that has them is compared as usual,
  except that a function serving as both ``torch.f`` (which has ``out``) and
  ``Tensor.f`` (which has not) may keep ``out``.
* A trailing ``**kw`` of tapegrad where PyTorch has none is PyTorch's NumPy spellings
  (``axis=`` for ``dim=``, ``keepdims=`` for ``keepdim=``), which PyTorch's argument
  parser accepts without documenting them; any other keyword raises TypeError
  naming the public function.
"""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_signatures as S  # noqa: E402

OMITTED = {"out", "layout", "pin_memory", "memory_format", "generator", "device"}

# Names tapegrad has that PyTorch does not (in that namespace).
NOT_IN_TORCH = {
    "torch.compile": None,      # (placeholder removed below: torch has compile; see DEVIATIONS)
    "torch.record": "tapegrad's recorded tapes of numeric functions (tapegrad.replay)",
    "torch.load_tape": "loads a tg.record tape saved with Tape.save",
    "torch.memory_stats": "tapegrad's tape memory counters",
    "torch.gradcheck": "an alias of tg.autograd.gradcheck (torch.autograd.gradcheck in PyTorch)",
    "torch.autograd.is_anomaly_enabled": "PyTorch has it as torch.is_anomaly_enabled only",
    "torch.autograd.is_anomaly_check_nan_enabled": "PyTorch has it as torch.is_anomaly_check_nan_enabled only",
    "torch.nn.functional.label_flags": "an internal helper the replay of nll_loss uses",
}
del NOT_IN_TORCH["torch.compile"]

# PyTorch documents no signature for these (no signature line, no inspect.signature).
UNDOCUMENTED = {"Tensor.detach", "Tensor.detach_", "Tensor.log_softmax", "Tensor.relu", "Tensor.relu_",
                "torch.log_softmax", "torch.relu", "torch.index_fill", "torch.masked_fill", "torch.masked_scatter",
                "torch.put"}

_RECORDER = ("the op's recorder (the Tensor method itself, no wrapper on the hot path) has the internal "
             "parameters p, q, name after input; user code never passes them")
_SHARED = "one function serves as torch.%s and Tensor.%s, whose documented signatures differ"
_REQUIRED_DIM = ("dim has a placeholder default so that axis= can stand in for it; omitting both raises "
                 "PyTorch's TypeError")

# qualified name -> reason the signature stays different
DEVIATIONS = {
    **{"torch.nn.init.%s" % n: "PyTorch documents its deprecated aliases of nn.init as name(...)" for n in (
        "constant", "dirac", "eye", "kaiming_normal", "kaiming_uniform", "normal", "orthogonal", "sparse", "uniform",
        "xavier_normal", "xavier_uniform")},
    # its docstring names the parameters (B, L, upper); its keywords are input, input2 (as tapegrad's)
    "Tensor.pinverse": "PyTorch's docstring says pinverse(); the method takes rcond=1e-15 as torch.pinverse does",
    "torch.cholesky_solve": "PyTorch's docstring says cholesky_solve(B, L, upper=False); its keywords are input, input2",
    **{"torch.%s" % n: _RECORDER for n in ("abs", "cos", "exp", "expm1", "floor", "log", "log1p", "round",
                                            "sigmoid", "sign", "sin", "sqrt", "tan", "tanh")},
    **{"Tensor.%s" % n: _RECORDER for n in ("abs", "cos", "exp", "expm1", "floor", "log", "log1p", "round",
                                             "sigmoid", "sign", "sin", "sqrt", "tan", "tanh", "exp_")},
    **{"%s.%s" % (ns, n): _RECORDER for ns in ("torch", "Tensor") for n in (
        "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan", "arcsinh",
        "arccosh", "arctanh", "log2", "log10", "exp2", "reciprocal", "rsqrt", "ceil", "trunc", "frac", "sinc", "erf", "erfc", "erfinv", "lgamma", "digamma", "i0")},
    "Tensor.stride": "PyTorch documents stride(dim); its other overload, stride(), gives every dimension's",
    "Tensor.logit": "eps=None as in torch.logit: PyTorch documents the method without its parameter",
    "Tensor.mul": _SHARED % ("mul", "mul") + " (other / value)",
    "Tensor.mul_": _SHARED % ("mul", "mul_") + " (other / value)",
    "Tensor.div": _SHARED % ("div", "div") + " (other / value)",
    "Tensor.div_": _SHARED % ("div", "div_") + " (other / value)",
    "Tensor.floor_divide": _SHARED % ("floor_divide", "floor_divide") + " (other / value)",
    "Tensor.floor_divide_": _SHARED % ("floor_divide", "floor_divide_") + " (other / value)",
    "torch.repeat_interleave": "PyTorch documents overloads repeat_interleave(input, repeats, dim=None, *, "
                               "output_size=None) and repeat_interleave(repeats, *, output_size=None), which merge "
                               "into no single Python signature (repeats=None is the second form)",
    "torch.pow": "pow(input, exponent): PyTorch documents overloads pow(input, exponent) and pow(self, exponent) "
                 "(a number base), which merge into no single Python signature",
    "Tensor.matmul": _SHARED % ("matmul", "matmul") + " (other / tensor2)",
    "Tensor.bmm": _SHARED % ("bmm", "bmm") + " (mat2 / batch2)",
    "Tensor.dot": _SHARED % ("dot", "dot") + " (tensor / other)",
    "Tensor.softmax": _SHARED % ("softmax", "softmax") + " (the method documents no dtype)",
    "torch.softmax": "one function serves as torch.softmax and F.softmax (dtype positional in F), and "
                     + _REQUIRED_DIM,
    "torch.logsumexp": _REQUIRED_DIM,
    "Tensor.logsumexp": _REQUIRED_DIM,
    "torch.unsqueeze": _REQUIRED_DIM,
    "torch.cumsum": _REQUIRED_DIM,
    "Tensor.cumsum": _SHARED % ("cumsum", "cumsum") + " (dtype positional in the method), and " + _REQUIRED_DIM,
    "Tensor.unsqueeze": _REQUIRED_DIM,
    "torch.squeeze": "PyTorch documents squeeze(input, dim) but accepts squeeze(input) (dim=None), as tapegrad",
    "torch.max": "max(input, dim=None, keepdim=False): the elementwise overload max(input, other) is reached by "
                 "passing a Tensor as dim",
    "torch.min": "min(input, dim=None, keepdim=False): the elementwise overload min(input, other) is reached by "
                 "passing a Tensor as dim",
    "torch.var": "also takes the deprecated positional unbiased (var(x, dim, unbiased, keepdim)), as "
                 "PyTorch's undocumented overload does; correction=None means 1",
    "torch.std": "also takes the deprecated positional unbiased, as torch.var; correction=None means 1",
    "Tensor.var": "also takes the deprecated positional unbiased, as torch.var; correction=None means 1",
    "Tensor.std": "also takes the deprecated positional unbiased, as torch.var; correction=None means 1",
    "torch.arange": "arange(start=0, end=None, step=1): PyTorch's 'start=0, end' (a required parameter "
                    "after an optional one) is no Python signature",
    "torch.randint": "randint(*args, ...): randint(high, size) and randint(low, high, size) are parsed from "
                     "*args, as PyTorch's 'low=0, high, size' is no Python signature",
    "Tensor.to": "to(*args, device=, dtype=, non_blocking=, copy=): PyTorch's overloads to(device, dtype), "
                 "to(dtype), to(other) are parsed from *args",
    "Tensor.view": "view(*shape, dtype=None): PyTorch's overloads view(*shape) and view(dtype) are parsed "
                   "from *shape",
    "torch.trapz": "also dx=, PyTorch's second overload trapz(y, *, dx=1, dim=-1), which its docstring's "
                   "signature line leaves out",
    "torch.mm": "no out_dtype overload (PyTorch's is CUDA-only: its CPU build raises NotImplementedError too)",
    "torch.bmm": "no out_dtype overload (PyTorch's is CUDA-only: its CPU build raises NotImplementedError too)",
    "torch.permute": "permute(input, *dims): the method's spelling; PyTorch's function takes the dims as one "
                     "tuple, which tapegrad's also accepts (permute(x, (1, 0)))",
    "torch.compile": "tapegrad's compile records and replays a tape: its options (strict, log) are its own, "
                     "PyTorch's (backend, mode, fullgraph...) choose among compilers tapegrad does not have",
    "torch.autograd.gradcheck": "PyTorch's check_* and fast_mode/masked/nondet_tol options select checks "
                                "tapegrad's dense finite-difference check does not make",
    "torch.autograd.gradgradcheck": "as gradcheck; seed= (the random grad_outputs) is tapegrad's",
    "Tensor.flip": "flip(*dims): also the dims as separate ints (x.flip(0, 1)), which PyTorch's method accepts "
                   "without documenting it",
    "Tensor.tile": "tile(*dims): also the dims as separate ints (x.tile(2, 1)), which PyTorch's method accepts "
                   "without documenting it",
    "Tensor.roll": "dims=None as in torch.roll: PyTorch documents the method's dims without its default, and "
                   "x.roll(1) rolls the flattened tensor there too",
    "Tensor.rot90": "k=1, dims=(0, 1) as in torch.rot90: PyTorch documents the method's parameters without their "
                    "defaults, and x.rot90() works there too",
    "Tensor.tensor_split": "one function serves as torch.tensor_split and Tensor.tensor_split: the method, as "
                           "PyTorch's, also takes the sections= and indices= keywords of torch.tensor_split's "
                           "overloads, which its documentation does not list",
    "Tensor.gather": _SHARED % ("gather", "gather") + " (the method documents no sparse_grad, which it accepts)",
    "Tensor.take_along_dim": "dim=None, as PyTorch's method accepts (its documentation says dim is required)",
    "torch.scatter": "scatter(input, dim, index, src=None, value=None, *, reduce=None): PyTorch's overloads "
                     "scatter(..., src), scatter(..., value) and the deprecated reduce= merge into one signature",
    "Tensor.scatter": "as torch.scatter: the src, value and reduce= overloads in one signature",
    "torch.index_add": "out=None: PyTorch documents out as keyword-only without a default (it is optional)",
    "torch.index_copy": "out=None: PyTorch documents out as keyword-only without a default (it is optional)",
    "Tensor.put": "PyTorch's method documents the function's signature put(input, index, source, accumulate)",
    "Tensor.nonzero": "as_tuple=False, which PyTorch's method accepts without documenting it",
    "Tensor.uniform_": "uniform_(*args, generator=None, **kw): PyTorch's parameter 'from' is a Python keyword, "
                       "so from= and to= are parsed from **kw",
    "Tensor.random_": "random_(*args, generator=None, **kw): PyTorch's parameter 'from' is a Python keyword, "
                      "so from= and to= are parsed from **kw",
    "torch.bernoulli": "bernoulli(input, p=None, ...): PyTorch's overload bernoulli(input, p) (a number) is in "
                       "its argument parser, not its documentation",
    "Tensor.bernoulli": "bernoulli(p=None, ...): the overload with a number p, as torch.bernoulli",
    "torch.normal": "dtype, device, requires_grad, pin_memory: the keywords of PyTorch's overload "
                    "normal(float mean, float std, size), in its argument parser, not its documentation",
    "torch.randint_like": "randint_like(input, low=0, high=None): PyTorch's 'low=0, high' (a required parameter "
                          "after an optional one) is no Python signature; randint_like(x, high) as PyTorch",
    "torch.asarray": "PyTorch documents dtype and device without their default (None, as tapegrad's)",
    "torch.as_tensor": "PyTorch documents device without its default (None, as tapegrad's)",
    **{"Tensor.%s" % n: "%s(*size, ...): also the sizes as separate ints (x.%s(2, 3)), which PyTorch's method "
                        "accepts without documenting it" % (n, n) for n in ("new_zeros", "new_ones", "new_empty")},
    "Tensor.sort": _SHARED % ("sort", "sort") + " (the method documents no stable=, which it accepts)",
    "Tensor.argsort": _SHARED % ("argsort", "argsort") + " (the method documents no stable=, which it accepts)",
    "torch.cumprod": _REQUIRED_DIM,
    "Tensor.cumprod": _SHARED % ("cumprod", "cumprod") + " (dtype positional in the method), and " + _REQUIRED_DIM,
    "Tensor.cumprod_": "as Tensor.cumprod: " + _SHARED % ("cumprod", "cumprod_") + " (dtype positional in the "
                       "method), and " + _REQUIRED_DIM,
    "torch.median": "median(input) (of all elements, a tensor) and median(input, dim=-1, keepdim=False) (values "
                    "and indices) merge into dim=None: omitting dim gives the first overload, as in PyTorch",
    "torch.nanmedian": "as torch.median: nanmedian(input) and nanmedian(input, dim=-1, keepdim=False) merge into "
                       "dim=None",
    "torch.msort": "out=None: PyTorch documents out as keyword-only without a default (it is optional)",
    "torch.nn.functional.mse_loss": None,       # (compared: weight= is accepted and refused when given)
}
# PyTorch's other spellings (tests/test_spellings2.py): the in-place variants and aliases
_SEE_TORCH = "PyTorch documents Tensor.%s() with no parameters (its docstring refers to torch.%s); tapegrad's are those"
DEVIATIONS.update({"Tensor.%s" % n: _SEE_TORCH % (n, n.rstrip("_")) for n in (
    "abs_", "absolute", "absolute_", "acos_", "acosh_", "arccos_", "arcsin_", "arcsinh_", "arctan_", "asin_",
    "asinh_", "atan_", "bitwise_and", "bitwise_and_", "bitwise_or", "bitwise_or_", "bitwise_xor",
    "bitwise_xor_", "ceil_", "cos_", "cosh_", "digamma_", "erf_", "erfc_", "erfinv_", "exp2_", "expm1_",
    "floor_", "frac_", "i0_", "lgamma_", "log10_", "log1p_", "log2_", "log_", "logical_and", "logical_and_",
    "logical_or", "logical_or_", "logical_xor", "logical_xor_", "logit_", "reciprocal_", "rsqrt_", "sigmoid_",
    "sign_", "sin_", "sinc_", "sinh_", "sqrt_", "tan_", "tanh_", "trunc_")})
DEVIATIONS.update({"Tensor.%s" % n: _RECORDER for n in ("arctanh_", "atanh_", "round_")})
DEVIATIONS.update({"torch.%s" % n: _RECORDER for n in ("absolute", "relu_")})
DEVIATIONS["Tensor.cumsum_"] = _REQUIRED_DIM
DEVIATIONS["Tensor.unsqueeze_"] = _REQUIRED_DIM
DEVIATIONS.update({"torch.%s" % n: "PyTorch's docstring gives out= no default; it is optional there too"
                   for n in ("bitwise_or", "logical_xor", "true_divide")})
UNDOCUMENTED |= {"Tensor.arccosh_", "Tensor.arctan2_", "Tensor.less", "torch.clamp_", "torch.detach",
                 "torch.detach_", "torch.exp_", "torch.fill_", "torch.neg_", "torch.rsub", "torch.zero_"}

# torch.abs_(x)... (the function form of the in-place methods), clamp_min/clamp_max: no signature documented
UNDOCUMENTED |= {"torch.%s" % n for n in (
    "abs_ acos_ acosh_ addmv_ arccos_ arccosh_ arcsin_ arcsinh_ arctan_ arctanh_ asin_ asinh_ atan_ atanh_ ceil_ "
    "clamp_max clamp_max_ clamp_min clamp_min_ clip_ cos_ cosh_ erf_ erfc_ exp2_ expm1_ fix_ floor_ frac_ i0_ "
    "log10_ log1p_ log2_ log_ logit_ nan_to_num_ negative_ reciprocal_ round_ rsqrt_ sigmoid_ sin_ sinc_ sinh_ "
    "sqrt_ square_ tan_ tanh_ trunc_ xlogy_").split()}
UNDOCUMENTED |= {"Tensor.clamp_max", "Tensor.clamp_max_", "Tensor.clamp_min", "Tensor.clamp_min_"}
DEVIATIONS.update({"torch.%s" % n: "no out_dtype overload (PyTorch's is CUDA-only, as for torch.mm)"
                   for n in ("addmm", "baddbmm")})
DEVIATIONS = {k: v for k, v in DEVIATIONS.items() if v is not None}


def _load():
    with open(S.DATA) as f:
        return json.load(f)


def _comparable(mine, theirs):
    """Both signatures without what the rules above leave out."""
    mine_names = {p[0] for p in mine}
    theirs_kinds = {p[1] for p in theirs}
    theirs_names = {p[0] for p in theirs}
    m = [p for p in mine if not (p[1] == "**" and "**" not in theirs_kinds)
         and not (p[0] == "out" and "out" not in theirs_names)]
    t = [p for p in theirs if not (p[0] in OMITTED and p[0] not in mine_names)]
    return m, t


def _differences():
    data = _load()["signatures"]
    names = S.tapegrad_names()
    out = {}
    for q, obj in sorted(names.items()):
        if q not in data:
            out[q] = "not in the data file: run python tests/torch_signatures.py"
            continue
        theirs = data[q]
        if theirs is None:
            if q not in NOT_IN_TORCH:
                out[q] = "PyTorch has no %s; list it in NOT_IN_TORCH with a reason" % q
            continue
        if q in NOT_IN_TORCH:
            out[q] = "listed in NOT_IN_TORCH but PyTorch has it"
            continue
        if theirs == "undocumented":
            if q not in UNDOCUMENTED:
                out[q] = "PyTorch documents no signature: list it in UNDOCUMENTED"
            continue
        mine = S.tapegrad_signature(q, obj)
        m, t = _comparable(mine, theirs)
        if m != t:
            out[q] = "tapegrad %s\n  PyTorch %s" % (m, t)
    return out, names


def test_every_difference_is_fixed_or_listed():
    diffs, names = _differences()
    unlisted = {q: d for q, d in diffs.items() if q not in DEVIATIONS}
    assert not unlisted, "signatures that differ from PyTorch's:\n" + "\n".join(
        "%s:\n  %s" % kv for kv in sorted(unlisted.items()))


def test_every_listed_deviation_still_differs():
    diffs, names = _differences()
    stale = sorted(q for q in DEVIATIONS if q not in diffs)
    assert not stale, "DEVIATIONS entries that no longer differ (remove them): %s" % stale
    stale = sorted(q for q in list(NOT_IN_TORCH) + sorted(UNDOCUMENTED) if q not in names)
    assert not stale, "entries for names tapegrad no longer has: %s" % stale


def test_the_comparison_sees_real_signatures():
    # the data and the parser agree on signatures read by hand from PyTorch's docs
    data = _load()["signatures"]
    assert data["torch.add"] == [["input", "pos", None], ["other", "pos", None], ["alpha", "kw", "1.0"],
                                 ["out", "kw", "None"]]
    assert data["torch.sum"] == [["input", "pos", None], ["dim", "pos", "None"], ["keepdim", "pos", "False"],
                                 ["dtype", "kw", "None"]]
    assert data["Tensor.view"][-1] == ["shape", "*", None]
    assert S.parse_doc_params("input, dim, keepdim=False, \\*, dtype=None") == [
        ["input", "pos", None], ["dim", "pos", None], ["keepdim", "pos", "False"], ["dtype", "kw", "None"]]
    import tapegrad as tg
    assert S.tapegrad_signature("torch.add", tg.add) == data["torch.add"][:3] + [["out", "kw", "None"]]
    assert S.tapegrad_signature("Tensor.sum", tg.Tensor.sum)[:2] == [["dim", "pos", "None"],
                                                                    ["keepdim", "pos", "False"]]
    assert len(data) > 200


def test_data_file_is_current():
    torch = pytest.importorskip("torch")
    data = _load()
    assert data["torch_version"] == torch.__version__.split("+")[0]
    live = S.derive(S.tapegrad_names())
    stale = sorted(q for q in set(live) | set(data["signatures"]) if live.get(q) != data["signatures"].get(q))
    assert not stale, "tests/data/torch_signatures.json is stale for %s: run python tests/torch_signatures.py" % stale
