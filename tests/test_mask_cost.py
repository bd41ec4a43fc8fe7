"""Where the mask work happens (no timing): per sentence, once per Doc and
batch, and never per layer."""
import torch
from spacy.tokens import Doc

import spacy_sla.layers.transformer_model as transformer_model
import spacy_sla.syntax.dependency_tree as dependency_tree
import spacy_sla.variants.syntax_mask as sla_module
from spacy_sla import SyntaxMask
from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention
from spacy_sla.syntax.syntax_inputs import SyntaxInputs

from util import english_vocab, sla_nlp, the_cat_sat

SPANS = {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 60, "stride": 45}


def long_doc() -> Doc:
    return Doc.from_docs([the_cat_sat(english_vocab()) for _ in range(40)])  # 280 tokens, 40 sentences


class Recorder:
    def __init__(self, monkeypatch, owner, name):
        self.calls = []
        original = getattr(owner, name)

        def recorded(*args, **kwargs):
            self.calls.append((args, kwargs))
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, recorded)


def test_the_masks_of_a_long_doc_are_computed_once_tree_by_tree(tiny_bert, monkeypatch):
    # spaCy's punctuation rule: token masks equal the inner wordpiece masks
    mask = {"@misc": "spacy-sla.syntax_mask.v1", "punct_rule": "spacy"}
    model = sla_nlp(tiny_bert, get_spans=SPANS, mask=mask).get_pipe("sla_transformer").model
    doc = long_doc()
    expected = [SyntaxMask(punct_rule="spacy")(span) for span in model.attrs["get_spans"]([doc])[0]]
    padded = Recorder(monkeypatch, sla_module, "padded_forest_reach")
    reach = Recorder(monkeypatch, dependency_tree, "tree_reach")
    masks = model.local_masks([doc])
    assert len(masks) == 6
    # the Doc's 40 trees of 7 tokens in one padded group, for all six spans; nothing span by span
    assert [args[0].shape for args, _ in padded.calls] == [(40, 7)]
    assert reach.calls == []
    # the same masks as the builder gives span by span
    for mask, span_mask in zip(masks, expected):
        assert (mask[1:-1, 1:-1] == span_mask).all()


def test_span_by_span_a_long_doc_is_computed_per_sentence_and_its_trees_once(tiny_bert, monkeypatch):
    mask = {"@misc": "spacy-sla.syntax_mask.v1", "punct_rule": "spacy"}
    model = sla_nlp(tiny_bert, get_spans=SPANS, mask=mask).get_pipe("sla_transformer").model
    doc = long_doc()
    expected = [SyntaxMask(punct_rule="spacy")(span) for span in model.attrs["get_spans"]([doc])[0]]
    monkeypatch.setattr(sla_module, "MAX_WHOLE_DOC_TOKENS", 100)  # the Doc (280 tokens) goes span by span
    reach = Recorder(monkeypatch, dependency_tree, "tree_reach")
    tables = Recorder(monkeypatch, dependency_tree, "ancestor_table")
    masks = model.local_masks([doc])
    # each call compares the tokens of one sentence (7) with those of the same sentence
    assert reach.calls and all(len(args[1]) <= 7 and len(args[2]) <= 7 for args, _ in reach.calls)
    # one ancestor table for the Doc, shared by its six spans
    assert len(tables.calls) == 1
    for mask, span_mask in zip(masks, expected):
        assert (mask[1:-1, 1:-1] == span_mask).all()


def test_the_forward_pass_builds_and_copies_the_inputs_once_for_all_layers(tiny_bert, monkeypatch):
    model = sla_nlp(tiny_bert, get_spans=SPANS).get_pipe("sla_transformer").model
    assert len(model.transformer.sla_modules()) == 2
    builds = Recorder(monkeypatch, transformer_model, "build_syntax_inputs")
    copies = Recorder(monkeypatch, SyntaxInputs, "to_torch")
    fills = Recorder(monkeypatch, AttentionBatch, "from_inputs")
    attends = Recorder(monkeypatch, SyntaxAwareAttention, "attend")
    model.predict([long_doc(), the_cat_sat(english_vocab())])
    assert len(builds.calls) == 1 and len(copies.calls) == 1 and len(fills.calls) == 1
    assert len(attends.calls) == 2  # one per layer, each reading the batch
    local_mask = fills.calls[0][0][1]  # from_inputs(attention_mask, local_mask, ...)
    # a torch tensor for the whole batch (6 spans + 1), copied before the layers run
    assert isinstance(local_mask, torch.Tensor) and local_mask.dtype == torch.bool and local_mask.shape[0] == 7
