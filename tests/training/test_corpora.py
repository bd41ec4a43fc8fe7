"""spacy-sla.GoldSyntaxCorpus.v1: spaCy's corpus reader whose predicted Docs
carry the reference parse, so that SLA's masks come from gold trees."""
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import registry

from spacy_sla.training.corpora import with_reference_parse


def gold_doc(vocab, words, heads, deps) -> Doc:
    return Doc(vocab, words=words, heads=heads, deps=deps)


def test_the_reader_copies_the_gold_heads_and_labels(tmp_path):
    nlp = spacy.blank("en")
    doc = gold_doc(nlp.vocab, ["The", "cat", "sat", "."], [1, 2, 2, 2], ["det", "nsubj", "ROOT", "punct"])
    DocBin(docs=[doc]).to_disk(tmp_path / "train.spacy")
    read = registry.readers.get("spacy-sla.GoldSyntaxCorpus.v1")(tmp_path / "train.spacy", gold_preproc=True)
    (example,) = list(read(nlp))
    predicted = example.predicted
    assert [token.head.i for token in predicted] == [1, 2, 2, 2]
    assert [token.dep_ for token in predicted] == ["det", "nsubj", "ROOT", "punct"]
    assert predicted.has_annotation("DEP")


def test_tokens_the_alignment_cannot_map_become_their_own_roots():
    nlp = spacy.blank("en")
    reference = gold_doc(nlp.vocab, ["New", "York", "is", "big"], [1, 2, 2, 2], ["compound", "nsubj", "ROOT", "acomp"])
    # "New York" as one predicted token: it aligns to two gold tokens, so it has no single gold head
    predicted = Doc(nlp.vocab, words=["New York", "is", "big"], spaces=[True, True, False])
    example = with_reference_parse(Example(predicted, reference))
    assert [token.head.i for token in example.predicted] == [0, 1, 1]
    assert [token.dep_ for token in example.predicted] == ["dep", "ROOT", "acomp"]


def test_limit_and_max_length_are_spacys(tmp_path):
    nlp = spacy.blank("en")
    docs = [gold_doc(nlp.vocab, ["a", "b"], [0, 0], ["ROOT", "dep"]) for _ in range(3)]
    DocBin(docs=docs).to_disk(tmp_path / "train.spacy")
    read = registry.readers.get("spacy-sla.GoldSyntaxCorpus.v1")(tmp_path / "train.spacy", limit=2)
    assert len(list(read(nlp))) == 2
