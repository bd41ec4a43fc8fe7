"""Per-document statistics of spaCy's scores (spacy_sla/tools/ab/statistics.py, spacy_sla/tools/ab/counts.py):
on hand-built predictions, every statistic gives on the full set exactly the
score the scorer reports, and on a draw the score of the drawn documents."""
import random

import numpy
import pytest
from spacy.pipeline.dep_parser import parser_score
from spacy.pipeline.lemmatizer import lemmatizer_score
from spacy.pipeline.morphologizer import morphologizer_score
from spacy.pipeline.ner import ner_score
from spacy.pipeline.senter import senter_score
from spacy.pipeline.spancat import spancat_score
from spacy.pipeline.tagger import tagger_score
from spacy.pipeline.textcat import textcat_score
from spacy.pipeline.textcat_multilabel import textcat_multilabel_score
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_sla.tools.ab.counts import component_statistics
from spacy_sla.tools.ab.statistics import (
    AucStatistic,
    CountStatistic,
    bootstrap_weights,
    full_set_value,
    statistic_from_json,
)

from util import english_vocab

WORDS = "the cat saw a dog in the big park near Paris and Berlin .".split()
TAGS = ["DT", "NN", "VBD", "DT", "NN", "IN", "DT", "JJ", "NN", "IN", "NNP", "CC", "NNP", "."]
POS = ["DET", "NOUN", "VERB", "DET", "NOUN", "ADP", "DET", "ADJ", "NOUN", "ADP", "PROPN", "CCONJ", "PROPN", "PUNCT"]
MORPHS = ["Definite=Def", "Number=Sing", "Tense=Past|VerbForm=Fin", "Definite=Ind", "Number=Sing", "",
          "Definite=Def", "Degree=Pos", "Number=Sing", "", "Number=Sing", "", "Number=Sing", "PunctType=Peri"]
HEADS = [1, 2, 2, 4, 2, 2, 8, 8, 5, 8, 9, 10, 10, 2]
DEPS = ["det", "nsubj", "ROOT", "det", "dobj", "prep", "det", "amod", "pobj", "prep", "pobj", "cc", "conj", "punct"]


def _gold(rng: random.Random, n_words: int, with_missing: bool) -> Doc:
    words = WORDS[:n_words]
    heads = [head if head < n_words else 2 for head in HEADS[:n_words]]  # a tree for any length >= 3
    deps = DEPS[:n_words]
    tags = list(TAGS[:n_words])
    if with_missing and rng.random() < 0.3:
        tags[rng.randrange(n_words)] = ""  # a token without a gold tag
    doc = Doc(english_vocab(), words=words, tags=tags, pos=POS[:n_words], morphs=MORPHS[:n_words],
              lemmas=[word.lower() for word in words], heads=heads, deps=deps)
    entities = [(10, 11, "LOC"), (12, 13, "LOC"), (0, 2, "MISC")]
    doc.ents = [Span(doc, start, end, label) for start, end, label in entities if end <= n_words][:2]
    doc.spans["sc"] = [Span(doc, 1, 2, "ANIMAL"), Span(doc, 4, 5, "ANIMAL"), Span(doc, 3, 5, "NP")][: 1 + n_words % 3]
    positive = rng.random() < 0.4
    doc.cats = {"POS": float(positive), "NEG": float(not positive)}
    return doc


def _predicted(rng: random.Random, gold: Doc) -> Doc:
    """A noisy copy of the gold annotation: each value kept or replaced at random."""
    n = len(gold)

    def noisy(values, choices):
        return [value if rng.random() < 0.75 else rng.choice(choices) for value in values]

    heads = [token.head.i if rng.random() < 0.8 else rng.randrange(n) for token in gold]
    values = {
        "words": [token.text for token in gold],
        "spaces": [bool(token.whitespace_) for token in gold],
        "tags": noisy([t.tag_ for t in gold], TAGS),
        "pos": noisy([t.pos_ for t in gold], POS),
        "morphs": noisy([str(t.morph) for t in gold], MORPHS),
        "lemmas": noisy([t.lemma_ for t in gold], ["x", "y"]),
        "deps": noisy([token.dep_ for token in gold], ["det", "nsubj", "amod", "punct", "dep"]),
    }
    if rng.random() < 0.3:  # another tokenization: a word split in two, so that alignment matters
        k = rng.choice([i for i, word in enumerate(values["words"]) if len(word) >= 3])
        word = values["words"][k]
        for name, column in values.items():
            column.insert(k + 1, column[k])
        values["words"][k:k + 2] = [word[:1], word[1:]]
        values["spaces"][k] = False
        heads = [head + (head > k) for head in heads]
        heads.insert(k + 1, k)
        n += 1
    doc = Doc(gold.vocab, heads=heads, **values)
    spans = [Span(doc, i, i + rng.randint(1, 2), rng.choice(["LOC", "MISC", "PER"]))
             for i in sorted(rng.sample(range(n - 1), min(2, n - 1)))]
    doc.ents = [span for i, span in enumerate(spans) if i == 0 or span.start >= spans[i - 1].end]
    doc.spans["sc"] = [Span(doc, i, i + 1, rng.choice(["ANIMAL", "NP"])) for i in range(n) if rng.random() < 0.3]
    score = rng.random()
    doc.cats = {"POS": score, "NEG": 1 - score} if rng.random() < 0.9 else {"POS": 0.5, "NEG": 0.5}
    return doc


