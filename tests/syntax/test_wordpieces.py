"""From token matrices to wordpiece matrices: a piece takes its token's row
and column, a piece shared by tokens the most visible (nearest) of theirs, a
piece without a token sees and is seen by everything."""
import numpy
import pytest

from spacy_sla.syntax.wordpieces import expand_to_pieces, wordpiece_visibility


def as_ints(mask):
    return mask.astype(int).tolist()


def test_wordpiece_visibility_by_hand():
    # tokens t0, t1; pieces p0 (t0), p1 (t0 and t1), p2 (t1), p3 (no token)
    token_visible = numpy.array([[True, False], [True, True]])
    visible = wordpiece_visibility(token_visible, (numpy.array([0, 0, 1, 1]), numpy.array([0, 1, 1, 2])), 4)
    assert as_ints(visible) == [
        [1, 1, 0, 1],  # p0 = t0 sees t0's pieces (p0, p1)
        [1, 1, 1, 1],  # p1 = t0 or t1: sees what either sees
        [1, 1, 1, 1],  # p2 = t1 sees t0 and t1
        [1, 1, 1, 1],  # p3: unaligned, sees everything
    ]


def test_distances_of_a_shared_piece_are_the_smallest():
    # tokens t0, t1, t2; pieces p0 (t0), p1 (t1 and t2), p2 (t2), p3 (none)
    distances = numpy.array([[0, 2, 5], [2, 0, 1], [5, 1, 0]], dtype=numpy.int16)
    pairs = (numpy.array([0, 1, 2, 2]), numpy.array([0, 1, 1, 2]))
    expanded = expand_to_pieces(distances, pairs, 4, unanchored=9)
    assert expanded.tolist() == [[0, 2, 5, 9], [2, 0, 0, 9], [5, 0, 0, 9], [9, 9, 9, 9]]



@pytest.mark.parametrize(
    "pieces", [[1, 2, 3, 4], [4, 3, 1, 2]], ids=["a run of pieces", "pieces out of order"]
)
def test_unshared_pieces_take_their_tokens_values(pieces):
    # tokens t0, t1, t2; t1 has two pieces; piece 0 and 5 have no token
    distances = numpy.array([[0, 2, 5], [2, 0, 1], [5, 1, 0]], dtype=numpy.int16)
    tokens = numpy.array([0, 1, 1, 2])
    expanded = expand_to_pieces(distances, (tokens, numpy.array(pieces)), 6, unanchored=9)
    token_of_piece = dict(zip(pieces, tokens.tolist()))
    expected = [
        [distances[token_of_piece[row], token_of_piece[col]] if row in token_of_piece and col in token_of_piece else 9 for col in range(6)]
        for row in range(6)
    ]
    assert expanded.tolist() == expected
    assert expanded[1].tolist() == ([9, 0, 2, 2, 5, 9] if pieces == [1, 2, 3, 4] else [9, 0, 1, 0, 2, 9])
