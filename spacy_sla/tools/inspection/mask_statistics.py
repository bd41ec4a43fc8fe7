"""How much a local mask restricts attention, for any parsed Docs and any
mask builder, before anything is trained: the share of sequences whose
local mask hides nothing, and the visible share of token pairs and of
wordpiece pairs.

A sequence is what the transformer reads at once: at "document" level each
span the component's span getter cuts from a Doc (by default
spacy-transformers' strided spans of 128 tokens, stride 96: spaCy tokens,
not wordpieces), at "sentence" level each sentence of a Doc taken as a Doc
of its own and then cut by the same span getter (what a corpus of one
sentence per Doc feeds).

Wordpiece level is the matrix the component builds (SyntaxInputs, as
`local_masks` returns it): special pieces see and are seen by everything,
the per-piece "authors" punctuation rule and the diagonal are applied,
padding is left out. Token level is the builder's own matrix over the
sequence's tokens with the diagonal set, whitespace tokens (which have no
wordpieces) left out, and under the "authors" rule every token made only of
its punctuation characters visible from every query: BERT's tokenizer cuts
such a token into exactly those one-character pieces, so the token rule
agrees with the piece rule there, while a token such as "u.s.", partly
punctuation, stays hidden at token level. Pair shares are pooled over all
sequences (visible pairs / all pairs), so longer sequences weigh more.

Everything here is numpy and a tokenizer; the transformer's weights are
never loaded.
"""
import random
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import registry

from spacy_sla import (
    BuilderKind,
    DocParses,
    MaskBuilder,
    PunctRule,
    SpanGetter,
    build_matrix,
    build_syntax_inputs,
    builder_kind,
    builder_punct_rule,
    flatten_spans,
    has_complete_parse,
    is_authors_punctuation,
    tokenize_spans,
)
from spacy_sla.errors import TransformerLoadFixes

from .errors import TOKENIZER_OFFLINE_FIX, Errors

LEVELS = ("sentence", "document")
# The registered builders `spacy sla mask-stats --mask` names, and the
# argument its thresholds set.
MASKS = {"sla": ("spacy-sla.syntax_mask.v1", "threshold"), "window": ("spacy-sla.window_mask.v1", "window")}
DEFAULT_WINDOW, DEFAULT_STRIDE = 128, 96


@dataclass
class MaskStatistics:
    """Counts over the sequences of one level for one mask builder; the
    piece counts are None when no tokenizer was given."""

    level: str
    mask: str
    n_docs: int
    n_sequences: int
    n_tokens: int  # tokens over all sequences (a token in two overlapping spans counts twice)
    token_pairs: int
    visible_token_pairs: int
    fully_visible_tokens: int  # sequences whose token-level mask hides no pair
    token_share_sum: float  # the sum over sequences of each one's visible share of token pairs
    n_pieces: Optional[int] = None
    piece_pairs: Optional[int] = None
    visible_piece_pairs: Optional[int] = None
    fully_visible_pieces: Optional[int] = None  # sequences whose wordpiece mask hides no pair
    piece_share_sum: Optional[float] = None

    @property
    def token_pair_share(self) -> float:
        return _share(self.visible_token_pairs, self.token_pairs)

    @property
    def piece_pair_share(self) -> Optional[float]:
        return None if self.piece_pairs is None else _share(self.visible_piece_pairs, self.piece_pairs)

    @property
    def mean_token_share(self) -> float:
        """The visible share of token pairs averaged over sequences (each
        sequence weighs the same, however long)."""
        return _share(self.token_share_sum, self.n_sequences)

    @property
    def mean_piece_share(self) -> Optional[float]:
        return None if self.piece_share_sum is None else _share(self.piece_share_sum, self.n_sequences)

    @property
    def fully_visible_share(self) -> float:
        """Sequences whose mask hides nothing: the wordpiece mask the model
        uses when there is one, else the token-level mask."""
        count = self.fully_visible_tokens if self.fully_visible_pieces is None else self.fully_visible_pieces
        return _share(count, self.n_sequences)

    def as_dict(self) -> Dict[str, Any]:
        shares = {
            "fully_visible_share": self.fully_visible_share,
            "fully_visible_tokens_share": _share(self.fully_visible_tokens, self.n_sequences),
            "token_pair_share": self.token_pair_share,
            "piece_pair_share": self.piece_pair_share,
            "mean_token_share": self.mean_token_share,
            "mean_piece_share": self.mean_piece_share,
        }
        return {**asdict(self), **shares}


def _share(count: Optional[float], total: int) -> float:
    return float("nan") if not total or count is None else count / total


