"""benchmarks/api_coverage.py: its checker classifies names as the coverage Method says."""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "benchmarks", "api_coverage.py")


@pytest.fixture(scope="module")
def cov():
    spec = importlib.util.spec_from_file_location("api_coverage", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def libs(cov):
    torch = pytest.importorskip("torch")
    old = torch.get_default_dtype()
    yield cov._libs()           # (sets torch's default dtype to float64, as the script runs)
    torch.set_default_dtype(old)


def _entry(cov, name):
    return next(e for e in cov.load_entries() if e["name"] == name and e["section"] == "top150")


def test_data_file_has_the_ranked_names(cov):
    with open(cov.DATA) as f:
        data = json.load(f)
    assert [e["rank"] for e in data["top150"]] == list(range(1, 151))
    assert data["top150"][0]["name"] == "Tensor.to"
    assert data["top150"][149]["name"] == "torch.equal"
    names = [e["name"] for e in data["numeric"]]
    assert len(names) == len(set(names)) == 154
    for e in cov.load_entries():
        assert e.get("checks"), e["name"]
        for c in e["checks"]:
            cov.make_inputs(c.get("inputs", {"x": "randn(3, 4)"}), 0)


def test_every_name_exists_in_torch(cov, libs):
    torch, _ = libs
    absent = [e["name"] for e in cov.load_entries() if not cov.present(torch, e["name"])]
    assert absent == []


def test_known_ok_names(cov, libs):
    for name in ("torch.exp", "Tensor.sum"):
        res = cov.check_entry(_entry(cov, name), libs)
        assert res["status"] == "ok", res
        assert all(c["result"] == "ok" for c in res["checks"])
    res = cov.check_entry(_entry(cov, "torch.exp"), libs)
    assert res["checks"][0]["grads_compared"] == 1


def test_nonexistent_name_is_missing(cov, libs):
    res = cov.check_entry({"name": "torch.no_such_function_anywhere",
                           "checks": [{"src": "torch.no_such_function_anywhere(x)"}]}, libs)
    assert res["status"] == "missing"
    assert res["checks"] == []


@pytest.mark.parametrize("src, why", [
    ("torch.exp(x) if IS_TORCH else torch.exp(x) * (1 + 1e-6)", "values differ"),
    ("torch.exp(x) if IS_TORCH else torch.exp(x.detach()) + (x - x.detach()) * 2", "grad x: differs"),
    ("x.float() if IS_TORCH else x", "dtype torch float32, tapegrad float64"),
    ("x if IS_TORCH else x.reshape(4, 3)", "shape torch (3, 4), tapegrad (4, 3)"),
    ("x * 2 if IS_TORCH else (x * 2).detach()", "requires_grad"),
    ("x.sum() if IS_TORCH else x.sum().item()", "torch gives tensor, tapegrad float"),
    ("m = same_init(nn.Linear(4, 2))\n"
     "out = m(x) if IS_TORCH else m(x) + (m.weight - m.weight.detach()).sum()", "grad param0"),
    ("train(lambda ps: optim.SGD(ps, lr=0.1 if IS_TORCH else 0.1000001))", "values differ"),
])
def test_a_difference_is_wrong(cov, libs, src, why):
    check = {"src": src}
    if "train(" in src:
        check.update(inputs={}, rtol=1e-10)
    res = cov.check_entry({"name": "torch.exp", "checks": [check]}, libs)
    assert res["status"] == "wrong"
    assert why in res["detail"]


def test_rounding_below_tolerance_is_ok(cov, libs):
    res = cov.check_entry({"name": "torch.exp", "checks": [
        {"src": "torch.exp(x) if IS_TORCH else torch.exp(x) * (1 + 1e-9)"}]}, libs)
    assert res["status"] == "ok"


def test_partial_missing_variant_and_check_errors(cov, libs):
    basic = {"src": "torch.exp(x)"}
    refused = {"src": "torch.exp(x) if IS_TORCH else torch.exp(x, bad=1)"}
    res = cov.check_entry({"name": "torch.exp", "checks": [basic, refused]}, libs)
    assert res["status"] == "partial"
    assert "TypeError" in res["detail"]
    # tapegrad raising on the basic call is "wrong"
    res = cov.check_entry({"name": "torch.exp", "checks": [refused, basic]}, libs)
    assert res["status"] == "wrong"
    # a variant that needs another missing name is skipped, not held against the name
    needs = {"src": "torch.exp(x) if IS_TORCH else torch.no_such_helper(x)"}
    res = cov.check_entry({"name": "torch.exp", "checks": [basic, needs]}, libs)
    assert res["status"] == "ok"
    assert res["checks"][1]["result"] == "skipped"
    # torch raising is a mistake in the data file, not a finding
    res = cov.check_entry({"name": "torch.exp", "checks": [{"src": "torch.exp(x, bad=1)"}]}, libs)
    assert res["status"] == "not checked"
    assert res["checks"][0]["result"] == "check error"
    # an expected error must be raised by both
    res = cov.check_entry({"name": "Tensor.item", "checks": [
        {"src": "x.item() if IS_TORCH else x.sum().item()", "raises": True}]}, libs)
    assert res["status"] == "wrong"


def test_summary_and_json(cov, libs, tmp_path):
    out = tmp_path / "cov.json"
    assert cov.main(["--names", "torch.exp,Tensor.sum", "--section", "top150",
                     "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["summary"]["top150"]["ok"] == 2
    assert data["summary"]["top150"]["total"] == 2
    assert [r["name"] for r in data["names"]] == ["Tensor.sum", "torch.exp"]


def test_an_undefined_operator_is_missing(cov, libs):
    # (Tensor.__lshift__ with a float: Python's "unsupported operand" TypeError)
    res = cov.check_entry({"name": "op.@", "checks": [
        {"src": "x @ x.T if IS_TORCH else x << 1.5"}]}, libs)
    assert res["status"] == "missing"
    assert "unsupported operand" in res["detail"]
    res = cov.check_entry({"name": "op.@", "checks": [{"src": "x @ x.T"}]}, libs)
    assert res["status"] == "ok"