def make_examples(n_docs: int = 40, seed: int = 0, with_missing: bool = True):
    rng = random.Random(seed)
    examples = []
    for _ in range(n_docs):
        gold = _gold(rng, rng.randint(6, len(WORDS)), with_missing)
        examples.append(Example(_predicted(rng, gold), gold))
    return examples


CASES = [
    # (scorer name in a config, spaCy's scoring function, the kwargs Pipe.score passes)
    ("spacy.tagger_scorer.v1", tagger_score, {}),
    ("spacy.lemmatizer_scorer.v1", lemmatizer_score, {}),
    ("spacy.morphologizer_scorer.v1", morphologizer_score, {}),
    ("spacy.senter_scorer.v1", senter_score, {}),
    ("spacy.parser_scorer.v1", parser_score, {}),
    ("spacy.ner_scorer.v1", ner_score, {}),
    ("spacy.spancat_scorer.v1", spancat_score, {"spans_key": "sc", "threshold": 0.5}),
    ("spacy.textcat_scorer.v2", textcat_score, {"labels": ["NEG", "POS"], "threshold": 0.0, "positive_label": None}),
    ("spacy.textcat_scorer.v2", textcat_score, {"labels": ["NEG", "POS"], "threshold": 0.0, "positive_label": "POS"}),
    ("spacy.textcat_multilabel_scorer.v2", textcat_multilabel_score, {"labels": ["NEG", "POS"], "threshold": 0.5}),
]


def _numeric(scores):
    return {key: value for key, value in scores.items() if isinstance(value, float)}


@pytest.mark.parametrize("scorer_name,score,kwargs", CASES)
def test_statistics_give_the_scorers_full_set_values(scorer_name, score, kwargs):
    examples = make_examples()
    reported = _numeric(score(examples, **kwargs))
    statistics = component_statistics({"@scorers": scorer_name}, examples, kwargs)
    assert set(reported) <= set(statistics), set(reported) - set(statistics)
    for key, value in reported.items():
        assert full_set_value(statistics[key]) == pytest.approx(value, abs=1e-12), key
        # the same after a round trip through the evaluation file's JSON
        assert full_set_value(statistic_from_json(statistics[key].to_json())) == pytest.approx(value, abs=1e-12)


@pytest.mark.parametrize("scorer_name,score,kwargs", CASES)
def test_a_draw_gives_the_score_of_the_drawn_documents(scorer_name, score, kwargs):
    """Both kinds, counts and AUC: a draw's value equals the scorer run on
    the documents of that draw, each repeated as often as drawn."""
    examples = make_examples(30, seed=3)
    statistics = component_statistics({"@scorers": scorer_name}, examples, kwargs)
    weights = bootstrap_weights(len(examples), 4, random_seed=7)
    for draw in weights:
        drawn = [examples[i] for i in numpy.repeat(numpy.arange(len(examples)), draw)]
        expected = _numeric(score(drawn, **kwargs))
        for key, value in expected.items():
            assert statistics[key].values(draw[None, :])[0] == pytest.approx(value, abs=1e-12), key


def test_the_counts_by_hand():
    """A two-document NER set counted by hand: doc 1 has gold LOC(0,1) and
    predicted LOC(0,1) (tp); doc 2 gold PER(1,2), predicted LOC(1,2) (fp and
    fn). Full set P = R = F = 1/2; doc 2 drawn twice and doc 1 never: 0."""
    vocab = english_vocab()
    examples = []
    for gold_ent, pred_ent in [((0, 1, "LOC"), (0, 1, "LOC")), ((1, 2, "PER"), (1, 2, "LOC"))]:
        gold, predicted = (Doc(vocab, words=["Ann", "met", "Bo"]) for _ in range(2))
        gold.ents = [Span(gold, *gold_ent)]
        predicted.ents = [Span(predicted, *pred_ent)]
        examples.append(Example(predicted, gold))
    statistics = component_statistics({"@scorers": "spacy.ner_scorer.v1"}, examples, {})
    assert statistics["ents_f"].counts.tolist() == [[1, 0, 0], [0, 1, 1]]
    assert full_set_value(statistics["ents_f"]) == pytest.approx(0.5)
    assert statistics["ents_f"].values(numpy.array([[0, 2]]))[0] == 0.0


def test_auc_counts_ties_half():
    """Two positives (scores 0.9, 0.5) and two negatives (0.5, 0.1): of the
    four positive-negative pairs three are ordered right and one is tied,
    AUC = 3.5 / 4; with one label of two, the macro AUC halves it."""
    scores = numpy.array([[0.9], [0.5], [0.5], [0.1]])
    golds = numpy.array([[1.0], [1.0], [0.0], [0.0]])
    assert AucStatistic(scores, golds).values(numpy.ones((1, 4)))[0] == pytest.approx(3.5 / 4)
    two_labels = AucStatistic(numpy.hstack([scores, scores]), numpy.hstack([golds, numpy.full((4, 1), numpy.nan)]))
    assert two_labels.values(numpy.ones((1, 4)))[0] == pytest.approx(3.5 / 8)


def test_undefined_prf_is_nan_as_spacy_reports_none():
    statistic = CountStatistic("f1", numpy.array([[0, 0, 0], [1, 0, 1]]))
    assert full_set_value(statistic) == pytest.approx(2 / 3)
    assert numpy.isnan(statistic.values(numpy.array([[3, 0]]))[0])


def test_draws_are_the_same_in_every_process():
    assert (bootstrap_weights(50, 3, 11) == bootstrap_weights(50, 3, 11)).all()
    assert bootstrap_weights(50, 3, 11).sum(axis=1).tolist() == [50, 50, 50]
