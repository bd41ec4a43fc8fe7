"""`sla_parse_withdrawal`: after it, a Doc carries no trace of the parse SLA
used, and a parser after it parses as it does on a Doc never parsed."""
from typing import List

import pytest
import spacy
from spacy.attrs import DEP, HEAD, SENT_START
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_sla.parse_withdrawal import ParseWithdrawal, unparsed_arrays, withdraw_parse

from util import english_vocab, parsed_doc

WORDS = "the cat sat on the mat and the dog ran".split()


def test_unparsed_arrays_are_those_of_a_doc_never_parsed():
    fresh = Doc(english_vocab(), words=WORDS)
    assert unparsed_arrays(len(WORDS)).tolist() == fresh.to_array([HEAD, DEP, SENT_START]).tolist()
    assert unparsed_arrays(0).shape == (0, 3)


def test_withdraw_parse_keeps_every_other_annotation():
    doc = parsed_doc(english_vocab(), "She ran . He sat .".split(), [1, 1, 1, 4, 4, 4],
                     ["nsubj", "ROOT", "punct", "nsubj", "ROOT", "punct"])
    for token, tag in zip(doc, ["PRP", "VBD", ".", "PRP", "VBD", "."]):
        token.tag_ = tag
    doc.ents = [Span(doc, 3, 4, "PERSON")]
    assert len(list(doc.sents)) == 2
    assert withdraw_parse(doc) is doc
    assert not doc.has_annotation("DEP") and not doc.has_annotation("SENT_START")
    assert [token.head.i for token in doc] == list(range(6)) and [token.dep_ for token in doc] == [""] * 6
    assert [token.is_sent_start for token in doc] == [True, None, None, None, None, None]
    assert [token.tag_ for token in doc] == ["PRP", "VBD", ".", "PRP", "VBD", "."]
    assert [(entity.text, entity.label_) for entity in doc.ents] == [("He", "PERSON")]


def test_an_empty_doc_is_left_as_it_is():
    doc = Doc(english_vocab(), words=[])
    assert len(ParseWithdrawal()(doc)) == 0


def test_the_factory_declares_what_it_resets():
    nlp = spacy.blank("en")
    withdrawal = nlp.add_pipe("sla_parse_withdrawal")
    assert isinstance(withdrawal, ParseWithdrawal) and withdrawal.name == "sla_parse_withdrawal"
    meta = nlp.get_pipe_meta("sla_parse_withdrawal")
    assert meta.assigns == ["token.head", "token.dep", "token.is_sent_start"]
    assert meta.requires == ["doc._.trf_data"]
    docs = [parsed_doc(nlp.vocab, ["a", "b"], [1, 1]), parsed_doc(nlp.vocab, ["c"], [0])]
    assert [doc.has_annotation("DEP") for doc in withdrawal.pipe(docs)] == [False, False]


# One sentence each: the parser learns never to split these Docs.
TRAINING = [
    ("the cat sat on the mat", [1, 2, 2, 2, 5, 3]),
    ("the dog ran", [1, 2, 2]),
    ("a cat saw the dog", [1, 2, 2, 4, 2]),
]


@pytest.fixture(scope="module")
def user_parser() -> Language:
    """A small parser trained here on single-sentence Docs, standing for the
    user's own parser after the transformer."""
    nlp = spacy.blank("en")
    nlp.add_pipe("parser", config={"min_action_freq": 1})  # spaCy maps rarer labels to "dep"
    examples = []
    for text, heads in TRAINING:
        words = text.split()
        deps = ["ROOT" if head == i else "arg" for i, head in enumerate(heads)]
        examples.append(Example.from_dict(nlp.make_doc(text), {"words": words, "heads": heads, "deps": deps}))
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(30):
        nlp.update(examples, sgd=optimizer)
    return nlp


def sla_parse(nlp: Language, words: List[str]) -> Doc:
    """The Doc as the SLA transformer receives it: parsed by another parser,
    here one that puts every word in a sentence of its own."""
    return Doc(nlp.vocab, words=words, heads=list(range(len(words))), deps=["ROOT"] * len(words))


def parse_of(doc: Doc) -> List[tuple]:
    return [(token.head.i, token.dep_, token.is_sent_start) for token in doc]


def test_the_user_parser_parses_as_on_a_doc_never_parsed(user_parser):
    parser = user_parser.get_pipe("parser")
    unparsed = parse_of(parser(Doc(user_parser.vocab, words=WORDS)))
    assert sum(start is True for _, _, start in unparsed) < len(WORDS)
    withdrawn = parse_of(parser(withdraw_parse(sla_parse(user_parser, WORDS))))
    assert withdrawn == unparsed
    # Without the withdrawal the earlier parse's sentence starts bind the user's parser.
    kept = parse_of(parser(sla_parse(user_parser, WORDS)))
    assert kept != unparsed and all(start for _, _, start in kept)
