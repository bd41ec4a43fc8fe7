"""A batch's parses (DocParses), passed to the builders by the model: each
Doc's parse and graph are read once for all the spans and builders of the
batch, the answers equal the builders' own calls, a builder called on its
own reads the Doc anew (so a changed Doc is answered from its new parse),
and a table keeps its graphs no longer than itself."""
import gc
import random
import weakref

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc, Span

import spacy_sla.syntax.doc_parses as doc_parses
from spacy_sla import AncestorMask, DependencyScale, DocParses, SyntaxMask, TreeDistanceBias, build_matrix
from spacy_sla.syntax.doc_parses import DocParse, has_complete_parse

from reference import slow_ancestor_mask, slow_no_neighbour_mask, slow_syntax_mask, slow_tree_distances
from util import english_vocab, parsed_doc, random_parsed_doc

BUILDERS = [
    SyntaxMask(),
    SyntaxMask(threshold=2, punct_rule="spacy", neighbours=False),
    AncestorMask(),
    TreeDistanceBias(),
    DependencyScale(),
]


def long_doc(n_sentences: int = 40, seed: int = 0) -> Doc:
    """Sentences of 3 to 30 tokens with random trees (about 650 tokens)."""
    rng = random.Random(seed)
    return Doc.from_docs([random_parsed_doc(rng, rng.randint(3, 30)) for _ in range(n_sentences)])


def strided_spans(doc: Doc, window: int = 60, stride: int = 45) -> list:
    return [doc[start : start + window] for start in range(0, len(doc), stride)]


