"""The evaluation of one trained pipeline on a dev set: `spacy evaluate`'s
scores, and for every score a per-document statistic that gives the
scorer's value on the whole set (or the score recomputed on every draw)."""
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import DocBin
from spacy.training import Example

from spacy_sla.tools.ab.evaluation import EVALUATION_VERSION, evaluate_model, numeric_scores, scorer_kwargs
from spacy_sla.tools.ab.statistics import full_set_value, statistic_from_json

LABELS = ["NEGATIVE", "POSITIVE"]
TEXTS = [("a great film", "POSITIVE"), ("a dull film", "NEGATIVE"), ("great acting", "POSITIVE"),
         ("dull and long", "NEGATIVE"), ("great fun", "POSITIVE"), ("long and dull", "NEGATIVE")]


def labelled_docs(nlp: Language):
    docs = []
    for text, label in TEXTS:
        doc = nlp.make_doc(text)
        doc.cats = {name: float(name == label) for name in LABELS}
        docs.append(doc)
    return docs


def trained_textcat() -> Language:
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("en")
    nlp.add_pipe("textcat", config={"model": {"@architectures": "spacy.TextCatBOW.v3", "exclusive_classes": True,
                                              "ngram_size": 1, "no_output_layer": False}})
    examples = [Example(nlp.make_doc(doc.text), doc) for doc in labelled_docs(nlp)]
    nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples)
    return nlp


def test_only_numbers_are_scores():
    assert numeric_scores({"ents_f": 0.5, "tag_acc": 1, "ents_per_type": {"PER": {}}, "cats_score": None,
                           "flag": True, "speed": 1200.5}) == {"ents_f": 0.5, "tag_acc": 1.0, "speed": 1200.5}


def test_the_scorer_gets_the_components_settings_and_labels():
    nlp = trained_textcat()
    kwargs = scorer_kwargs(nlp.get_pipe("textcat"))
    assert kwargs["labels"] == tuple(LABELS) and kwargs["threshold"] == 0.0
    assert scorer_kwargs(object()) == {}


def test_the_evaluation_has_spacy_evaluates_scores_and_their_statistics(tmp_path):
    nlp = trained_textcat()
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=labelled_docs(nlp), store_user_data=True).to_disk(tmp_path / "dev.spacy")
    evaluation = evaluate_model(tmp_path / "model", tmp_path / "dev.spacy", resamples=20)
    expected = nlp.evaluate(list(spacy.training.Corpus(str(tmp_path / "dev.spacy"))(nlp)))
    assert evaluation["version"] == EVALUATION_VERSION and evaluation["documents"] == 6 and evaluation["words"] == 16
    for key in ("cats_score", "cats_macro_f", "cats_macro_auc"):
        assert evaluation["scores"][key] == pytest.approx(expected[key]), key
    statistics = evaluation["statistics"]
    assert {"cats_score", "cats_macro_f", "cats_macro_auc", "cats_micro_f"} <= set(statistics)
    for key, entry in statistics.items():
        assert entry["component"] == "textcat"
        if entry["method"] == "recomputed":
            assert len(entry["draws"]) == 20 and entry["value"] == pytest.approx(expected[key])
        else:
            assert full_set_value(statistic_from_json(entry["statistic"])) == pytest.approx(expected[key]), key


def test_an_empty_dev_set_is_refused(tmp_path):
    nlp = trained_textcat()
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[]).to_disk(tmp_path / "dev.spacy")
    with pytest.raises(ValueError, match=r"\[SLA-E031\]"):
        evaluate_model(tmp_path / "model", tmp_path / "dev.spacy")


@spacy.util.registry.readers("test.first_examples.v1")
def first_examples(file: str, n: int):
    """A reader of the user's own: the first n examples of a .spacy file, under another setting name than path."""
    corpus = spacy.training.Corpus(file)
    return lambda nlp: list(corpus(nlp))[:n]


def test_the_dev_set_is_read_by_the_configs_dev_corpus_or_by_a_plain_corpus(tmp_path):
    nlp = trained_textcat()
    nlp.to_disk(tmp_path / "model")
    config = spacy.util.load_config(tmp_path / "model" / "config.cfg", interpolate=False)
    config["corpora"]["dev"] = {"@readers": "test.first_examples.v1", "file": "${paths.dev}", "n": 2}
    config.to_disk(tmp_path / "model" / "config.cfg")
    DocBin(docs=labelled_docs(nlp), store_user_data=True).to_disk(tmp_path / "dev.spacy")
    evaluation = evaluate_model(tmp_path / "model", tmp_path / "dev.spacy", resamples=20)
    assert evaluation["corpus"] == {"mode": "config", "dev_corpus": "corpora.dev", "reader": "test.first_examples.v1"}
    assert evaluation["documents"] == 2
    two = nlp.evaluate(list(spacy.training.Corpus(str(tmp_path / "dev.spacy"))(nlp))[:2])
    assert evaluation["scores"]["cats_macro_f"] == pytest.approx(two["cats_macro_f"])
    plain = evaluate_model(tmp_path / "model", tmp_path / "dev.spacy", resamples=20, corpus="plain")
    assert plain["documents"] == 6 and plain["corpus"]["mode"] == "plain"
    assert plain["corpus"]["reader"] == "test.first_examples.v1"  # what training read, named in the report
