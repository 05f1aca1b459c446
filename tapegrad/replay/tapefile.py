"""The tape file format of ``RecordedTape.save`` / ``tg.load_tape``: data only.

A tape file is a zip archive (an ``.npz``) of

* ``header.json``: ``{"format": "tapegrad-tape", "format_version": 2,
  "tapegrad_version": ..., "arrays": [names], "state": ...}``, where ``state`` is
  the recording's state in JSON, each array replaced by ``{"a": name}``;
* one ``.npy`` member per array, numeric or boolean dtypes only, written and read
  with ``allow_pickle=False``.

Nothing in a file is ever executed: the loader parses JSON and NumPy arrays, maps
the few function references a recording holds (the live gathers' index functions)
through a fixed table of tapegrad functions, and checks every slot index, size and
field against the tape before a replay reads it.  Anything unexpected (an unknown
member, an object array, a truncated archive, another format version, sizes that
disagree) raises ``ValueError`` naming it.

Pickling a ``RecordedTape`` in memory (``pickle.dumps``, what Dask does between its own
processes) still uses ``Recording.__getstate__``: unpickling is for trusted data
only, as everywhere in Python.  Files use this format.
"""
import functools
import io
import json
import math
import os
import zipfile

import numpy as np

from ..core import tape as _tp
from ..ops import shape as _sh
from ..core.registry import META_END, OP_NAMES, EntryError, check_entries
from .forward import _DERIVED_FNS
from .recording import Recording
from .session import _extremum_lin, _live_lin, _order_lin
from ..ops.order import ORDER_LIN

FORMAT_NAME = "tapegrad-tape"
FORMAT_VERSION = 2
HEADER = "header.json"
_NUMERIC_KINDS = "biufc"
_ZIP_MAGIC = b"PK\x03\x04"
MAX_HEADER_BYTES = 1 << 28
MAX_ELEMENTS = 1 << 40      # elements of all entries together: 8 TiB of float64, far past any real tape


# The functions a recording may refer to (its live gathers and label guards), by the
# name a file gives them: a file can name only these.  A layer above the replay
# package registers its own (``tapegrad/__init__.py``: nn's ``label_flags``).
FUNCTIONS = {"live_lin": _live_lin, "extremum_lin": _extremum_lin, "order_lin": _order_lin}


def register_function(name, fn):
    """Let recordings that refer to ``fn`` be saved, and files naming ``name`` load."""
    FUNCTIONS[name] = fn


_TYPES = {"tuple": tuple, "list": list, "dict": dict}


# -- writing --------------------------------------------------------------------------
class _Writer:
    def __init__(self):
        self.arrays = []
        self.names = {_f: n for n, _f in FUNCTIONS.items()}

    def array(self, a):
        a = np.asarray(a)
        if a.dtype.kind not in _NUMERIC_KINDS:
            raise ValueError("a tape file holds numeric arrays only; this tape holds an array of dtype %s" % a.dtype)
        name = "a%d" % len(self.arrays)
        self.arrays.append((name, np.ascontiguousarray(a)))
        return name

    def enc(self, v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int) and not isinstance(v, np.integer):
            return v
        if isinstance(v, float):
            return {"f": repr(v)}       # (repr round-trips every float, nan and inf included)
        if isinstance(v, np.ndarray):
            return {"a": self.array(v)}
        if isinstance(v, (np.generic,)):
            return {"s": self.array(np.asarray(v))}
        if isinstance(v, (bytes, bytearray)):
            return {"b": self.array(np.frombuffer(bytes(v), np.uint8))}
        if isinstance(v, np.dtype):
            if v.kind not in _NUMERIC_KINDS:
                raise ValueError("a tape file holds numeric dtypes only, not %s" % v)
            return {"dt": v.str}
        if type(v) is tuple:
            return {"t": [self.enc(o) for o in v]}
        if type(v) is list:
            return [self.enc(o) for o in v]
        if type(v) is dict:
            return {"d": [[self.enc(k), self.enc(o)] for k, o in v.items()]}
        if type(v) is slice:
            return {"sl": [self.enc(v.start), self.enc(v.stop), self.enc(v.step)]}
        if v is Ellipsis:
            return {"el": 0}
        if isinstance(v, type) and v in _TYPES.values():
            return {"ty": v.__name__}
        if isinstance(v, functools.partial) and v.func in self.names:
            return {"fn": self.names[v.func], "args": self.enc(v.args), "kw": self.enc(dict(v.keywords))}
        raise ValueError("this tape cannot be saved to a file: it holds a %s (a tape file holds numbers, arrays, "
                         "tuples, lists and dicts only)" % type(v).__name__)