class GraphBuilds:
    """Counts the graphs built (doc_parses.build_doc_graph) while it is patched in."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.n_builds = 0
        original = doc_parses.build_doc_graph

        def counted(heads: numpy.ndarray) -> object:
            self.n_builds += 1
            return original(heads)

        monkeypatch.setattr(doc_parses, "build_doc_graph", counted)


@pytest.mark.parametrize("builder", BUILDERS, ids=repr)
def test_span_by_span_a_long_doc_has_its_graph_built_once_per_batch(builder, monkeypatch):
    doc = long_doc()
    spans = strided_spans(doc)
    assert len(spans) >= 14
    builds = GraphBuilds(monkeypatch)
    parses = DocParses()
    shared = [builder.build(span, parses) for span in spans]
    # once for the Doc, not once per span (which made the cost quadratic)
    assert builds.n_builds == 1 and len(parses) == 1
    own = [builder(span) for span in spans]
    assert builds.n_builds == 1 + len(spans)
    for got, want in zip(shared, own):
        assert got.dtype == want.dtype and (got == want).all()


def test_builders_with_other_depths_share_the_batchs_graph(monkeypatch):
    doc = long_doc()
    builds = GraphBuilds(monkeypatch)
    parses = DocParses()
    for span in strided_spans(doc):
        for builder in BUILDERS:
            build_matrix(builder, span, parses)
    assert builds.n_builds == 1
    assert parses.graph(doc) is parses.graph(doc[:].doc)
    assert builds.n_builds == 1


def test_a_builder_of_ones_own_gets_the_span_alone():
    calls = []

    def user_builder(doclike: Span) -> numpy.ndarray:
        calls.append(doclike)
        return numpy.ones((len(doclike), len(doclike)), dtype=bool)

    doc = long_doc(n_sentences=2)
    parses = DocParses()
    assert build_matrix(user_builder, doc[1:4], parses).shape == (3, 3)
    assert [(span.start, span.end) for span in calls] == [(1, 4)] and len(parses) == 0


def test_a_doc_whose_heads_change_is_answered_from_its_new_parse_by_the_builders_own_call():
    # The cat sat on the mat .  (The->cat->sat, on->sat, the->mat->on, .->sat)
    doc = parsed_doc(english_vocab(), "The cat sat on the mat .".split(), [1, 2, 2, 2, 5, 3, 2])
    builder = SyntaxMask(threshold=1, punct_rule="none", neighbours=False)
    before = builder(doc)
    assert before[1].tolist() == [True, True, True, False, False, False, False]  # cat: The, itself, sat
    doc[5].head = doc[1]  # mat now hangs from cat
    after = builder(doc)
    assert after[1].tolist() == [True, True, True, False, False, True, False]  # cat: and mat
    assert after[5].tolist() == [False, True, False, False, True, True, False]  # mat: cat, the, itself
    assert (after == slow_no_neighbour_mask(doc, 0, 7, 1, False)).all()
    # a new batch's table reads the new parse too
    assert (builder.build(doc, DocParses()) == after).all()


def test_the_table_holds_its_docs_and_its_graphs_go_with_it():
    docs = [long_doc(n_sentences=3, seed=seed) for seed in range(4)]
    parses = DocParses()
    for doc in docs:
        SyntaxMask().build(doc[0:20], parses)
    assert len(parses) == 4
    graph_refs = [weakref.ref(parses.graph(doc)) for doc in docs]
    # a Doc dropped by its caller stays in the table: its id is not reused while the table lives
    doc_ref = weakref.ref(docs.pop(0))
    assert doc_ref() is not None
    del parses
    # no reference cycle: the batch's graphs go without a collection
    assert all(ref() is None for ref in graph_refs)
    gc.collect()  # a Doc itself is collected (spaCy's Docs hold cycles)
    assert doc_ref() is None


def test_a_complete_parse_is_told_from_a_partial_one():
    parsed = parsed_doc(english_vocab(), ["a", "b"], [1, 1])
    unparsed = Doc(english_vocab(), words=["c", "d"])
    joined = Doc.from_docs([parsed, unparsed])
    parses = DocParses()
    assert has_complete_parse(parsed) and parses.has_complete_parse(parsed)
    assert not has_complete_parse(joined) and not parses.has_complete_parse(joined)
    assert has_complete_parse(joined[:0].as_doc()) and parses.has_complete_parse(Doc(english_vocab(), words=[]))


def test_non_forest_docs_are_counted_among_the_built_graphs():
    forest = parsed_doc(english_vocab(), ["a", "b", "c"], [1, 1, 1])
    cyclic = parsed_doc(english_vocab(), ["a", "b", "c"], [1, 0, 2])  # a <-> b
    parses = DocParses()
    parses.get(cyclic)  # read, no graph built: not counted
    assert parses.non_forest_docs() == 0
    parses.graph(forest), parses.graph(cyclic)
    assert parses.non_forest_docs() == 1


@settings(max_examples=80, deadline=None)
@given(n_tokens=st.integers(2, 12), data=st.data())
def test_answers_from_a_shared_table_equal_breadth_first_search(n_tokens, data):
    """Any heads (cycles included), any spans of one Doc, one table for all
    the builders: each answer equals the definition."""
    heads = data.draw(st.lists(st.integers(0, n_tokens - 1), min_size=n_tokens, max_size=n_tokens))
    words = data.draw(st.lists(st.sampled_from(["a", ",", "dog"]), min_size=n_tokens, max_size=n_tokens))
    threshold = data.draw(st.integers(1, 4))
    doc = parsed_doc(english_vocab(), words, heads)
    parses = DocParses()
    for _ in range(2):
        start = data.draw(st.integers(0, n_tokens - 1))
        end = data.draw(st.integers(start + 1, n_tokens))
        builders = {
            "sla": (SyntaxMask(threshold=threshold, punct_rule="spacy"), slow_syntax_mask(doc, start, end, threshold, True)),
            "no neighbours": (
                SyntaxMask(threshold=threshold, punct_rule="none", neighbours=False),
                slow_no_neighbour_mask(doc, start, end, threshold, False),
            ),
            "ancestors": (AncestorMask(), slow_ancestor_mask(doc, start, end)),
            "distances": (
                TreeDistanceBias(max_distance=threshold),
                numpy.asarray(slow_tree_distances(doc, threshold))[start:end, start:end],
            ),
        }
        for name, (builder, expected) in builders.items():
            assert (builder.build(doc[start:end], parses) == expected).all(), name
    assert len(parses) == 1


def flat_doc(n_words: int, head: int = 1) -> Doc:
    """Every token headed by one token: what a parser that reads nothing gives."""
    return Doc(english_vocab(), words=[f"w{i}" for i in range(n_words)], heads=[head] * n_words,
               deps=["ROOT" if i == head else "dep" for i in range(n_words)])


@pytest.mark.parametrize("doc,counts", [
    (flat_doc(7), (1, 1)),
    (flat_doc(6), (0, 0)),  # short: a star is a common correct parse ("Go home now, please.")
    (parsed_doc(english_vocab(), ["The", "cat", "sat", "on", "the", "mat", "."], [1, 2, 2, 2, 5, 3, 2]), (1, 0)),
    (Doc.from_docs([flat_doc(9), flat_doc(3), flat_doc(8, head=7)]), (2, 2)),
    (Doc.from_docs([flat_doc(9), parsed_doc(english_vocab(), [f"w{i}" for i in range(8)], [1, 2, 3, 4, 5, 6, 7, 7])]),
     (2, 1)),
    (Doc(english_vocab(), words=[f"w{i}" for i in range(9)]), (0, 0)),  # no parse
])
def test_long_trees_and_the_flat_ones_are_counted(doc, counts):
    assert DocParse.of(doc).long_trees() == counts


def test_a_batch_is_degenerate_only_where_every_long_tree_is_flat():
    flat, other = flat_doc(9), parsed_doc(english_vocab(), [f"w{i}" for i in range(8)], [1, 2, 3, 4, 5, 6, 7, 7])
    for docs, expected in [([flat, flat_doc(12)], (2, 2)), ([flat, other], (0, 0)), ([flat_doc(3)], (0, 0))]:
        assert DocParses().flat_parses(docs) == expected