def make_mask(kind: str, value: int, punct_rule: str = "authors") -> MaskBuilder:
    """The registered builder of `kind` ("sla": syntax_mask.v1 with
    threshold `value`; "window": window_mask.v1 with window `value`)."""
    if kind not in MASKS:
        raise ValueError(Errors.E025.format(option="mask", value=repr(kind), choices=", ".join(MASKS)))
    name, argument = MASKS[kind]
    return registry.misc.get(name)(**{argument: value, "punct_rule": punct_rule})


def strided_spans(window: int = DEFAULT_WINDOW, stride: int = DEFAULT_STRIDE) -> SpanGetter:
    """The span getter of the shipped configs and the component's default."""
    getter: SpanGetter = registry.get("span_getters", "spacy-transformers.strided_spans.v1")(window=window, stride=stride)
    return getter


def sample_docs(docs: Sequence[Doc], limit: Optional[int], seed: Optional[int]) -> List[Doc]:
    """The first `limit` Docs, or with a seed `limit` Docs drawn at random
    without replacement (in file order); all Docs when limit is None."""
    if limit is None or limit >= len(docs):
        return list(docs)
    if seed is None:
        return list(docs[:limit])
    chosen = sorted(random.Random(seed).sample(range(len(docs)), limit))
    return [docs[i] for i in chosen]


def parser_components(nlp: Language) -> List[str]:
    """The components of `nlp` up to the last one that assigns
    token.dep: what parsing a Doc needs (its tok2vec, the parser), without
    the rest (NER, lemmatizer, ...)."""
    names = nlp.pipe_names
    parsing = [i for i, name in enumerate(names) if "token.dep" in nlp.get_pipe_meta(name).assigns]
    if not parsing:
        raise ValueError(Errors.E023.format(components=", ".join(names) or "none"))
    return names[: parsing[-1] + 1]


def parse_missing(
    docs: Iterable[Doc], parser: Optional[Language], *, from_text: bool = False, batch_size: int = 64
) -> List[Doc]:
    """The Docs with a dependency parse: Docs that carry a complete parse
    keep it, the others are parsed by `parser`'s components up to its
    parser. The parser keeps the sentence boundaries a Doc has (spaCy's
    parser never crosses a token's is_sent_start). With from_text, every Doc
    is parsed again from its text, as `spacy train` and `spacy evaluate`
    make their Docs (the Docs' tokens and sentence boundaries are dropped).
    Docs must share the parser's vocab."""
    docs = list(docs)
    if from_text:
        if parser is None:
            raise ValueError(Errors.E022.format(n_docs=len(docs)))
        docs = [parser.make_doc(doc.text) for doc in docs]
    missing = [i for i, doc in enumerate(docs) if not has_complete_parse(doc)]
    if not missing:
        return docs
    if parser is None:
        raise ValueError(Errors.E022.format(n_docs=len(missing)))
    enabled = parser_components(parser)
    disabled = [name for name in parser.pipe_names if name not in enabled]
    parsed = parser.pipe((docs[i] for i in missing), batch_size=batch_size, disable=disabled)
    for i, doc in zip(missing, parsed):
        docs[i] = doc
    return docs


def sequences(docs: Sequence[Doc], level: str, get_spans: SpanGetter) -> List[Span]:
    """The spans the transformer reads at `level` (see the module docstring)."""
    if level == "sentence":
        docs = [sent.as_doc() for doc in docs for sent in doc.sents]
    elif level != "document":
        raise ValueError(Errors.E025.format(option="level", value=repr(level), choices=", ".join(LEVELS)))
    return flatten_spans(get_spans(list(docs)))


def token_visibility(span: Span, builder: MaskBuilder, parses: DocParses) -> numpy.ndarray:
    """The token-level visibility of the span's tokens that have wordpieces
    (whitespace tokens left out), as the module docstring defines it; the
    builder reads the parse from `parses`."""
    visible = numpy.array(build_matrix(builder, span, parses), dtype=bool)
    numpy.fill_diagonal(visible, True)
    if builder_punct_rule(builder) is PunctRule.AUTHORS:
        punctuation = [all(is_authors_punctuation(character) for character in token.text) for token in span]
        visible[:, numpy.array(punctuation, dtype=bool)] = True
    words = numpy.array([not token.is_space for token in span], dtype=bool)
    return visible[numpy.ix_(words, words)]


