"""Writes tests/data/dtype_promotion.json: PyTorch's result (dtypes and values, or
the error's type) for every case of tests/dtype_cases.py, with PyTorch's default
dtype set to float64 (tapegrad's).  Run it again when a case is added:

    python tests/data/make_dtype_table.py
"""
import json
import os
import sys
import warnings

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import dtype_cases  # noqa: E402

TABLE = os.path.join(HERE, "dtype_promotion.json")


def main():
    torch.set_default_dtype(torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # (var of one element: "degrees of freedom is <= 0")
        table = {key: dtype_cases.outcome(torch, fn) for key, _, fn in dtype_cases.cases()}
    with open(TABLE, "w") as f:         # one line per case, so that a change reads as a diff
        f.write('{"torch": %s, "cases": {\n' % json.dumps(torch.__version__.split("+")[0]))
        f.write(",\n".join("%s: %s" % (json.dumps(k), json.dumps(table[k])) for k in sorted(table)))
        f.write("\n}}\n")
    print("%d cases written to %s" % (len(table), TABLE))


if __name__ == "__main__":
    main()
