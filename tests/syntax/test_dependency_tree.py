import numpy
from hypothesis import given, settings

from spacy_sla.syntax.dependency_tree import NO_TOKEN, ancestor_table, head_indices, tree_distances

from reference import slow_tree_distances
from strategies import random_forests
from util import english_vocab, parsed_doc, the_cat_sat


def test_head_indices_mark_roots_and_span_the_whole_doc():
    # two sentences: "a b" (b root) and "c d e" (d root)
    doc = parsed_doc(english_vocab(), list("abcde"), [1, 1, 3, 3, 3])
    assert head_indices(doc).tolist() == [1, NO_TOKEN, 3, NO_TOKEN, 3]
    assert head_indices(doc[2:4]).tolist() == [1, NO_TOKEN, 3, NO_TOKEN, 3]


def test_ancestor_table_walks_up_and_stops_at_the_root():
    doc = the_cat_sat(english_vocab())
    table = ancestor_table(head_indices(doc), depth=3)
    assert table[0].tolist() == [0, 1, 2, 3, 4, 5, 6]
    assert table[1].tolist() == [1, 2, NO_TOKEN, 2, 5, 3, 2]
    assert table[2].tolist() == [2, NO_TOKEN, NO_TOKEN, NO_TOKEN, 3, 2, NO_TOKEN]
    assert table[3].tolist() == [NO_TOKEN, NO_TOKEN, NO_TOKEN, NO_TOKEN, 2, NO_TOKEN, NO_TOKEN]


def test_tree_distances_by_hand():
    doc = the_cat_sat(english_vocab())
    everything = numpy.arange(len(doc))
    distances = tree_distances(ancestor_table(head_indices(doc), 5), everything, everything, 5)
    # The(0) -> cat(1) -> sat(2) <- on(3) <- mat(5) <- the(4); .(6) -> sat(2)
    assert distances[0].tolist() == [0, 1, 2, 3, 5, 4, 3]
    assert distances[4].tolist() == [5, 4, 3, 2, 0, 1, 4]
    assert (distances == distances.T).all()
    clipped = tree_distances(ancestor_table(head_indices(doc), 2), everything, everything, 2)
    assert clipped[0].tolist() == [0, 1, 2, 3, 3, 3, 3]  # 3 = unreachable within 2


def test_tree_distances_do_not_cross_sentences():
    doc = parsed_doc(english_vocab(), list("abcd"), [1, 1, 3, 3])
    everything = numpy.arange(4)
    distances = tree_distances(ancestor_table(head_indices(doc), 6), everything, everything, 6)
    assert distances.tolist() == [[0, 1, 7, 7], [1, 0, 7, 7], [7, 7, 0, 1], [7, 7, 1, 0]]


def test_tree_distances_of_a_block_of_rows_and_columns():
    doc = the_cat_sat(english_vocab())
    table = ancestor_table(head_indices(doc), 4)
    block = tree_distances(table, numpy.array([4, 0]), numpy.array([1, 2, 6]), 4)
    assert block.tolist() == [[4, 3, 4], [1, 2, 3]]


@settings(max_examples=150, deadline=None)
@given(random_forests())
def test_tree_distances_match_breadth_first_search(doc):
    max_distance = 4
    everything = numpy.arange(len(doc))
    table = ancestor_table(head_indices(doc), max_distance)
    fast = tree_distances(table, everything, everything, max_distance)
    assert fast.tolist() == slow_tree_distances(doc, max_distance)