def mask_statistics(
    docs: Sequence[Doc],
    builder: MaskBuilder,
    *,
    level: str = "document",
    tokenizer: Optional[Any] = None,
    get_spans: Optional[SpanGetter] = None,
    batch_size: int = 32,
) -> MaskStatistics:
    """How much `builder` restricts the local attention over the parsed
    `docs` at `level`; wordpiece counts need the transformer's `tokenizer`
    (a Hugging Face tokenizer). get_spans defaults to the component's
    strided spans (128 tokens, stride 96)."""
    if builder_kind(builder) is not BuilderKind.MASK:
        raise ValueError(Errors.E024.format(builder=repr(builder)))
    spans = sequences(docs, level, get_spans or strided_spans())
    token_pairs = visible_tokens = full_tokens = n_tokens = 0
    share_sum = 0.0
    parses, doc = DocParses(), None
    for span in spans:
        if span.doc is not doc:  # a Doc's spans follow each other: one Doc's parse held at a time
            parses, doc = DocParses(), span.doc
        visible = token_visibility(span, builder, parses)
        n_tokens += len(visible)
        token_pairs += visible.size
        visible_tokens += int(visible.sum())
        full_tokens += bool(visible.all())
        share_sum += float(visible.mean()) if visible.size else 1.0
    statistics = MaskStatistics(
        level, repr(builder), len(docs), len(spans), n_tokens, token_pairs, visible_tokens, full_tokens, share_sum
    )
    if tokenizer is not None:
        _count_pieces(statistics, spans, builder, tokenizer, batch_size)
    return statistics


def _count_pieces(
    statistics: MaskStatistics, spans: List[Span], builder: MaskBuilder, tokenizer: Any, batch_size: int
) -> None:
    """Add the wordpiece counts, from the masks the component would build."""
    n_pieces = pairs = visible_pairs = full = 0
    share_sum = 0.0
    warned: set = set()  # SLA-W003 (a parse that is not a forest) once, not once per batch
    for start in range(0, len(spans), batch_size):
        batch = spans[start : start + batch_size]
        wordpieces, align = tokenize_spans(tokenizer, batch)
        inputs = build_syntax_inputs(
            batch,
            align,
            wordpieces.lengths,
            wordpieces.input_ids.shape[1],
            local=builder,
            piece_strings=wordpieces.strings,
            warned=warned,
        )
        for matrix in inputs.local_matrices():
            n_pieces += len(matrix)
            pairs += matrix.size
            visible_pairs += int(matrix.sum())
            full += bool(matrix.all())
            share_sum += float(matrix.mean()) if matrix.size else 1.0
    statistics.n_pieces, statistics.piece_pairs, statistics.piece_share_sum = n_pieces, pairs, share_sum
    statistics.visible_piece_pairs, statistics.fully_visible_pieces = visible_pairs, full


def mask_label(mask: str) -> str:
    """A short name for a builder's repr: "SyntaxMask(threshold=3, ...)" ->
    "SyntaxMask threshold=3"."""
    name, _, arguments = mask.partition("(")
    first = arguments.split(",")[0].rstrip(")")
    return f"{name} {first}".strip()


def statistics_table(rows: Sequence[MaskStatistics]) -> str:
    """A markdown table, one row per level and mask. "pooled": visible pairs
    over all pairs of all sequences; "mean": the share of each sequence,
    averaged over sequences."""
    header = (
        "| level | mask | sequences | tokens / seq. | pieces / seq. | hides nothing (pieces) | hides nothing (tokens) "
        "| token pairs visible, pooled / mean | piece pairs visible, pooled / mean |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = []
    for row in rows:
        if row.n_pieces is None:
            pieces = full_pieces = piece_pairs = "–"
        else:
            pieces = f"{_share(row.n_pieces, row.n_sequences):.1f}"
            full_pieces = _percent(_share(row.fully_visible_pieces, row.n_sequences))
            piece_pairs = f"{_percent(row.piece_pair_share)} / {_percent(row.mean_piece_share)}"
        lines.append(
            f"| {row.level} | {mask_label(row.mask)} | {row.n_sequences} | {_share(row.n_tokens, row.n_sequences):.1f} "
            f"| {pieces} | {full_pieces} | {_percent(_share(row.fully_visible_tokens, row.n_sequences))} "
            f"| {_percent(row.token_pair_share)} / {_percent(row.mean_token_share)} | {piece_pairs} |"
        )
    return header + "\n".join(lines) + "\n"


def _percent(share: Optional[float]) -> str:
    return "–" if share is None or share != share else f"{100 * share:.1f} %"


def load_tokenizer(name: str) -> Any:
    """The transformer's tokenizer as the component loads it
    (tokenizer_config {"use_fast": true}), without its weights; [SLA-E005]
    with the local-directory fix when it cannot be found or read (offline,
    a hub name that is not cached, a missing directory)."""
    from transformers import AutoTokenizer

    from spacy_sla.layers.hf_shim import coded_load_errors

    with coded_load_errors(name, f"{TransformerLoadFixes.HUB} {TOKENIZER_OFFLINE_FIX}"):
        return AutoTokenizer.from_pretrained(name, use_fast=True)


__all__ = [
    "LEVELS",
    "MASKS",
    "MaskStatistics",
    "load_tokenizer",
    "make_mask",
    "mask_label",
    "parser_components",
    "mask_statistics",
    "parse_missing",
    "sample_docs",
    "sequences",
    "statistics_table",
    "strided_spans",
    "token_visibility",
]
