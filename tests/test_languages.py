"""SLA pipelines for languages other than English: a parser trained here on a
few hand-made Docs of German or Chinese is sourced before an sla_transformer,
and its parse gives the local masks."""
import re
from pathlib import Path
from typing import Dict, List, Tuple

import numpy
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from spacy.util import fix_random_seed

from spacy_sla.syntax.punctuation import PunctRule, default_punct_rule, is_authors_punctuation
from spacy_sla.tools.inspection.mask_views import token_mask

from reference import slow_syntax_mask
from tiny_models import save_tiny_model
from util import trf_output

# (words, heads, deps) of each training sentence; the parser learns them by heart
Sentence = Tuple[List[str], List[int], List[str]]
SUBJECT_VERB_OBJECT = [1, 2, 2, 4, 2, 2]
DEPS = ["det", "nsubj", "ROOT", "det", "obj", "punct"]
SENTENCES: Dict[str, List[Sentence]] = {
    "de": [
        ("der Hund sah die Katze .".split(), SUBJECT_VERB_OBJECT, DEPS),
        ("die Katze sah den Hund .".split(), SUBJECT_VERB_OBJECT, DEPS),
    ],
    # spacy.blank("zh") splits into characters (its default segmenter)
    "zh": [
        (list("这猫看那狗。"), SUBJECT_VERB_OBJECT, DEPS),
        (list("那狗看这猫！"), SUBJECT_VERB_OBJECT, DEPS),
    ],
}
# every word a single wordpiece of the tiny model (BERT lower-cases and splits CJK characters)
PIECES = ["der", "die", "den", "hund", "sah", "katze", *"这那猫狗看。！"]
THRESHOLD = 1
N_STEPS = 30


def train_parser(lang: str, path: Path) -> Path:
    """A parser for `lang` trained on SENTENCES[lang], saved to path."""
    fix_random_seed(0)
    nlp = spacy.blank(lang)
    nlp.add_pipe("parser", config={"min_action_freq": 1})
    examples = [Example(nlp.make_doc(text_of(lang, words)), doc_of(nlp, words, heads, deps))
                for words, heads, deps in SENTENCES[lang]]
    assert all([t.text for t in example.predicted] == [t.text for t in example.reference] for example in examples)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(N_STEPS):
        nlp.update(examples, sgd=optimizer)
    nlp.to_disk(path)
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return save_tiny_model(tmp_path_factory.mktemp("tiny-bert-de-zh"), extra_pieces=PIECES)


@pytest.fixture(scope="module", params=["de", "zh"])
def lang_and_parser(request, tmp_path_factory) -> Tuple[str, Path]:
    lang = request.param
    return lang, train_parser(lang, tmp_path_factory.mktemp(f"parser-{lang}") / "pipeline")


def sla_pipeline(lang: str, parser: Path, model: Path, punct_rule: PunctRule) -> Language:
    nlp = spacy.blank(lang)
    nlp.add_pipe("parser", source=spacy.load(parser))
    mask = {"@misc": "spacy-sla.syntax_mask.v1", "threshold": THRESHOLD, "punct_rule": punct_rule.value}
    nlp.add_pipe("sla_transformer", config={"model": {"name": str(model), "mask": mask}})
    nlp.get_pipe("sla_transformer").initialize(lambda: [], nlp=nlp)
    return nlp


def text_of(lang: str, words: List[str]) -> str:
    return "".join(words) if lang == "zh" else " ".join(words)


def doc_of(nlp: Language, words: List[str], heads: List[int], deps: List[str]) -> Doc:
    """A hand-parsed Doc, spaced as the language's tokenizer spaces it."""
    spaces = [token.whitespace_ != "" for token in nlp.make_doc(text_of(nlp.lang, words))]
    return Doc(nlp.vocab, words=words, spaces=spaces, heads=heads, deps=deps)


def test_the_default_punctuation_rules_of_the_two_languages():
    assert default_punct_rule("de") is PunctRule.AUTHORS and default_punct_rule("zh") is PunctRule.SPACY


def test_the_sourced_parser_gives_the_masks(lang_and_parser, tiny_model):
    lang, parser = lang_and_parser
    punct_rule = default_punct_rule(lang)
    nlp = sla_pipeline(lang, parser, tiny_model, punct_rule)
    words, heads, deps = SENTENCES[lang][0]
    doc = nlp(text_of(lang, words))
    assert doc.lang_ == lang and [t.text for t in doc] == words
    # the parser learned its sentences, and the transformer ran after it
    assert [t.head.i for t in doc] == heads and [t.dep_ for t in doc] == deps
    model = nlp.get_pipe("sla_transformer").model
    expected = slow_syntax_mask(doc, 0, len(doc), THRESHOLD, punct_visible=punct_rule is PunctRule.SPACY)
    numpy.testing.assert_array_equal(token_mask(doc, model).matrix, expected)
    # one wordpiece per word between [CLS] and [SEP], which see and are seen by every piece
    (pieces,) = model.tokenize([doc[:]])[0].strings
    assert pieces == ["[CLS]", *[word.lower() for word in words], "[SEP]"]
    (piece_mask,) = nlp.get_pipe("sla_transformer").local_masks([doc])
    if punct_rule is PunctRule.AUTHORS:  # the final "." piece, visible from every query
        expected[:, [is_authors_punctuation(word) for word in words]] = True
    numpy.testing.assert_array_equal(piece_mask[1:-1, 1:-1], expected)
    assert piece_mask[[0, -1], :].all() and piece_mask[:, [0, -1]].all()
    # the subject's determiner sees its noun (1 hop) but not the object's noun (3 hops)
    assert piece_mask[1, 2] and not piece_mask[1, 5]
    assert trf_output(doc).shape == (1, len(words) + 2, 32)


def test_the_output_follows_the_parse(lang_and_parser, tiny_model):
    lang, parser = lang_and_parser
    nlp = sla_pipeline(lang, parser, tiny_model, default_punct_rule(lang))
    words, heads, deps = SENTENCES[lang][0]
    parsed = trf_output(nlp(text_of(lang, words)))
    transformer = nlp.get_pipe("sla_transformer")
    by_hand = trf_output(transformer(doc_of(nlp, words, heads, deps)))
    numpy.testing.assert_allclose(parsed, by_hand, atol=1e-6)
    # another tree over the same words: every word hangs from the last one
    flat = [len(words) - 1] * len(words)
    other = trf_output(transformer(doc_of(nlp, words, flat, ["dep"] * (len(words) - 1) + ["ROOT"])))
    assert numpy.abs(other - parsed).max() > 1e-4


@pytest.mark.parametrize("lang,parser", [("de", "de_core_news_sm"), ("zh", "zh_core_web_sm"),
                                         ("eu", "path/to/a/eu/pipeline/with/a/parser")])
def test_an_unparsed_doc_s_error_names_a_parser_for_its_language(lang, parser):
    from spacy_sla import MissingParseError, SyntaxMask

    doc = spacy.blank(lang)("ein zwei drei" if lang != "zh" else "一二三")
    with pytest.raises(MissingParseError, match=rf"\[SLA-E001\].*source=spacy\.load\(\"{re.escape(parser)}\"\)"):
        SyntaxMask()(doc)
