"""The prepared GPU benchmark (python -m benchmarks.encoder_benchmark), run tiny: on the
CPU for its bookkeeping, on a GPU (marked gpu) as it runs there."""
import pytest

from benchmarks.encoder_benchmark import VARIANTS, format_report, main

TINY = ["--layers", "2", "--hidden", "32", "--heads", "4", "--pieces", "12", "--batch-size", "3", "--repeats", "1"]


def test_tiny_run_on_the_cpu_reports_every_variant():
    report = main(TINY + ["--device", "cpu"])
    assert set(report["variants"]) == set(VARIANTS)
    assert set(report["ratios"]) == {"sla", "sla-two-sdpa"}
    assert all(values["predict_seconds"] > 0 and values["train_seconds"] > 0 for values in report["variants"].values())
    assert report["variants"]["sla"]["peak_memory_mib"] is None  # RSS is not per variant in one process
    assert "| sla | " in format_report(report)


@pytest.mark.gpu
def test_tiny_run_on_the_gpu_measures_peak_memory(tmp_path):
    output = tmp_path / "gpu.json"
    report = main(TINY + ["--device", "cuda", "--output", str(output)])
    assert output.exists()
    assert report["mixed_precision"] is True
    for variant in VARIANTS:
        assert report["variants"][variant]["peak_memory_mib"] > 0
    assert report["ratios"]["sla"]["peak_memory"] > 0