def save(recording, path, version):
    """Write ``recording`` (a ``Recording``) to ``path``."""
    w = _Writer()
    state = _state_to_save(recording)
    header = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, "tapegrad_version": version,
              "state": w.enc(state)}
    header["arrays"] = [n for n, _ in w.arrays]
    tmp = "%s.tmp%d" % (path, os.getpid())     # (then renamed: a crash never leaves half a file at path)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
            z.writestr(HEADER, json.dumps(header, allow_nan=False))
            for name, a in w.arrays:
                bio = io.BytesIO()
                np.lib.format.write_array(bio, a, allow_pickle=False)
                z.writestr(name + ".npy", bio.getvalue())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


# fields of a recording's state that are rebuilt from the entries on load
_REBUILT = ("buf", "ints", "f0", "f1", "rows", "saved_slots", "source_items")


def _state_to_save(R):
    st = R.__getstate__()
    entries = np.frombuffer(st["buf"], np.int64).reshape(R.n, _tp.NFIELDS).copy()
    used = {OP_NAMES[int(c)] for c in np.unique(entries[:, _tp.OP])}
    if "autograd_function" in used:
        raise ValueError("this tape cannot be saved to a file: it calls a tg.autograd.Function, whose forward and "
                         "backward are Python code (a tape file holds data only)")
    for k in _REBUILT:
        st.pop(k, None)
    st.pop("checked", None)
    # fields a Recording no longer holds, which readers of format 2 expect
    st["constants"] = {}
    st["rg_slots"] = np.flatnonzero(R.rg)
    st["real_leaf"] = {s: src[1] for s, src in R.sources.items()
                       if src[0] == "arg" and R.arg_kinds[src[1]] in ("leaf", "nonleaf")}
    st["entries"] = entries
    # opcodes by name: a table or a host op added in a later release renumbers the ops after it
    st["op_names"] = [[int(c), OP_NAMES[int(c)]] for c in np.unique(entries[:, _tp.OP])]
    return st


# -- reading --------------------------------------------------------------------------
class _Reader:
    def __init__(self, arrays, where):
        self.arrays = arrays
        self.where = where
        self.fns = FUNCTIONS

    def bad(self, what):
        return ValueError("%s: %s" % (self.where, what))

    def dec(self, v):
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, int):
            return v
        if isinstance(v, list):
            return [self.dec(o) for o in v]
        if not isinstance(v, dict) or len(v) not in (1, 3) or (len(v) == 3 and set(v) != {"fn", "args", "kw"}):
            raise self.bad("unexpected value %.60r in the header" % (v,))
        (k, o), = v.items() if len(v) == 1 else [("fn", v["fn"])]
        if k == "f":
            if not isinstance(o, str):
                raise self.bad("a float that is not one: %.60r" % (o,))
            try:
                return float(o)
            except ValueError:
                raise self.bad("a float that is not one: %.60r" % (o,)) from None
        if k in ("a", "s", "b"):
            if not isinstance(o, str) or o not in self.arrays:
                raise self.bad("the header refers to an array %.60r the file does not hold" % (o,))
            a = self.arrays[o]
            if k == "s":
                if a.ndim != 0:
                    raise self.bad("array %s should hold one number" % o)
                return a[()]
            if k == "b":
                if a.dtype != np.uint8 or a.ndim != 1:
                    raise self.bad("array %s should hold bytes" % o)
                return a.tobytes()
            return a
        if k == "dt":
            try:
                dt = np.dtype(o) if isinstance(o, str) else None
            except TypeError:
                dt = None
            if dt is None or dt.kind not in _NUMERIC_KINDS:
                raise self.bad("unexpected dtype %.60r" % (o,))
            return dt
        if k == "t":
            return tuple(self.dec(self.seq(o)))
        if k == "d":
            out = {}
            for kv in self.seq(o):
                if not isinstance(kv, list) or len(kv) != 2:
                    raise self.bad("a malformed dict in the header")
                key = self.dec(kv[0])
                if not isinstance(key, (int, str, tuple)):
                    raise self.bad("a dict key of type %s" % type(key).__name__)
                out[key] = self.dec(kv[1])
            return out
        if k == "sl":
            o = self.seq(o)
            if len(o) != 3 or not all(x is None or type(x) is int for x in o):
                raise self.bad("a malformed slice in the header")
            return slice(*o)
        if k == "el":
            return Ellipsis
        if k == "ty":
            if o not in _TYPES:
                raise self.bad("unexpected type %.60r" % (o,))
            return _TYPES[o]
        if k == "fn":
            fn = self.fns.get(o) if isinstance(o, str) else None
            if fn is None:
                raise self.bad("unknown function %.60r (a tape file refers only to tapegrad's own)" % (o,))
            args, kw = self.dec(v["args"]), self.dec(v["kw"])
            if not isinstance(args, tuple) or not isinstance(kw, dict) or not all(isinstance(x, str) for x in kw):
                raise self.bad("malformed arguments of function %s" % o)
            return functools.partial(fn, *args, **kw)
        raise self.bad("unexpected value %.60r in the header" % (v,))

    def seq(self, o):
        if not isinstance(o, list):
            raise self.bad("a malformed header (%.60r where a list belongs)" % (o,))
        return o


