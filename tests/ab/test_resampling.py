"""The bootstrap over dev documents: the paired resampling of per-document
counts, and `spacy sla bootstrap` on small trained pipelines."""
import json
from pathlib import Path
from typing import List, Sequence

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.training import Example
from typer.testing import CliRunner

import spacy_sla.cli  # noqa: F401  (registers `sla` on spaCy's app)
from replication.cli import app as replication_app
from replication.dev_predictions import bootstrap_comparison
from spacy_sla.ab import runs as ab
from spacy_sla.ab.resampling import DrawValues, bootstrap_interval
from spacy_sla.ab.runs import EVALUATION
from spacy_sla.ab.statistics import CountStatistic, full_set_value
from spacy_sla.ab.tables import bootstrap_table

LABELS = ["NEGATIVE", "POSITIVE"]



def accuracy_counts(correct: Sequence[bool]) -> numpy.ndarray:
    """Per-document 2 x 2 confusion cells of a binary classifier whose gold
    class is always POSITIVE."""
    return numpy.array([[0, 0, 0, 1] if right else [0, 0, 1, 0] for right in correct], dtype=numpy.int64)


def evaluation(counts: numpy.ndarray) -> dict:
    """A model's dev evaluation as dev_evaluation writes it, with accuracy's statistic alone."""
    return {"documents": len(counts), "statistics": {
        "cats_accuracy": {"method": "counts", "statistic": CountStatistic("confusion_accuracy", counts).to_json()}}}


def paired_bootstrap(variant: dict, reference: dict, resamples: int, random_seed: int = 0) -> dict:
    models = {**{("variant", seed): evaluation(counts) for seed, counts in variant.items()},
              **{("reference", seed): evaluation(counts) for seed, counts in reference.items()}}
    draws = DrawValues(models, resamples, random_seed)
    seeds = sorted(variant)
    observed = numpy.mean([full_set_value(CountStatistic("confusion_accuracy", variant[seed]))
                           - full_set_value(CountStatistic("confusion_accuracy", reference[seed])) for seed in seeds])
    return bootstrap_interval(draws.difference("variant", "reference", seeds, "cats_accuracy"), observed, resamples)


def test_identical_models_differ_by_nothing_in_every_draw():
    counts = accuracy_counts([True, False, True, True])
    result = paired_bootstrap({0: counts, 1: counts}, {0: counts, 1: counts}, resamples=200)
    assert result["mean"] == 0 and result["low"] == 0 and result["high"] == 0
    assert result["p_value"] == 1.0 and result["verdict"] == "not shown"


def test_the_bootstrap_interval_matches_the_normal_approximation():
    # 400 documents; the variant is right on 40 more of them than the reference, wrong on none more:
    # the per-document differences are Bernoulli(0.1), so the mean's sd is sqrt(0.1 * 0.9 / 400) = 0.015.
    reference = accuracy_counts([False] * 40 + [True] * 360)
    variant = accuracy_counts([True] * 400)
    result = paired_bootstrap({0: variant}, {0: reference}, resamples=4000, random_seed=1)
    assert result["mean"] == pytest.approx(0.1)
    assert result["low"] == pytest.approx(0.1 - 1.96 * 0.015, abs=0.004)
    assert result["high"] == pytest.approx(0.1 + 1.96 * 0.015, abs=0.004)
    assert result["verdict"] == "better" and result["p_value"] == 0.0
    reversed_result = paired_bootstrap({0: reference}, {0: variant}, resamples=4000, random_seed=1)
    assert reversed_result["verdict"] == "worse" and reversed_result["high"] == pytest.approx(-result["low"])


def test_seeds_share_each_draw_of_the_documents():
    # seed 0: the variant gains on document 0, seed 1: it loses on document 0. With a shared draw the
    # mean over seeds is 0 in every draw; independent draws would scatter it.
    right, wrong = accuracy_counts([True, True, True]), accuracy_counts([False, True, True])
    result = paired_bootstrap({0: right, 1: wrong}, {0: wrong, 1: right}, resamples=300)
    assert result["low"] == result["high"] == 0


def test_models_scored_on_different_documents_are_refused():
    with pytest.raises(ValueError, match="different numbers of documents"):
        paired_bootstrap({0: accuracy_counts([True])}, {0: accuracy_counts([True, False])}, resamples=10)


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
        "scorer": {"@scorers": "spacy-sla.textcat_scorer.v1"},
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
    assert failed.exit_code == 1 and "[SLA-E020]" in failed.output and "Traceback" not in failed.output
    with pytest.raises(ValueError, match=r"\[SLA-E020\].*vanilla, seed 3"):
        bootstrap_comparison("sst2", tmp_path / "corpus", tmp_path / "training", ["sla"], "vanilla", seeds=[3])
