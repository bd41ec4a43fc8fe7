"""The mask builders called on their own, span by span, share each Doc's
parse and graph between calls (as the component does within a batch): a
long Doc's graph is built once, a Doc whose parse changed is never answered
from the old one, and the cache keeps neither Docs nor graphs alive."""
import gc
import random
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc

import spacy_sla.syntax.doc_parses as doc_parses
from spacy_sla import AncestorMask, DependencyScaleDistances, SyntaxMask, TreeDistanceBuckets
from spacy_sla.syntax.doc_parses import BUILDER_PARSES, doc_parse, shared_doc_trees

from reference import slow_ancestor_mask, slow_no_neighbour_mask, slow_syntax_mask, slow_tree_distances
from util import english_vocab, parsed_doc, random_parsed_doc

BUILDERS = [
    SyntaxMask(),
    SyntaxMask(threshold=2, punct_rule="spacy", neighbours=False),
    AncestorMask(),
    TreeDistanceBuckets(),
    DependencyScaleDistances(),
]


def long_doc(n_sentences: int = 40, seed: int = 0) -> Doc:
    """Sentences of 3 to 30 tokens with random trees (about 650 tokens)."""
    rng = random.Random(seed)
    return Doc.from_docs([random_parsed_doc(rng, rng.randint(3, 30)) for _ in range(n_sentences)])


def strided_spans(doc: Doc, window: int = 60, stride: int = 45):
    return [doc[start : start + window] for start in range(0, len(doc), stride)]


class GraphBuilds:
    """Counts the graphs built (doc_parses.build_doc_graph) while it is patched in."""

    def __init__(self, monkeypatch):
        self.n_builds = 0
        original = doc_parses.build_doc_graph

        def counted(heads):
            self.n_builds += 1
            return original(heads)

        monkeypatch.setattr(doc_parses, "build_doc_graph", counted)


def fresh(builder, span) -> numpy.ndarray:
    """The builder's answer with nothing cached."""
    BUILDER_PARSES.clear()
    return builder(span)


@pytest.mark.parametrize("builder", BUILDERS, ids=repr)
def test_span_by_span_a_long_doc_has_its_graph_built_once(builder, monkeypatch):
    doc = long_doc()
    spans = strided_spans(doc)
    assert len(spans) >= 14
    BUILDER_PARSES.clear()
    builds = GraphBuilds(monkeypatch)
    cached = [builder(span) for span in spans]
    # once for the Doc, not once per span (which made the cost quadratic)
    assert builds.n_builds == 1
    expected = [fresh(builder, span) for span in spans]
    assert builds.n_builds == 1 + len(spans)
    for got, want in zip(cached, expected):
        assert got.dtype == want.dtype and (got == want).all()


def test_builders_with_other_depths_share_the_graph(monkeypatch):
    doc = long_doc()
    BUILDER_PARSES.clear()
    builds = GraphBuilds(monkeypatch)
    for span in strided_spans(doc):
        for builder in BUILDERS:
            builder(span)
    assert builds.n_builds == 1
    # and the whole-Doc question (no tokens: all of it is compared) too
    assert doc_parses.doc_trees(doc) is doc_parse(doc, numpy.arange(3), 3).graph
    assert builds.n_builds == 1


def test_a_doc_whose_heads_change_gets_a_new_graph(monkeypatch):
    # The cat sat on the mat .  (The->cat->sat, on->sat, the->mat->on, .->sat)
    doc = parsed_doc(english_vocab(), "The cat sat on the mat .".split(), [1, 2, 2, 2, 5, 3, 2])
    builder = SyntaxMask(threshold=1, punct_rule="none", neighbours=False)
    builds = GraphBuilds(monkeypatch)
    BUILDER_PARSES.clear()
    before = builder(doc)
    assert before[1].tolist() == [True, True, True, False, False, False, False]  # cat: The, itself, sat
    assert builder(doc[0:3]).tolist() == before[0:3, 0:3].tolist() and builds.n_builds == 1
    doc[5].head = doc[1]  # mat now hangs from cat
    after = builder(doc)
    assert builds.n_builds == 2
    assert after[1].tolist() == [True, True, True, False, False, True, False]  # cat: and mat
    assert after[5].tolist() == [False, True, False, False, True, True, False]  # mat: cat, the, itself
    assert (after == slow_no_neighbour_mask(doc, 0, 7, 1, False)).all()


