"""Smoke test of ``benchmarks/bench_mlp.py``: a quick run writes sane numbers."""

import importlib.util
import json
from pathlib import Path

BENCH_MLP = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_mlp.py"


def _load_bench_mlp():
    spec = importlib.util.spec_from_file_location("bench_mlp", BENCH_MLP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_mlp_quick_run_writes_json(tmp_path, capsys):
    bench_mlp = _load_bench_mlp()
    path = tmp_path / "r.json"
    bench_mlp.main(["--quick", "--json", str(path)])

    report = json.loads(path.read_text())
    assert report["config"]["epochs"] == 2
    peers = report["datasets"]["digits"]["peers"]
    assert {"sknet", "sklearn"} <= set(peers)
    for peer, result in peers.items():
        assert result["peer"] == peer
        assert result["fit_s"] > 0
        assert result["s_per_epoch"] > 0
        assert result["predict_rows_per_s"] > 0
        assert 0 <= result["test_acc"] <= 1
    assert "sknet fit speed-up over sklearn" in capsys.readouterr().out