def _read_archive(path):
    where = "tape file %s" % path
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise ValueError("%s cannot be read (%s)" % (where, e)) from None
    if head[:1] == b"\x80" or head[:1] in (b"(", b"c", b"}", b"]"):
        raise ValueError("%s was written by an older tapegrad as a pickle, which is not loaded because "
                         "unpickling a file can run any code; record the function again and save the tape "
                         "with this version (tg.record(fn, *args).save(path))" % where)
    if head != _ZIP_MAGIC:
        raise ValueError("%s is not a tapegrad tape file (not a zip archive)" % where)
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError("%s is truncated or corrupt (%s)" % (where, e)) from None
    with z:
        names = z.namelist()
        if HEADER not in names:
            raise ValueError("%s has no %s: not a tapegrad tape file" % (where, HEADER))
        try:
            info = z.getinfo(HEADER)
            if info.file_size > MAX_HEADER_BYTES:
                raise ValueError("%s: its header is %d bytes" % (where, info.file_size))
            header = json.loads(z.read(HEADER).decode("utf-8"))
        except ValueError as e:
            raise ValueError("%s: its header is not valid JSON (%s)" % (where, e)) from None
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise ValueError("%s is truncated or corrupt (%s)" % (where, e)) from None
        if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
            raise ValueError("%s is not a tapegrad tape file (format %r)"
                             % (where, header.get("format") if isinstance(header, dict) else None))
        v = header.get("format_version")
        if v != FORMAT_VERSION:
            raise ValueError("%s was saved in format %r (by tapegrad %s); this tapegrad reads format %d: record "
                             "the function again and save it with this version"
                             % (where, v, header.get("tapegrad_version"), FORMAT_VERSION))
        listed = header.get("arrays")
        if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
            raise ValueError("%s: its header does not list its arrays" % where)
        expected = {n + ".npy" for n in listed} | {HEADER}
        for n in names:
            if n not in expected:
                raise ValueError("%s holds an unexpected member %r" % (where, n))
        arrays = {}
        for n in listed:
            if n + ".npy" not in names:
                raise ValueError("%s lacks its array %r" % (where, n))
            try:
                with z.open(n + ".npy") as f:
                    _check_declared_size(f, z.getinfo(n + ".npy").file_size, where, n)
                    a = np.lib.format.read_array(f, allow_pickle=False)
            except ValueError as e:
                raise ValueError("%s: array %r cannot be read without pickle (%s)" % (where, n, e)) from None
            except (zipfile.BadZipFile, OSError, EOFError) as e:
                raise ValueError("%s is truncated or corrupt in array %r (%s)" % (where, n, e)) from None
            if a.dtype.kind not in _NUMERIC_KINDS or a.dtype.hasobject:
                raise ValueError("%s: array %r has dtype %s (a tape file holds numeric arrays only)"
                                 % (where, n, a.dtype))
            arrays[n] = a
    return header, arrays, where


def load(path):
    """The ``Recording`` in tape file ``path``."""
    header, arrays, where = _read_archive(path)
    r = _Reader(arrays, where)
    st = r.dec(header.get("state"))
    return _recording_from_state(st, r)


