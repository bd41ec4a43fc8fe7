"""SG-Net, LISA, the soft tree-distance bias and the SLA ablations."""
import numpy
import pytest
import spacy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Config

from spacy_sla import AncestorMask, SyntaxMask, ThresholdLogBias, TreeDistanceBias
from spacy_sla.data_classes import IGNORED_TARGET, ParentAttention
from spacy_sla.syntax.builders import BuilderKind, builder_kind
from spacy_sla.syntax.syntax_inputs import build_syntax_inputs

from reference import slow_ancestor_mask, slow_no_neighbour_mask
from strategies import random_forests
from util import (
    SLA_ARCHITECTURE,
    SPANS,
    english_vocab,
    parsed_doc,
    sla_nlp,
    the_cat_sat,
    train_textcat,
    trf_output,
)

SGNET = {"@architectures": SLA_ARCHITECTURE, "get_spans": SPANS, "mask": None, "ancestor_mask": {"@misc": "spacy-sla.ancestor_mask.v1"}}
LISA = {"@architectures": SLA_ARCHITECTURE, "get_spans": SPANS, "mask": None, "parent_attention": {"@misc": "spacy-sla.parent_attention.v1", "layer": 1, "head": 2, "weight": 1.0}}
SOFT_BIAS = {"@architectures": SLA_ARCHITECTURE, "get_spans": SPANS, "mask": {"@misc": "spacy-sla.tree_distance_bias.v1", "max_distance": 3}}
LOG_THRESHOLD = {"@architectures": SLA_ARCHITECTURE, "get_spans": SPANS, "mask": {"@misc": "spacy-sla.threshold_log_bias.v1", "initial_threshold": 2.0, "max_distance": 4}}


def rows(mask):
    return mask.astype(int).tolist()


# --- builders --------------------------------------------------------------

def test_ancestor_mask_by_hand():
    # The(0) -> cat(1) -> sat(2) <- on(3) <- mat(5) <- the(4); .(6) -> sat
    mask = AncestorMask()(the_cat_sat(english_vocab()))
    assert rows(mask) == [
        [1, 1, 1, 0, 0, 0, 0],
        [0, 1, 1, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0, 0],
        [0, 0, 1, 1, 0, 0, 0],
        [0, 0, 1, 1, 1, 1, 0],
        [0, 0, 1, 1, 0, 1, 0],
        [0, 0, 1, 0, 0, 0, 1],
    ]


def test_without_the_neighbour_union_a_token_sees_its_own_neighbourhood_only():
    doc = the_cat_sat(english_vocab())
    mask = SyntaxMask(threshold=1, punct_rule="none", neighbours=False)(doc)
    # vis(k) for m = 1: 0:{0,1} 1:{0,1,2} 2:{1,2,3,6} 3:{2,3,5} 4:{4,5} 5:{3,4,5} 6:{2,6}
    assert rows(mask) == [
        [1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 0, 0, 0, 0],
        [0, 1, 1, 1, 0, 0, 1],
        [0, 0, 1, 1, 0, 1, 0],
        [0, 0, 0, 0, 1, 1, 0],
        [0, 0, 0, 1, 1, 1, 0],
        [0, 0, 1, 0, 0, 0, 1],
    ]


def test_tree_distance_buckets_by_hand():
    doc = the_cat_sat(english_vocab())
    buckets = TreeDistanceBias(max_distance=3)(doc)
    assert buckets[0].tolist() == [0, 1, 2, 3, 4, 4, 3]  # 4 = farther than 3
    assert buckets.dtype.kind == "i" and (buckets == buckets.T).all()
    two_sentences = parsed_doc(english_vocab(), list("abcd"), [1, 1, 3, 3])
    assert TreeDistanceBias(max_distance=2)(two_sentences)[0].tolist() == [0, 1, 3, 3]


def test_the_variants_builders_come_from_the_registry():
    config = Config().from_str(
        """
        [syntax]
        @misc = "spacy-sla.syntax_mask.v1"
        threshold = 2
        punct_rule = "none"
        neighbours = false

        [ancestors]
        @misc = "spacy-sla.ancestor_mask.v1"

        [bias]
        @misc = "spacy-sla.tree_distance_bias.v1"
        max_distance = 5

        [soft]
        @misc = "spacy-sla.threshold_log_bias.v1"
        initial_threshold = 2.5
        max_distance = 6

        [parents]
        @misc = "spacy-sla.parent_attention.v1"
        layer = 1
        head = 3
        weight = 0.5
        """
    )
    resolved = registry.resolve(config)
    assert (resolved["syntax"].threshold, resolved["syntax"].neighbours) == (2, False)
    assert isinstance(resolved["ancestors"], AncestorMask)
    assert resolved["bias"].n_buckets == 8 and builder_kind(resolved["bias"]) is BuilderKind.DISTANCE
    assert isinstance(resolved["soft"], ThresholdLogBias) and resolved["soft"].initial_threshold == 2.5
    assert resolved["parents"] == ParentAttention(layer=1, head=3, weight=0.5)


@settings(max_examples=120, deadline=None)
@given(doc=random_forests(), threshold=st.integers(0, 3), spacy_punct=st.booleans(), data=st.data())
def test_ablation_and_ancestor_masks_match_their_definitions(doc, threshold, spacy_punct, data):
    start = data.draw(st.integers(0, len(doc)))
    end = data.draw(st.integers(start, len(doc)))
    no_neighbours = SyntaxMask(threshold, "spacy" if spacy_punct else "none", neighbours=False)(doc[start:end])
    assert (no_neighbours == slow_no_neighbour_mask(doc, start, end, threshold, spacy_punct)).all()
    assert (AncestorMask()(doc[start:end]) == slow_ancestor_mask(doc, start, end)).all()


