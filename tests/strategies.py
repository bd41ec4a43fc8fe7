"""Hypothesis strategies for parsed Docs with random dependency forests."""
from hypothesis import strategies as st
from spacy.tokens import Doc

from util import english_vocab

WORD_CHOICES = ["a", "dog", "ran", ",", ".", "!", "cat", "x"]


@st.composite
def random_forests(draw, max_tokens: int = 24, max_sentences: int = 4, space_tokens: bool = False) -> Doc:
    """A Doc of 1..max_tokens tokens cut into contiguous sentences, each with
    a random (often non-projective) tree, and some punctuation tokens (and,
    with space_tokens, whitespace tokens, which are never neighbours)."""
    n_tokens = draw(st.integers(1, max_tokens))
    n_cuts = draw(st.integers(0, min(max_sentences - 1, n_tokens - 1)))
    cuts = sorted(draw(st.sets(st.integers(1, n_tokens - 1), min_size=n_cuts, max_size=n_cuts))) if n_cuts else []
    bounds = [0] + cuts + [n_tokens]
    heads = [0] * n_tokens
    deps = ["dep"] * n_tokens
    for start, end in zip(bounds, bounds[1:]):
        order = draw(st.permutations(list(range(start, end))))
        root = order[0]
        heads[root] = root
        deps[root] = "ROOT"
        for position in range(1, len(order)):
            heads[order[position]] = order[draw(st.integers(0, position - 1))]
    choices = WORD_CHOICES + ["\n", "  "] if space_tokens else WORD_CHOICES
    words = [draw(st.sampled_from(choices)) for _ in range(n_tokens)]
    return Doc(english_vocab(), words=words, heads=heads, deps=deps)
