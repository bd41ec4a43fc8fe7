"""The prepared GPU benchmark (python -m performance.encoder_cost), run tiny: on the
CPU for its bookkeeping, on a GPU (marked gpu) as it runs there."""
import math

import pytest

from performance.encoder_cost import FAMILY_NAMES, MODEL_TYPES, VARIANTS, format_report, main

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


FAMILY_TINY = ["--layers", "2", "--hidden", "32", "--heads", "4", "--pieces", "12", "--batch-size", "2", "--repeats", "1"]


@pytest.mark.parametrize("model_type", sorted(MODEL_TYPES))
def test_every_family_runs_tiny_on_the_cpu_with_positive_finite_ratios(model_type):
    report = main(FAMILY_TINY + ["--device", "cpu", "--no-mixed-precision", "--model-type", model_type])
    assert report["model"]["family"] == model_type if model_type != "bert" else "family" not in report["model"]
    measured = set(report["variants"])
    assert "vanilla" in measured and "sla" in measured
    assert measured | set(report.get("not_applicable", {})) == set(VARIANTS)
    assert set(report["ratios"]) == measured - {"vanilla"}
    for ratio in report["ratios"].values():
        assert all(math.isfinite(ratio[key]) and ratio[key] > 0 for key in ("predict", "train"))
    text = format_report(report)
    assert "| vanilla | " in text and "| sla | " in text
    if model_type != "bert":
        assert FAMILY_NAMES[model_type] in text and report["model"]["vanilla_attention"] in ("sdpa", "eager")


def test_bert_report_keeps_its_keys_and_heading():
    report = main(FAMILY_TINY + ["--device", "cpu"])
    assert set(report["model"]) == {"layers", "hidden", "heads", "weights"}
    assert "not_applicable" not in report
    assert "; BERT encoder with random weights (2 layers" in format_report(report)


@pytest.mark.slow  # a fresh process per variant (about 20 s)
def test_cpu_memory_is_a_fresh_process_per_variant():
    report = main(FAMILY_TINY + ["--device", "cpu", "--cpu-memory", "--model-type", "distilbert"])
    for values in report["variants"].values():
        assert values["peak_memory_mib"] > 0 and values["step_memory_mib"] > 0
    for ratio in report["ratios"].values():
        assert math.isfinite(ratio["peak_memory"]) and ratio["peak_memory"] > 0
        assert math.isfinite(ratio["step_memory"]) and ratio["step_memory"] > 0
    assert "peak RSS of a fresh process" in format_report(report)


def test_a_variant_that_fails_on_a_family_is_reported_not_applicable(monkeypatch):
    import performance.encoder_cost as benchmark

    built = benchmark.encoder

    def failing(variant, *args, **kwargs):
        if variant == "sla-two-sdpa":
            raise ValueError("no such path")
        return built(variant, *args, **kwargs)

    monkeypatch.setattr(benchmark, "encoder", failing)
    report = main(FAMILY_TINY + ["--device", "cpu", "--model-type", "albert"])
    assert report["not_applicable"] == {"sla-two-sdpa": "ValueError: no such path"}
    assert set(report["ratios"]) == {"sla"}
    assert "| sla-two-sdpa | not applicable to albert: ValueError: no such path |" in format_report(report)


def test_unsupported_position_embeddings_are_refused_with_the_coded_error(monkeypatch):
    from performance.encoder_cost import family_config

    monkeypatch.setitem(MODEL_TYPES, "bert-rotary", ("bert", {"position_embedding_type": "rotary"}))
    with pytest.raises(ValueError, match="SLA-E009"):
        family_config("bert-rotary", 2, 32, 4)