def test_a_change_outside_the_span_is_seen_where_the_spans_paths_go(monkeypatch):
    # w0 -> w4 -> w5 (root) <- w1; w2, w3 -> w5: w0 and w1 are 3 hops apart,
    # through w4 and w5, which lie outside the span w0 w1.
    doc = parsed_doc(english_vocab(), [f"w{i}" for i in range(6)], [4, 5, 5, 5, 5, 5])
    builder = SyntaxMask(threshold=3, punct_rule="none", neighbours=False)
    builds = GraphBuilds(monkeypatch)
    BUILDER_PARSES.clear()
    assert builder(doc[0:2]).tolist() == [[True, True], [True, True]]
    doc[2].head = doc[3]  # on no path of at most 3 hops between w0 and w1
    assert builder(doc[0:2]).tolist() == [[True, True], [True, True]]
    assert builds.n_builds == 1
    doc[4].head = doc[3]  # w0 -> w4 -> w3 -> w5 <- w1: 4 hops
    assert builder(doc[0:2]).tolist() == [[True, False], [False, True]]
    assert builds.n_builds == 2
    assert (builder(doc) == slow_no_neighbour_mask(doc, 0, 6, 3, False)).all()
    # The last head on the way up counts too: w0 -> w4 -> w5 -> w1 (root), 3 hops.
    doc = parsed_doc(english_vocab(), [f"w{i}" for i in range(6)], [4, 1, 1, 1, 5, 1])
    assert builder(doc[0:2]).tolist() == [[True, True], [True, True]]
    doc[5].head = doc[3]  # w0 -> w4 -> w5 -> w3 -> w1: 4 hops
    assert builder(doc[0:2]).tolist() == [[True, False], [False, True]]
    assert builds.n_builds == 4


def test_a_new_doc_at_a_recycled_id_gets_its_own_graph():
    builder = SyntaxMask(threshold=1, punct_rule="none", neighbours=False)
    chain = [1, 2, 3, 3]  # w0 -> w1 -> w2 -> w3
    star = [3, 3, 3, 3]  # everything -> w3
    ids = []
    for k in range(12):
        # the same length and words each time: only the heads tell them apart
        doc = parsed_doc(english_vocab(), ["a", "b", "c", "d"], chain if k % 2 else star)
        ids.append(id(doc))
        assert (builder(doc) == slow_no_neighbour_mask(doc, 0, 4, 1, False)).all()
        del doc
    # CPython reuses a freed Doc's memory, so later Docs did come at old ids
    assert len(set(ids)) < len(ids)


def test_the_cache_keeps_no_doc_and_no_graph_alive():
    BUILDER_PARSES.clear()
    doc = long_doc(n_sentences=10)
    SyntaxMask()(doc[0:20])
    assert len(BUILDER_PARSES) == 1
    doc_ref, graph_ref = weakref.ref(doc), weakref.ref(doc_parse(doc).graph)
    del doc
    gc.collect()
    assert doc_ref() is None and graph_ref() is None
    assert len(BUILDER_PARSES) == 0
    # a caller that holds many Docs does not hold a graph for each
    docs = [long_doc(n_sentences=2, seed=seed) for seed in range(3 * BUILDER_PARSES.max_docs)]
    for doc in docs:
        SyntaxMask()(doc)
    assert len(BUILDER_PARSES) == BUILDER_PARSES.max_docs


