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

from spacy_sla import AncestorMask, SoftThreshold, SyntaxMask, TreeDistanceBuckets
from spacy_sla.data_classes import IGNORED_TARGET, ParentAttention
from spacy_sla.layers import SyntaxAwareTransformer
from spacy_sla.layers.local_bias import DistanceBucketBias, SoftThresholdLogBias
from spacy_sla.syntax_inputs import build_syntax_inputs, expand_to_pieces

from reference import slow_ancestor_mask, slow_no_neighbour_mask
from strategies import random_forests
from util import (
    SPANS,
    V2,
    batch_inputs,
    english_vocab,
    parsed_doc,
    random_local_mask,
    sla_nlp,
    the_cat_sat,
    tiny_encoder,
    train_textcat,
    trf_output,
    vanilla_output,
)

SGNET = {"@architectures": V2, "get_spans": SPANS, "mask": None, "syntax_guided_mask": {"@misc": "spacy-sla.ancestor_mask.v1"}}
LISA = {"@architectures": V2, "get_spans": SPANS, "mask": None, "parent_attention": {"@misc": "spacy-sla.parent_attention.v1", "layer": 1, "head": 2, "weight": 1.0}}
SOFT_BIAS = {"@architectures": V2, "get_spans": SPANS, "mask": {"@misc": "spacy-sla.tree_distance_bias.v1", "max_distance": 3}}
SOFT_THRESHOLD = {"@architectures": V2, "get_spans": SPANS, "mask": {"@misc": "spacy-sla.soft_threshold.v1", "initial_threshold": 2.0, "max_distance": 4}}


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
    mask = SyntaxMask(threshold=1, punct_visible=False, neighbours=False)(doc)
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
    buckets = TreeDistanceBuckets(max_distance=3)(doc)
    assert buckets[0].tolist() == [0, 1, 2, 3, 4, 4, 3]  # 4 = farther than 3
    assert buckets.dtype.kind == "i" and (buckets == buckets.T).all()
    two_sentences = parsed_doc(english_vocab(), list("abcd"), [1, 1, 3, 3])
    assert TreeDistanceBuckets(max_distance=2)(two_sentences)[0].tolist() == [0, 1, 3, 3]