# -- checking a loaded state ------------------------------------------------------------
_FIELDS = {
    "n", "entries", "aux", "shapes", "saved", "nargs", "arg_kinds", "arg_meta", "sources", "constants",
    "guards", "arg_guards", "fn_guards", "live", "out_template", "out_refs", "rg", "real_leaf", "untracked",
    "rg_slots", "out_slots", "one_slots", "scalar", "names",
}
_OPTIONAL = {"shapes_all", "view_links", "op_names", "derived_dtypes", "casts", "arg_views"}
_ARG_KINDS = ("leaf", "nonleaf", "array", "data", "int")
_NUMERIC_DTYPES = {np.dtype(t).str for t in (np.bool_, np.float16, np.float32, np.float64, np.int8, np.int16, np.int32,
                                               np.int64, np.uint8, np.uint16, np.uint32, np.uint64)}


def _check_declared_size(f, member_bytes, where, name):
    """An array's header declares its shape and dtype, and ``read_array`` allocates
    that much before reading: a crafted header must not make the loader allocate more
    than the member holds (``f`` is left at the member's start)."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError("format version %d.%d" % version)
    except ValueError as e:
        raise ValueError("%s: array %r has a malformed header (%s)" % (where, name, e)) from None
    if dtype.hasobject:         # (read_array refuses it without unpickling anything)
        f.seek(0)
        return
    declared = math.prod(shape) * dtype.itemsize
    if declared > member_bytes:
        raise ValueError("%s: array %r declares %d bytes but its member holds %d" % (where, name, declared, member_bytes))
    f.seek(0)


def _renumbered(entries, op_names, bad):
    """``entries`` with each opcode the one this tapegrad gives the op's name (the
    file's ``op_names``: [opcode, name] pairs)."""
    code_of = {name: code for code, name in OP_NAMES.items()}
    if not isinstance(op_names, list):
        raise bad("op_names should be a list of [opcode, name] pairs")
    remap = {}
    for pair in op_names:
        if not (isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int and isinstance(pair[1], str)):
            raise bad("op_names should be a list of [opcode, name] pairs")
        if pair[1] not in code_of:
            raise bad("the tape uses the operation %r, which this version of tapegrad does not have" % pair[1])
        remap[pair[0]] = code_of[pair[1]]
    ops = entries[:, _tp.OP]
    unknown = set(np.unique(ops).tolist()) - set(remap)
    if unknown:
        raise bad("entry opcodes %s are not in op_names" % sorted(unknown))
    if all(a == b for a, b in remap.items()):
        return entries
    entries = entries.copy()
    entries[:, _tp.OP] = [remap[int(c)] for c in ops]
    return entries