def test_a_batch_keeps_its_own_table_and_drops_it_at_the_end(monkeypatch):
    doc = long_doc(n_sentences=10)
    BUILDER_PARSES.clear()
    builds = GraphBuilds(monkeypatch)
    with shared_doc_trees() as batch:
        for span in strided_spans(doc, 20, 15):
            SyntaxMask()(span)
        assert len(batch) == 1 and len(BUILDER_PARSES) == 0
        graph_ref = weakref.ref(doc_parse(doc).graph)
    assert builds.n_builds == 1
    del batch
    # no reference cycle: the batch's graphs go without a collection
    assert graph_ref() is None


@settings(max_examples=80, deadline=None)
@given(n_tokens=st.integers(2, 12), data=st.data())
def test_cached_answers_after_any_head_changes_equal_breadth_first_search(n_tokens, data):
    """Any heads (cycles included), any span, then any heads changed: each
    builder's cached answer equals the definition on the changed Doc."""
    heads = data.draw(st.lists(st.integers(0, n_tokens - 1), min_size=n_tokens, max_size=n_tokens))
    words = data.draw(st.lists(st.sampled_from(["a", ",", "dog"]), min_size=n_tokens, max_size=n_tokens))
    start = data.draw(st.integers(0, n_tokens - 1))
    end = data.draw(st.integers(start + 1, n_tokens))
    threshold = data.draw(st.integers(1, 4))  # 0 hops read no heads
    # Changes outside the span are the ones a check of the span alone would miss.
    outside = [i for i in range(n_tokens) if not start <= i < end]
    changed = st.sampled_from(outside) if outside and data.draw(st.booleans()) else st.integers(0, n_tokens - 1)
    changes = data.draw(st.lists(st.tuples(changed, st.integers(0, n_tokens - 1)), min_size=1, max_size=3))
    builders = {
        "sla": (SyntaxMask(threshold=threshold, punct_rule="spacy"), lambda doc: slow_syntax_mask(doc, start, end, threshold, True)),
        "no neighbours": (
            SyntaxMask(threshold=threshold, punct_rule="none", neighbours=False),
            lambda doc: slow_no_neighbour_mask(doc, start, end, threshold, False),
        ),
        "ancestors": (AncestorMask(), lambda doc: slow_ancestor_mask(doc, start, end)),
        "distances": (
            TreeDistanceBuckets(max_distance=threshold),
            lambda doc: numpy.asarray(slow_tree_distances(doc, threshold))[start:end, start:end],
        ),
    }
    # one Doc per builder: another builder's check must not refresh the entry first
    for name, (builder, reference) in builders.items():
        doc = parsed_doc(english_vocab(), words, heads)
        builder(doc[start:end])  # cached
        for token, head in changes:
            doc[token].head = doc[head]
        assert (builder(doc[start:end]) == reference(doc)).all(), name


def test_threads_sharing_the_cache_get_the_sequential_answers():
    docs = [long_doc(seed=seed) for seed in range(3)]
    jobs = [(builder, span) for doc in docs for span in strided_spans(doc) for builder in BUILDERS]
    BUILDER_PARSES.clear()
    expected = [builder(span) for builder, span in jobs]
    for _ in range(2):
        BUILDER_PARSES.clear()
        # reversed: the threads start with the deep tables (dependency_scale,
        # 19 hops) and the shallow ones (threshold 2) at the same time
        with ThreadPoolExecutor(max_workers=4) as pool:
            got = list(pool.map(lambda job: job[0](job[1]), jobs[::-1]))[::-1]
        for answer, want in zip(got, expected):
            assert (answer == want).all()


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
    assert doc_parse(doc).long_trees() == counts


def test_a_batch_is_degenerate_only_where_every_long_tree_is_flat():
    flat, other = flat_doc(9), parsed_doc(english_vocab(), [f"w{i}" for i in range(8)], [1, 2, 3, 4, 5, 6, 7, 7])
    for docs, expected in [([flat, flat_doc(12)], (2, 2)), ([flat, other], (0, 0)), ([flat_doc(3)], (0, 0))]:
        with shared_doc_trees() as batch:
            assert batch.flat_parses(docs) == expected