# --- wordpiece inputs ---------------------------------------------------------

@pytest.fixture(scope="module")
def model(tiny_bert):
    return sla_nlp(tiny_bert).get_pipe("sla_transformer").model


def syntax_inputs(model, docs, **builders):
    spans = [doc[:] for doc in docs]
    wordpieces, align = model.tokenize(spans)
    return wordpieces, build_syntax_inputs(spans, align, wordpieces.lengths, wordpieces.input_ids.shape[1], **builders)


def test_parent_attention_targets_point_to_the_first_piece_of_the_head(model):
    doc = parsed_doc(english_vocab(), ["she", "was", "walking", "."], [2, 2, 2, 2])
    wordpieces, inputs = syntax_inputs(model, [doc], parents=True)
    assert wordpieces.strings[0] == ["[CLS]", "she", "was", "walk", "##ing", ".", "[SEP]"]
    ignored = IGNORED_TARGET
    # she -> walk, was -> walk, walk (root) -> itself, ##ing: no target, . -> walk
    assert inputs.parent_attention_targets[0].tolist() == [ignored, 3, 3, 3, ignored, 3, ignored]


def test_bucket_and_guide_inputs_at_wordpiece_level(model):
    doc = parsed_doc(english_vocab(), ["she", "was", "walking", "."], [2, 2, 2, 2])
    _, inputs = syntax_inputs(model, [doc], local=TreeDistanceBias(max_distance=1), guide=AncestorMask())
    special = 4  # buckets 0, 1, farther (2), special (3)... n_buckets = 4 -> special = 3
    special = TreeDistanceBias(max_distance=1).n_buckets - 1
    buckets = inputs.local_matrices()[0]
    assert buckets[0].tolist() == [special] * 7
    assert buckets[1].tolist() == [special, 0, 2, 1, 1, 2, special]  # she: 1 hop to walking, 2 to was/.
    guide = inputs.guide_mask[0]
    assert rows(guide[1]) == [1, 1, 0, 1, 1, 0, 1]  # she sees itself and its head walk ##ing
    assert rows(guide[3]) == [1, 0, 0, 1, 1, 0, 1]  # the root sees itself only


def test_unparsed_docs_get_neutral_inputs_under_the_global_policy(model):
    unparsed = Doc(english_vocab(), words=["cat", "sat"])
    builders = dict(local=TreeDistanceBias(max_distance=2), guide=AncestorMask(), parents=True)
    with pytest.raises(ValueError, match=r"\[SLA-E001\]"):
        syntax_inputs(model, [unparsed], **builders)
    with pytest.warns(UserWarning, match=r"\[SLA-W001\] 1 Doc"):
        _, inputs = syntax_inputs(model, [unparsed], on_missing_parse="global", **builders)
    assert (inputs.local_buckets == TreeDistanceBias(max_distance=2).n_buckets - 1).all()
    assert inputs.guide_mask.all()
    assert (inputs.parent_attention_targets == IGNORED_TARGET).all()


# --- pipelines ------------------------------------------------------------------

@pytest.mark.parametrize("model_config", [SGNET, LISA, SOFT_BIAS, LOG_THRESHOLD], ids=["sgnet", "lisa", "softbias", "logthreshold"])
def test_variants_train_save_and_load(tiny_bert, tmp_path, model_config):
    nlp = sla_nlp(tiny_bert, initialize=False, **{k: v for k, v in model_config.items()})
    history = train_textcat(nlp)
    model = nlp.get_pipe("sla_transformer").model
    if model_config is LISA:
        assert all(step["sla_transformer_parent"] > 0 for step in history)
    else:
        assert "sla_transformer_parent" not in history[0]
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    for name in model.transformer.sla_parameter_names():
        before = dict(model.transformer.named_parameters())[name]
        after = dict(loaded.get_pipe("sla_transformer").model.transformer.named_parameters())[name]
        assert torch.equal(before, after), name
    doc_before = nlp(the_cat_sat(nlp.vocab))
    doc_after = loaded(the_cat_sat(loaded.vocab))
    numpy.testing.assert_allclose(trf_output(doc_after), trf_output(doc_before), atol=1e-6)
    assert doc_after.cats == pytest.approx(doc_before.cats, abs=1e-6)


def test_lisa_training_lowers_the_parent_loss(tiny_bert):
    nlp = sla_nlp(tiny_bert, initialize=False, **{**LISA, "parent_attention": {**LISA["parent_attention"], "weight": 5.0}})
    history = train_textcat(nlp, n_steps=40)
    assert history[-1]["sla_transformer_parent"] < 0.6 * history[0]["sla_transformer_parent"]


def test_replace_listeners_keeps_a_v2_model(tiny_bert):
    nlp = sla_nlp(tiny_bert, initialize=False, **SGNET)
    train_textcat(nlp, n_steps=1)
    before = nlp(the_cat_sat(nlp.vocab)).cats
    nlp.replace_listeners("sla_transformer", "textcat", ["model.tok2vec"])
    assert nlp.config["components"]["textcat"]["model"]["tok2vec"]["@architectures"] == "spacy-sla.SLATok2VecTransformer.v1"
    assert nlp(the_cat_sat(nlp.vocab)).cats == pytest.approx(before, abs=1e-6)