def test_v2_builders_come_from_the_registry():
    config = Config().from_str(
        """
        [syntax]
        @misc = "spacy-sla.syntax_mask.v2"
        threshold = 2
        punct_visible = false
        neighbours = false

        [ancestors]
        @misc = "spacy-sla.ancestor_mask.v1"

        [bias]
        @misc = "spacy-sla.tree_distance_bias.v1"
        max_distance = 5

        [soft]
        @misc = "spacy-sla.soft_threshold.v1"
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
    assert resolved["bias"].n_buckets == 8 and resolved["bias"].kind == "distance"
    assert isinstance(resolved["soft"], SoftThreshold) and resolved["soft"].initial_threshold == 2.5
    assert resolved["parents"] == ParentAttention(layer=1, head=3, weight=0.5)


@settings(max_examples=120, deadline=None)
@given(doc=random_forests(), threshold=st.integers(0, 3), punct_visible=st.booleans(), data=st.data())
def test_ablation_and_ancestor_masks_match_their_definitions(doc, threshold, punct_visible, data):
    start = data.draw(st.integers(0, len(doc)))
    end = data.draw(st.integers(start, len(doc)))
    no_neighbours = SyntaxMask(threshold, punct_visible, neighbours=False)(doc[start:end])
    assert (no_neighbours == slow_no_neighbour_mask(doc, start, end, threshold, punct_visible)).all()
    assert (AncestorMask()(doc[start:end]) == slow_ancestor_mask(doc, start, end)).all()


# --- wordpiece inputs ---------------------------------------------------------

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

@pytest.fixture(scope="module")
def model(tiny_bert):
    return sla_nlp(tiny_bert).get_pipe("sla_transformer").model


def syntax_inputs(model, docs, **builders):
    spans = [doc[:] for doc in docs]
    wordpieces, align = model.tokenize(spans)
    return wordpieces, build_syntax_inputs(spans, align, wordpieces.lengths, wordpieces.input_ids.shape[1], **builders)


def test_parent_targets_point_to_the_first_piece_of_the_head(model):
    doc = parsed_doc(english_vocab(), ["she", "was", "walking", "."], [2, 2, 2, 2])
    wordpieces, inputs = syntax_inputs(model, [doc], parents=True)
    assert wordpieces.strings[0] == ["[CLS]", "she", "was", "walk", "##ing", ".", "[SEP]"]
    ignored = IGNORED_TARGET
    # she -> walk, was -> walk, walk (root) -> itself, ##ing: no target, . -> walk
    assert inputs.parent_targets[0].tolist() == [ignored, 3, 3, 3, ignored, 3, ignored]


def test_bucket_and_guide_inputs_at_wordpiece_level(model):
    doc = parsed_doc(english_vocab(), ["she", "was", "walking", "."], [2, 2, 2, 2])
    _, inputs = syntax_inputs(model, [doc], local=TreeDistanceBuckets(max_distance=1), guide=AncestorMask())
    special = 4  # buckets 0, 1, farther (2), special (3)... n_buckets = 4 -> special = 3
    special = TreeDistanceBuckets(max_distance=1).n_buckets - 1
    buckets = inputs.local_matrices()[0]
    assert buckets[0].tolist() == [special] * 7
    assert buckets[1].tolist() == [special, 0, 2, 1, 1, 2, special]  # she: 1 hop to walking, 2 to was/.
    guide = inputs.guide_mask[0]
    assert rows(guide[1]) == [1, 1, 0, 1, 1, 0, 1]  # she sees itself and its head walk ##ing
    assert rows(guide[3]) == [1, 0, 0, 1, 1, 0, 1]  # the root sees itself only


def test_unparsed_docs_get_neutral_inputs_under_the_global_policy(model):
    unparsed = Doc(english_vocab(), words=["cat", "sat"])
    builders = dict(local=TreeDistanceBuckets(max_distance=2), guide=AncestorMask(), parents=True)
    with pytest.raises(ValueError, match=r"\[E001\]"):
        syntax_inputs(model, [unparsed], **builders)
    with pytest.warns(UserWarning, match=r"\[W001\] 1 Doc"):
        _, inputs = syntax_inputs(model, [unparsed], on_missing_parse="global", **builders)
    assert (inputs.local_buckets == TreeDistanceBuckets(max_distance=2).n_buckets - 1).all()
    assert inputs.guide_mask.all()
    assert (inputs.parent_targets == IGNORED_TARGET).all()


# --- modules ------------------------------------------------------------------

def test_bias_modules_follow_their_formulas():
    buckets = torch.tensor([[[0, 1], [4, 5]]])
    table = DistanceBucketBias(n_heads=2, n_buckets=6)
    assert torch.equal(table(buckets), torch.zeros(1, 2, 2, 2))
    with torch.no_grad():
        table.bias.copy_(torch.arange(12.0).view(2, 6))
    assert table(buckets)[0, 1].tolist() == [[6.0, 7.0], [10.0, 11.0]]
    soft = SoftThresholdLogBias(n_heads=2, max_distance=3, initial_threshold=2.0)
    # buckets 0..3 are distances, 4 is "farther" (distance 4), 5 special (distance 0)
    expected = torch.log(0.5 + 0.5 * torch.tanh(2.0 - torch.tensor([[0.0, 1.0], [4.0, 0.0]])))
    assert torch.allclose(soft(buckets)[0, 0], expected, atol=1e-6)


def test_a_zero_bias_starts_from_global_attention():
    model = tiny_encoder("bert")
    input_ids, attention_mask = batch_inputs()
    buckets = torch.randint(0, 5, (2, 9, 9))
    sla = SyntaxAwareTransformer(model, local_bias=lambda config: DistanceBucketBias(config.num_attention_heads, 5)).eval()
    with torch.no_grad():
        output = sla(input_ids, attention_mask, local_buckets=buckets).last_hidden_state
    expected = vanilla_output(tiny_encoder("bert"), input_ids, attention_mask)
    real = attention_mask.bool()[..., None]
    assert torch.allclose(output * real, expected * real, atol=1e-5)
    with torch.no_grad():
        for module in sla.sla_modules():
            module.local_bias.bias.normal_(std=3.0)
        moved = sla(input_ids, attention_mask, local_buckets=buckets).last_hidden_state
    assert (moved - output).abs().max() > 1e-3


def test_the_syntax_guided_layer_mixes_with_the_encoder_output():
    input_ids, attention_mask = batch_inputs()
    sgnet = SyntaxAwareTransformer(tiny_encoder("bert"), sla_layers=[], syntax_guided=True).eval()
    assert sgnet.sla_modules() == [] and sgnet.sla_parameter_names()[0].startswith("guided_layer.")
    guide = random_local_mask()
    with torch.no_grad():
        mixed = sgnet(input_ids, attention_mask, guide_mask=guide).last_hidden_state
        encoder = vanilla_output(sgnet.transformer, input_ids, attention_mask)
        visible = (guide | ~attention_mask.bool()[:, :, None])[:, None] & attention_mask.bool()[:, None, None, :]
        additive = torch.zeros(visible.shape).masked_fill(~visible, torch.finfo(torch.float32).min)
        guided = sgnet.guided_layer.layer(encoder, attention_mask=additive)[0]
        assert torch.allclose(mixed, 0.5 * encoder + 0.5 * guided, atol=1e-5)
        unguided = sgnet(input_ids, attention_mask).last_hidden_state
        assert (unguided - mixed).abs().max() > 1e-4
        sgnet.guided_layer.mix_logits.copy_(torch.tensor([50.0, -50.0]))
        only_encoder = sgnet(input_ids, attention_mask, guide_mask=guide).last_hidden_state
    assert torch.allclose(only_encoder, encoder, atol=1e-5)


def test_the_parent_loss_is_the_cross_entropy_of_the_supervised_head():
    input_ids, attention_mask = batch_inputs()
    lisa = SyntaxAwareTransformer(
        tiny_encoder("bert"), sla_layers=[], parent_attention=ParentAttention(layer=1, head=2, weight=0.5)
    ).train()
    for module in lisa.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    lisa.transformer.config.attention_probs_dropout_prob = 0.0
    for module in lisa.modules():
        if hasattr(module, "dropout_prob"):
            module.dropout_prob = 0.0
    targets = torch.full((2, 9), IGNORED_TARGET)
    targets[0, 1:4] = torch.tensor([2, 2, 2])
    targets[1, 1:3] = torch.tensor([1, 4])
    output = lisa(input_ids, attention_mask, parent_targets=targets, output_attentions=True)
    probs = output.attentions[1][:, 2]  # layer 1, head 2
    chosen = [probs[0, 1, 2], probs[0, 2, 2], probs[0, 3, 2], probs[1, 1, 1], probs[1, 2, 4]]
    expected = -torch.log(torch.stack(chosen)).mean()
    assert torch.allclose(output.auxiliary_loss, 0.5 * expected, atol=1e-5)
    output.auxiliary_loss.backward()
    query = lisa.transformer.encoder.layer[1].attention.self.query.weight
    assert query.grad is not None and query.grad.abs().sum() > 0
    assert lisa.transformer.encoder.layer[2].attention.self.query.weight.grad is None


def test_invalid_parent_attention_is_refused():
    with pytest.raises(ValueError, match=r"\[E012\]"):
        SyntaxAwareTransformer(tiny_encoder("bert"), parent_attention=ParentAttention(layer=5))
    with pytest.raises(ValueError, match=r"\[E012\]"):
        SyntaxAwareTransformer(tiny_encoder("bert"), parent_attention=ParentAttention(head=4))
    middle = SyntaxAwareTransformer(tiny_encoder("bert"), sla_layers=[], parent_attention=ParentAttention())
    assert middle.parent_attention.layer == 1  # 3 layers


# --- pipelines ------------------------------------------------------------------

@pytest.mark.parametrize("model_config", [SGNET, LISA, SOFT_BIAS, SOFT_THRESHOLD], ids=["sgnet", "lisa", "softbias", "softthreshold"])
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
    assert nlp.config["components"]["textcat"]["model"]["tok2vec"]["@architectures"] == "spacy-sla.SLATok2VecTransformer.v2"
    assert nlp(the_cat_sat(nlp.vocab)).cats == pytest.approx(before, abs=1e-6)

