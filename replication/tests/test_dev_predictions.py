"""`python -m replication bootstrap` on small trained pipelines: every model
scored once (its evaluation kept), the variants compared over seeds and over
resampled dev documents."""
import json
from pathlib import Path
from typing import List

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

import replication.functions  # noqa: F401  (registers the sla-replication scorer that the pipelines name)
from replication.cli import app as replication_app
from replication.dev_predictions import bootstrap_comparison
from spacy_sla.tools.ab import runs as ab
from spacy_sla.tools.ab.runs import EVALUATION
from spacy_sla.tools.ab.tables import bootstrap_table

LABELS = ["NEGATIVE", "POSITIVE"]


def write_run(training_dir: Path, variant: str, seed: int, nlp: Language) -> None:
    run_dir = training_dir / variant / f"seed{seed}"
    run_dir.mkdir(parents=True)
    nlp.to_disk(run_dir / "model-last")
    (run_dir / "run.json").write_text(json.dumps({"task": "sst2", "variant": variant, "seed": seed}))


def trained_textcat(examples: List[Example], updates: int, seed: int) -> Language:
    spacy.util.fix_random_seed(seed)
    nlp = spacy.blank("en")
    nlp.add_pipe("textcat", config={
        "model": {"@architectures": "spacy.TextCatBOW.v3", "exclusive_classes": True, "ngram_size": 1, "no_output_layer": False},
        "scorer": {"@scorers": "sla-replication.textcat_scorer.v1"},
    })
    nlp.initialize(lambda: examples)
    for _ in range(updates):
        nlp.update(examples)
    return nlp


def test_bootstrap_command_compares_trained_runs_on_their_dev_documents(tmp_path, monkeypatch):
    vocab_nlp = spacy.blank("en")
    texts = [("a great film", "POSITIVE"), ("a dull film", "NEGATIVE"), ("great acting", "POSITIVE"),
             ("dull and long", "NEGATIVE"), ("great fun", "POSITIVE"), ("long and dull", "NEGATIVE")]
    docs = []
    for text, label in texts:
        doc = vocab_nlp.make_doc(text)
        doc.cats = {name: float(name == label) for name in LABELS}
        docs.append(doc)
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    DocBin(docs=docs, store_user_data=True).to_disk(corpus_dir / "dev.spacy")
    examples = [Example(vocab_nlp.make_doc(doc.text), doc) for doc in docs]
    training_dir = tmp_path / "training"
    models = {}
    for seed in (0, 1):
        for variant, updates in (("vanilla", 0), ("sla", 5)):
            models[variant, seed] = trained_textcat(examples, updates, seed)
            write_run(training_dir, variant, seed, models[variant, seed])
    output = tmp_path / "bootstrap.json"
    result = CliRunner().invoke(replication_app, ["bootstrap", "sst2", str(corpus_dir), str(training_dir), "--variants", "sla",
                                      "--resamples", "500", "--output", str(output)])
    assert result.exit_code == 0, result.output
    comparison = json.loads(output.read_text())
    row = comparison["rows"][0]
    assert row["seeds"] == [0, 1] and row["documents"] == 6 and comparison["metric"] == "cats_accuracy"
    for (variant, seed), model in models.items():  # the per-seed scores are what spaCy's evaluation gives
        fresh = [Example(model.make_doc(doc.text), doc) for doc in docs]
        assert row["scores"][variant][str(seed)] == pytest.approx(model.evaluate(fresh)["cats_accuracy"])
    assert row["over_seeds"]["mean"] == pytest.approx(row["over_documents"]["mean"])
    assert row["over_documents"]["low"] <= row["over_documents"]["mean"] <= row["over_documents"]["high"]
    assert "| sla − vanilla | 2 |" in result.output and "| sla − vanilla | 2 |" in bootstrap_table(comparison)
    assert (training_dir / "sla" / "seed0" / EVALUATION).exists()

    # a second comparison reads the kept evaluations instead of running the models
    def no_model(*args, **kwargs):
        raise AssertionError("a model was evaluated although its evaluation was kept")

    monkeypatch.setattr(ab, "run_command", no_model)
    again = bootstrap_comparison("sst2", corpus_dir, training_dir, ["sla"], "vanilla", resamples=500)
    assert {name: {str(seed): score for seed, score in scores.items()} for name, scores in again["rows"][0]["scores"].items()} == row["scores"]


def test_a_missing_run_is_a_coded_error(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "training").mkdir()
    failed = CliRunner().invoke(replication_app, ["bootstrap", "sst2", str(tmp_path / "corpus"), str(tmp_path / "training"), "--seeds", "3"])
    assert failed.exit_code == 1 and "[SLA-REPLICATION-E020]" in failed.output and "Traceback" not in failed.output
    with pytest.raises(ValueError, match=r"\[SLA-REPLICATION-E020\].*vanilla, seed 3"):
        bootstrap_comparison("sst2", tmp_path / "corpus", tmp_path / "training", ["sla"], "vanilla", seeds=[3])