def _recording_from_state(st, r):
    bad = r.bad
    if not isinstance(st, dict):
        raise bad("the header holds no recording")
    missing = sorted(_FIELDS - set(st))
    if missing:
        raise bad("the recording lacks %s" % ", ".join(missing))
    extra = sorted(set(st) - _FIELDS - _OPTIONAL, key=str)
    if extra:
        raise bad("the recording has unexpected fields %s" % ", ".join(map(str, extra)))

    def array(name, kind, ndim, length=None):
        a = st[name]
        if not isinstance(a, np.ndarray) or a.dtype.kind not in kind or a.ndim != ndim:
            raise bad("%s should be a %d-d array of kind %r" % (name, ndim, kind))
        if length is not None and a.shape[0] != length:
            raise bad("%s has %d rows; the tape has %d entries" % (name, a.shape[0], length))
        return a

    n = st["n"]
    if type(n) is not int or n < 1:
        raise bad("n = %r is not a number of entries" % (n,))
    entries = array("entries", "i", 2, n)
    if entries.shape[1] != _tp.NFIELDS or entries.dtype != np.int64:
        raise bad("entries has shape %s dtype %s; expected (%d, %d) int64"
                  % (entries.shape, entries.dtype, n, _tp.NFIELDS))
    aux = array("aux", "i", 1).astype(np.int64)
    if "op_names" in st:
        entries = _renumbered(entries, st["op_names"], bad)
        st = dict(st)
        st["entries"] = entries
        del st["op_names"]

    def slot(s, what, allow_none=False):
        if (s is None or s == -1) and allow_none:
            return
        if type(s) not in (int, np.int64) or not 0 <= s < n:
            raise bad("%s refers to slot %r of a tape of %d entries" % (what, s, n))

    def slot_list(v, what):
        if isinstance(v, np.ndarray):
            if v.dtype.kind not in "iu" or v.ndim != 1:
                raise bad("%s should be a list of slots" % what)
            v = v.tolist()
        if not isinstance(v, list):
            raise bad("%s should be a list of slots" % what)
        for s in v:
            slot(s, what)

    def shape(v, what):
        if not isinstance(v, tuple) or not all(type(d) is int and d >= 0 for d in v):
            raise bad("%s is not a shape: %.60r" % (what, v))
        return v

    ints = entries
    for s in range(n):
        row = ints[s]
        code = int(row[_tp.OP])
        if code not in OP_NAMES:
            raise bad("entry %d has an unknown opcode %d" % (s, code))
        size = int(row[_tp.SIZE])
        if size < 0:
            raise bad("entry %d has size %d" % (s, size))
        if code < META_END:
            continue
        for k in (_tp.A, _tp.B):
            if not -1 <= row[k] < s:
                raise bad("entry %d reads slot %d (an entry reads earlier ones only)" % (s, int(row[k])))
        if row[_tp.C] == _sh.VARIADIC:
            at = int(row[_tp.AUX])
            if not 0 <= at < aux.size or not 0 <= aux[at] <= aux.size - at - 1:
                raise bad("entry %d lists its inputs past the end of aux" % s)
            ins = aux[at + 1:at + 1 + int(aux[at])]
            if ins.size and (ins.min() < 0 or ins.max() >= s):
                raise bad("entry %d reads a slot outside the tape's earlier entries" % s)
        elif not -1 <= row[_tp.C] < s:
            raise bad("entry %d reads slot %d (an entry reads earlier ones only)" % (s, int(row[_tp.C])))
    total = int(entries[:, _tp.SIZE].sum(dtype=object))
    if total > MAX_ELEMENTS:
        raise bad("its entries hold %d elements in all (a tape file is refused past %d)" % (total, MAX_ELEMENTS))
    try:    # every index the compiled kernels derive from an entry lies inside its arrays
        check_entries(entries, aux)
    except EntryError as e:
        raise bad(str(e)) from None
    for key in ("derived_dtypes", "casts"):
        dd = st.get(key, {})
        if not isinstance(dd, dict) or not all(
                type(s) is int and 0 <= s < n and isinstance(v, str) and v in _NUMERIC_DTYPES for s, v in dd.items()):
            raise bad("%s should map slots to numeric dtypes" % key)
    shapes = st["shapes"]
    if not isinstance(shapes, dict):
        raise bad("shapes should be a dict")
    for s, sh in shapes.items():
        slot(s, "shapes")
        shape(sh, "the shape of slot %s" % s)
        if math.prod(sh) != ints[s, _tp.SIZE]:
            raise bad("slot %d has shape %s but %d elements" % (s, sh, int(ints[s, _tp.SIZE])))
    for name in ("saved", "rg"):
        array(name, "b", 1, n)
    for name in ("untracked", "rg_slots", "out_slots", "one_slots"):
        slot_list(st[name], name)
    links = st.get("view_links", [])
    if not isinstance(links, (list, tuple)):
        raise bad("view_links should be a list of (view slot, input slot) pairs")
    for link in links:
        if not (isinstance(link, (list, tuple)) and len(link) == 2 and all(type(v) is int for v in link)
                and 0 <= link[1] < link[0] < n):
            raise bad("view_links holds %r; expected (view slot, earlier input slot)" % (link,))
    st["view_links"] = [tuple(link) for link in links]
    nargs = st["nargs"]
    if type(nargs) is not int or nargs < 0:
        raise bad("nargs = %r" % (nargs,))
    kinds, meta = st["arg_kinds"], st["arg_meta"]
    if not isinstance(kinds, list) or len(kinds) != nargs or any(k not in _ARG_KINDS for k in kinds):
        raise bad("arg_kinds should list one kind of %s per argument (%d)" % ("/".join(_ARG_KINDS), nargs))
    if not isinstance(meta, list) or len(meta) != nargs:
        raise bad("arg_meta should describe each of the %d arguments" % nargs)
    for i, m in enumerate(meta):
        if not isinstance(m, tuple) or len(m) != 2 or not isinstance(m[1], np.dtype):
            raise bad("arg_meta of argument %d should be (shape, dtype)" % i)
        shape(m[0], "the shape of argument %d" % i)

    def arg(i, what):
        if type(i) is not int or not 0 <= i < nargs:
            raise bad("%s refers to argument %r of %d" % (what, i, nargs))

    views = st.get("arg_views", ())
    if not isinstance(views, tuple):
        raise bad("arg_views should be a tuple of (argument, shape)")
    for v in views:
        if not isinstance(v, tuple) or len(v) != 2:
            raise bad("arg_views holds %.60r; expected (argument, shape)" % (v,))
        arg(v[0], "arg_views")
        shape(v[1], "arg_views")
        if kinds[v[0]] != "int" or math.prod(v[1]) != math.prod(meta[v[0]][0]):
            raise bad("arg_views reshapes argument %d of shape %s to %s" % (v[0], meta[v[0]][0], v[1]))

    def arg_or_view(i, what):
        """An argument, or one of ``arg_views`` (indices nargs on)."""
        if type(i) is not int or not 0 <= i < nargs + len(views):
            raise bad("%s refers to argument %r of %d" % (what, i, nargs + len(views)))

    def ref(v, what):
        if not isinstance(v, tuple) or not v:
            raise bad("%s is not a reference" % what)
        if v[0] == "slot" and len(v) == 2:
            slot(v[1], what)
        elif v[0] == "arg" and len(v) == 2:
            arg_or_view(v[1], what)
        elif v[0] in ("value", "value_tensor") and len(v) == 2 and isinstance(v[1], np.ndarray):
            pass
        elif v[0] == "derived" and len(v) == 2:
            derived(v[1], what)
        else:
            raise bad("%s is not a reference: %.60r" % (what, v))

    def derived(spec, what):
        if (not isinstance(spec, tuple) or len(spec) != 2 or spec[0] not in _DERIVED_FNS
                or not isinstance(spec[1], list) or not 1 <= len(spec[1]) <= 2):
            raise bad("%s is not a recorded comparison" % what)
        for o in spec[1]:
            ref(o, what)

    sources = st["sources"]
    if not isinstance(sources, dict):
        raise bad("sources should be a dict")
    for s, src in sources.items():
        slot(s, "sources")
        what = "the source of slot %s" % s
        if not isinstance(src, tuple) or len(src) != 2:
            raise bad("%s is malformed" % what)
        if src[0] == "arg":
            arg(src[1], what)
            if tuple(meta[src[1]][0]) != tuple(shapes.get(s, meta[src[1]][0])):
                raise bad("slot %d has shape %s, its argument %s" % (s, shapes.get(s), meta[src[1]][0]))
        elif src[0] == "const":
            if not isinstance(src[1], np.ndarray) or src[1].size != ints[s, _tp.SIZE]:
                raise bad("%s: a constant of another size than its slot" % what)
        elif src[0] == "derived":
            derived(src[1], what)
        else:
            raise bad("%s is of unknown kind %r" % (what, src[0]))
    if not isinstance(st["constants"], dict):
        raise bad("constants should be a dict")
    guards = st["guards"]
    if not isinstance(guards, list):
        raise bad("guards should be a list")
    for g in guards:
        if not isinstance(g, tuple) or len(g) != 3 or not isinstance(g[1], np.ndarray) or not isinstance(g[2], str):
            raise bad("a guard should be (reference, value, where)")
        ref(g[0], "a guard")
    ag = st["arg_guards"]
    if not isinstance(ag, dict):
        raise bad("arg_guards should be a dict")
    for i, g in ag.items():
        arg(i, "arg_guards")
        if not isinstance(g, tuple) or len(g) != 2 or not isinstance(g[0], np.ndarray) or not isinstance(g[1], str):
            raise bad("an argument guard should be (value, where)")
    fg = st["fn_guards"]
    if not isinstance(fg, list):
        raise bad("fn_guards should be a list")
    for g in fg:
        if not isinstance(g, tuple) or len(g) != 4 or not isinstance(g[0], functools.partial):
            raise bad("a label guard should be (function, argument, value, where)")
        arg_or_view(g[1], "a label guard")
    live = st["live"]
    if not isinstance(live, dict):
        raise bad("live should be a dict")
    for s, f in live.items():
        slot(s, "live")
        if not isinstance(f, functools.partial):
            raise bad("the live gather of slot %s is not a gather function" % s)
        if f.func is _live_lin:
            if len(f.args) != 3 or not isinstance(f.args[2], tuple):
                raise bad("the live gather of slot %s is malformed" % s)
            shape(f.args[0], "the live gather of slot %s" % s)
            for p in f.args[2]:
                if not isinstance(p, tuple) or len(p) != 2:
                    raise bad("the live gather of slot %s is malformed" % s)
                arg_or_view(p[1], "the live gather of slot %s" % s)
        elif f.func is _extremum_lin:
            if len(f.args) != 4:
                raise bad("the live gather of slot %s is malformed" % s)
            slot(f.args[0], "the live gather of slot %s" % s)
        elif f.func is _order_lin:
            if len(f.args) != 3 or f.args[1] not in ORDER_LIN or not isinstance(f.args[2], tuple):
                raise bad("the live gather of slot %s is malformed" % s)
            slot(f.args[0], "the live gather of slot %s" % s)
        else:
            raise bad("the live gather of slot %s is not a gather function" % s)
    refs = st["out_refs"]
    if not isinstance(refs, list) or not refs:
        raise bad("out_refs should list the outputs")
    for o in refs:
        ref(o, "an output")
    _check_template(st["out_template"], len(refs), bad)
    rl = st["real_leaf"]
    if not isinstance(rl, dict):
        raise bad("real_leaf should be a dict")
    for s, i in rl.items():
        slot(s, "real_leaf")
        arg(i, "real_leaf")
    names = st["names"]
    if not isinstance(names, list) or len(names) != n or not all(isinstance(x, str) for x in names):
        raise bad("names should list one grad_fn name per entry")
    if st["scalar"] not in (None, True, False):
        raise bad("scalar = %.60r" % (st["scalar"],))
    if "shapes_all" in st:
        sa = st["shapes_all"]
        if not isinstance(sa, list) or len(sa) != n:
            raise bad("shapes_all should give one shape per entry")
        for s, sh in enumerate(sa):
            shape(sh, "shapes_all[%d]" % s)
            if math.prod(sh) != ints[s, _tp.SIZE]:
                raise bad("slot %d has shape %s but %d elements" % (s, sh, int(ints[s, _tp.SIZE])))

    # the entries' bytes, and what the recording derives from them
    st = dict(st)
    entries = np.ascontiguousarray(st.pop("entries"), np.int64)
    st["buf"] = entries.tobytes()
    st["ints"] = entries.copy()
    flts = entries.view(np.float64)
    st["f0"] = flts[:, _tp.F0].copy()
    st["f1"] = flts[:, _tp.F1].copy()
    st["aux"] = aux
    st["rows"] = st["ints"][:, :6].tolist()
    st["source_items"] = sorted(st["sources"].items())
    st["rg"] = np.asarray(st["rg"], bool)
    st["saved"] = np.asarray(st["saved"], bool)
    for k in ("untracked", "rg_slots"):
        st[k] = np.asarray(st[k], np.intp).reshape(-1)
    st["one_slots"] = np.asarray(st["one_slots"], np.intp).reshape(-1)
    st["out_slots"] = [int(s) for s in (st["out_slots"].tolist() if isinstance(st["out_slots"], np.ndarray)
                                        else st["out_slots"])]
    R = object.__new__(Recording)
    R.__setstate__(st)
    return R


def _check_template(tpl, nleaves, bad):
    seen = []

    def walk(t):
        if not isinstance(t, tuple) or not t:
            raise bad("the outputs' structure is malformed")
        kind = t[0]
        if kind == "T" and len(t) == 2 and type(t[1]) is int and 0 <= t[1] < nleaves:
            seen.append(t[1])
        elif kind == "V" and len(t) == 2:
            pass
        elif kind in ("L", "U") and len(t) == 3 and t[1] in (list, tuple) and isinstance(t[2], list):
            for o in t[2]:
                walk(o)
        elif kind == "D" and len(t) == 3 and t[1] is dict and isinstance(t[2], list):
            for kv in t[2]:
                if not isinstance(kv, tuple) or len(kv) != 2:
                    raise bad("the outputs' structure is malformed")
                walk(kv[1])
        else:
            raise bad("the outputs' structure is malformed (%.60r)" % (t,))
    walk(tpl)
