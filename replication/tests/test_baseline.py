"""The plain fine-tune (`python -m replication baseline`): records in the comparison's
format, the schedule it shares with thinc, BIO decoding, and the CLI on a
tiny model and a tiny converted corpus."""
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from spacy.tokens import Doc, DocBin, Span
from spacy.vocab import Vocab
from thinc.api import warmup_linear as thinc_warmup_linear

from replication.baseline import BaselineSettings, run_baseline, warmup_linear, word_labels
from replication.experiments import compare

RECORD_KEYS = {"task", "variant", "seed", "config", "settings", "overrides", "gpu_id", "train_seconds", "metric",
               "score", "scores", "evaluated_on", "model", "curve"}
SENTENCES = [("the cat sat on the mat", 1), ("cat the on sat", 0), ("she saw the dog", 1), ("dog dog the", 0),
             ("he ran and she sat", 1), ("sat sat ran", 0), ("the big dog ran", 1), ("the the a", 0)]


def write_docs(docs, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    DocBin(docs=docs, store_user_data=True).to_disk(path)


def cola_corpus(directory: Path) -> Path:
    vocab = Vocab()
    docs = []
    for text, label in SENTENCES:
        doc = Doc(vocab, words=text.split())
        doc.cats = {"ACCEPTABLE": float(label), "UNACCEPTABLE": float(1 - label)}
        docs.append(doc)
    write_docs(docs, directory / "train.spacy")
    write_docs(docs[:4], directory / "dev.spacy")
    return directory


def ner_corpus(directory: Path) -> Path:
    vocab = Vocab()
    docs = []
    for text, _ in SENTENCES:
        doc = Doc(vocab, words=text.split())
        doc.ents = [Span(doc, 1, 2, label="ANIMAL")] if "cat" in text or "dog" in text else []
        docs.append(doc)
    write_docs(docs, directory / "train.spacy")
    write_docs(docs[:4], directory / "dev.spacy")
    return directory


def fce_corpus(directory: Path) -> Path:
    vocab = Vocab()
    docs = []
    for text, label in SENTENCES:
        words = text.split()
        docs.append(Doc(vocab, words=words, tags=["c" if label else "i" for _ in words]))
    write_docs(docs, directory / "train.spacy")
    write_docs(docs[:4], directory / "dev.spacy")
    return directory


def test_the_schedule_is_thincs_warmup_linear():
    thinc_rates = thinc_warmup_linear(initial_rate=1.0, warmup_steps=4, total_steps=10)
    ours = [warmup_linear(step, 4, 10) for step in range(12)]
    assert ours == pytest.approx(list(itertools.islice(thinc_rates, 12)))
    assert ours[:5] == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0]) and ours[10] == 0.0


def test_word_labels_of_entities_and_tags():
    doc = Doc(Vocab(), words=["the", "big", "cat"], tags=["c", "i", "c"])
    doc.ents = [Span(doc, 1, 3, label="ANIMAL")]
    assert word_labels("conll2003", doc) == ["O", "B-ANIMAL", "I-ANIMAL"]
    assert word_labels("fce", doc) == ["c", "i", "c"]


@pytest.mark.parametrize("task,make_corpus,metric", [
    ("cola", cola_corpus, "cats_mcc"), ("conll2003", ner_corpus, "ents_f"), ("fce", fce_corpus, "ged_f05")])
def test_a_fine_tune_writes_a_record_the_comparison_reads(tiny_bert, tmp_path, task, make_corpus, metric):
    corpus = make_corpus(tmp_path / "corpus")
    settings = BaselineSettings(task=task, transformer=str(tiny_bert), seed=3, max_steps=3, batch_size=4,
                                warmup_steps=1, learn_rate=1e-3, eval_frequency=2)
    record, path = run_baseline(settings, corpus, tmp_path / "results", log=lambda line: None)
    assert path == tmp_path / "results" / task / "plain" / "seed3.json"
    saved = json.loads(path.read_text())
    assert RECORD_KEYS <= set(saved)
    assert (saved["task"], saved["variant"], saved["seed"], saved["metric"]) == (task, "plain", 3, metric)
    assert saved["score"] == record["score"] == saved["scores"][metric] or saved["score"] is None
    assert saved["settings"]["training.max_steps"] == 3 and saved["settings"]["system.seed"] == 3
    assert saved["settings"]["baseline.batch_size"] == 4 and saved["model"] is None
    assert [point["step"] for point in saved["curve"]] == [2, 3]
    rows = compare(tmp_path / "results", tmp_path / "out" / "comparison")
    assert [(row["task"], row["variant"], row["seeds"]) for row in rows] == [(task, "plain", [3])]


def test_the_same_seed_gives_the_same_scores(tiny_bert, tmp_path):
    corpus = cola_corpus(tmp_path / "corpus")
    records = [
        run_baseline(BaselineSettings(task="cola", transformer=str(tiny_bert), seed=1, max_steps=2, batch_size=3,
                                      warmup_steps=1, learn_rate=1e-3), corpus, tmp_path / f"results{i}",
                     log=lambda line: None)[0]
        for i in range(2)
    ]
    assert records[0]["scores"]["cats_accuracy"] == records[1]["scores"]["cats_accuracy"]
    assert records[0]["curve"][-1]["train_loss"] == pytest.approx(records[1]["curve"][-1]["train_loss"])


def test_unknown_settings_are_refused():
    with pytest.raises(ValueError, match="pooling"):
        BaselineSettings(task="cola", transformer="x", pooling="max").validate()
    with pytest.raises(ValueError, match="supports"):
        BaselineSettings(task="ud", transformer="x").validate()


def test_the_baseline_command(tiny_bert, tmp_path):
    corpus = cola_corpus(tmp_path / "corpus")
    command = [sys.executable, "-m", "replication", "baseline", "cola", str(corpus), "--results-dir",
               str(tmp_path / "results"), "--transformer", str(tiny_bert), "--seeds", "0,1", "--max-steps", "2",
               "--batch-size", "4", "--warmup-steps", "1", "--pooling", "cls"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for seed in (0, 1):
        record = json.loads((tmp_path / "results" / "cola" / "plain" / f"seed{seed}.json").read_text())
        assert record["seed"] == seed and record["settings"]["baseline.pooling"] == "cls"
        assert -1.0 <= record["score"] <= 1.0
