"""The soft threshold of the authors' released code (spacy-sla.dependency_scale.v1):
the local branch's scores scaled by 0.5 + 0.5 tanh(tau - D), tau predicted per
token and head from the layer input, D the tree distance from the nearest of
i - 1, i, i + 1, with a gate per head."""
import math

import numpy
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.util import registry
from thinc.api import Config

from spacy_sla.layers import SyntaxAwareTransformer
from spacy_sla.syntax.builders import BuilderKind, builder_kind
from spacy_sla.syntax.punctuation import PunctRule
from spacy_sla.syntax.syntax_inputs import build_syntax_inputs
from spacy_sla.variants.dependency_scale import FAR_DISTANCE, DependencyScale, DependencyScaleLayer

from reference import hop_distances_from
from strategies import random_forests
from util import (
    SLA_ARCHITECTURE,
    SPANS,
    batch_inputs,
    english_vocab,
    parsed_doc,
    sla_nlp,
    the_cat_sat,
    tiny_encoder,
    train_textcat,
    trf_output,
    vanilla_output,
)

DEPENDENCY_SCALE = {"@architectures": SLA_ARCHITECTURE, "get_spans": SPANS, "mask": {"@misc": "spacy-sla.dependency_scale.v1", "max_distance": 4}}


def slow_dependency_distances(doc, start, end, max_distance, punct_rule):
    """Straight from the authors' preprocessing: per row the minimum over the
    breadth-first distances from i - 1, i and i + 1, clipped; with the
    token-level "spacy" rule, punctuation columns at 0 ("authors" is decided
    per wordpiece, later)."""
    farther = max_distance + 1
    table = numpy.full((end - start, end - start), farther, dtype=int)
    for i in range(start, end):
        for k in (i - 1, i, i + 1):
            if 0 <= k < len(doc):
                for j, distance in hop_distances_from(doc, k).items():
                    if start <= j < end and distance <= max_distance:
                        table[i - start, j - start] = min(table[i - start, j - start], distance)
    if punct_rule == "spacy":
        for j in range(start, end):
            if doc[j].is_punct:
                table[:, j - start] = 0
    return table


# --- the distance builder -------------------------------------------------------

def test_distances_by_hand():
    # The(0) -> cat(1) -> sat(2) <- on(3) <- mat(5) <- the(4); .(6) -> sat
    doc = the_cat_sat(english_vocab())
    distances = DependencyScale(max_distance=2, punct_rule="none")(doc)
    # row "The": min over The (no left neighbour) and cat; 3 = farther than 2
    assert distances[0].tolist() == [0, 0, 1, 2, 3, 3, 2]
    # row "on": min over sat, on, the
    assert distances[3].tolist() == [2, 1, 0, 0, 0, 1, 1]
    with_punct = DependencyScale(max_distance=2, punct_rule="spacy")(doc)
    assert with_punct[:, 6].tolist() == [0] * 7  # the full stop's column
    assert (with_punct[:, :6] == distances[:, :6]).all()
    assert with_punct.dtype.kind == "i"
    # the authors' rule is decided per wordpiece, where the buckets become wordpiece buckets
    assert (DependencyScale(max_distance=2)(doc) == distances).all()


def test_neighbours_reach_across_sentences_and_farther_pairs_are_clipped():
    # two sentences: a <- b, c <- d (roots b and d)
    doc = parsed_doc(english_vocab(), list("abcd"), [1, 1, 3, 3])
    distances = DependencyScale(max_distance=5)(doc)
    assert distances[0].tolist() == [0, 0, 6, 6]  # a and its neighbour b: no path to c, d
    assert distances[1].tolist() == [0, 0, 0, 1]  # b's right neighbour c is in the second sentence


@settings(max_examples=120, deadline=None)
@given(doc=random_forests(), max_distance=st.integers(0, 5), punct_rule=st.sampled_from(["authors", "spacy", "none"]), data=st.data())
def test_distances_match_breadth_first_search(doc, max_distance, punct_rule, data):
    start = data.draw(st.integers(0, len(doc)))
    end = data.draw(st.integers(start, len(doc)))
    distances = DependencyScale(max_distance=max_distance, punct_rule=punct_rule)(doc[start:end])
    expected = slow_dependency_distances(doc, start, end, max_distance, punct_rule)
    assert distances.shape == expected.shape
    assert (distances == expected).all()


def test_the_builder_comes_from_the_registry_and_checks_its_arguments():
    config = Config().from_str(
        """
        [scale]
        @misc = "spacy-sla.dependency_scale.v1"
        max_distance = 7
        initial_threshold = 4.0
        punct_rule = "none"
        """
    )
    builder = registry.resolve(config)["scale"]
    assert isinstance(builder, DependencyScale) and builder_kind(builder) is BuilderKind.DISTANCE
    assert (builder.max_distance, builder.initial_threshold, builder.punct_rule) == (7, 4.0, PunctRule.NONE)
    assert builder.n_buckets == 10
    defaults = DependencyScale()
    # the authors' search depth, threshold bias and punctuation rule
    assert (defaults.max_distance, defaults.initial_threshold, defaults.punct_rule) == (19, 5.0, PunctRule.AUTHORS)
    with pytest.raises(ValueError, match=r"\[SLA-E007\]"):
        DependencyScale(max_distance=-1)
    with pytest.raises(ValueError, match=r"\[SLA-E014\]"):
        DependencyScale(punct_rule="some")


@pytest.fixture(scope="module")
def model(tiny_bert):
    return sla_nlp(tiny_bert).get_pipe("sla_transformer").model


def test_special_and_punctuation_pieces_are_at_distance_zero(model):
    doc = parsed_doc(english_vocab(), ["she", "was", "walking", "u.s", "."], [2, 2, 2, 2, 2])
    builder = DependencyScale(max_distance=1)
    spans = [doc[:]]
    wordpieces, align = model.tokenize(spans)
    inputs = build_syntax_inputs(
        spans, align, wordpieces.lengths, wordpieces.input_ids.shape[1], local=builder, piece_strings=wordpieces.strings
    )
    assert wordpieces.strings[0] == ["[CLS]", "she", "was", "walk", "##ing", "u", ".", "s", ".", "[SEP]"]
    special = builder.max_distance + 2
    buckets = inputs.local_matrices()[0]
    # [CLS] is at distance 0 from everything: "special", or punctuation (bucket 0)
    assert buckets[0].tolist() == [special] * 6 + [0, special, 0, special]
    # she: itself and its neighbour was reach walking in 1 hop, "u.s" in 2
    # (farther: bucket 2); the "." pieces are punctuation, also inside "u.s"
    assert buckets[1].tolist() == [special, 0, 0, 1, 1, 2, 0, 2, 0, special]
    distances = DependencyScaleLayer(32, 4, builder.max_distance).bucket_distance[torch.from_numpy(buckets).long()]
    assert distances[0].tolist() == [0.0] * 10 and distances[1, 0] == 0.0


# --- in the encoder ---------------------------------------------------------------

def with_dependency_scale(max_distance: int = 3, sla_layers=None) -> SyntaxAwareTransformer:
    builder = DependencyScale(max_distance=max_distance)
    return SyntaxAwareTransformer(tiny_encoder("bert"), sla_layers=sla_layers, local_bias=builder.make_layer_bias).eval()


def test_the_layer_scales_the_logits_and_gates_per_head():
    """The mixed attention of an SLA layer, computed the authors' way: local
    logits = scores * scale, padding masked afterwards; a sigmoid gate per
    token and head."""
    sla = with_dependency_scale(sla_layers=[0])
    module = sla.sla_modules()[0]
    assert module.gate.out_features == 4  # one gate per head
    torch.manual_seed(3)
    with torch.no_grad():
        module.local_bias.threshold.weight.normal_(std=2.0)
        module.local_bias.threshold.bias.fill_(1.0)
        module.gate.weight.normal_(std=0.5)
        # sharper attention than the random model's, so that scaling the logits shows
        module.query.weight.mul_(20.0)
    input_ids, attention_mask = batch_inputs()
    buckets = torch.randint(0, 6, (2, 9, 9))
    with torch.no_grad():
        output = sla(input_ids, attention_mask, local_buckets=buckets, output_attentions=True)
        hidden = sla.transformer.embeddings(input_ids=input_ids)
        query, key = module.split_heads(module.query(hidden)), module.split_heads(module.key(hidden))
        scores = query @ key.transpose(-1, -2) / math.sqrt(module.head_size)
        padding = (1.0 - attention_mask[:, None, None, :].float()) * -10000.0
        global_probs = (scores + padding).softmax(-1)
        tau = module.local_bias.threshold(torch.tanh(module.local_bias.dense(hidden))).transpose(1, 2)
        distance = module.local_bias.bucket_distance[buckets][:, None]
        local_probs = (scores * (0.5 + 0.5 * torch.tanh(tau[..., None] - distance)) + padding).softmax(-1)
        gate = torch.sigmoid(module.gate(hidden)).transpose(1, 2)[..., None]
        expected = gate * local_probs + (1 - gate) * global_probs
    real = attention_mask.bool()[:, None, :, None]
    assert torch.allclose(output.attentions[0] * real, expected * real, atol=1e-5)
    assert (local_probs - global_probs).abs().max() > 1e-2  # the scale does something


def test_without_syntax_the_layers_are_global_and_gates_are_recorded_per_token():
    sla = with_dependency_scale()
    input_ids, attention_mask = batch_inputs()
    special = DependencyScale(max_distance=3).n_buckets - 1
    with torch.no_grad():
        output = sla(input_ids, attention_mask, local_buckets=torch.full((2, 9, 9), special), record_gates=True)
    expected = vanilla_output(tiny_encoder("bert"), input_ids, attention_mask)
    real = attention_mask.bool()[..., None]
    assert torch.allclose(output.last_hidden_state * real, expected * real, atol=1e-5)
    assert output.gates.shape == (3, 2, 9)  # layers, batch, pieces: the mean over the heads' gates


def test_the_scale_gets_gradients():
    sla = with_dependency_scale().train()
    input_ids, attention_mask = batch_inputs()
    sla(input_ids, attention_mask, local_buckets=torch.randint(0, 5, (2, 9, 9))).last_hidden_state.sum().backward()
    for module in sla.sla_modules():
        assert module.local_bias.threshold.weight.grad.abs().sum() > 0
        assert module.local_bias.threshold.bias.grad.abs().sum() > 0
        assert module.gate.weight.grad.abs().sum() > 0
        # W_tau starts at zero (as in the authors' code), so the first step
        # trains the dense layer under it not at all
        assert (module.local_bias.dense.weight.grad == 0).all()


# --- a pipeline -------------------------------------------------------------------

def test_a_pipeline_trains_saves_and_loads(tiny_bert, tmp_path):
    import spacy

    nlp = sla_nlp(tiny_bert, initialize=False, **DEPENDENCY_SCALE)
    model = nlp.get_pipe("sla_transformer").model
    # The textcat's output layer starts at zero, so the first update sends no
    # gradient to the transformer: the second one is its first.
    train_textcat(nlp, n_steps=2)
    names = model.transformer.sla_parameter_names()
    assert any(".local_bias.threshold." in name for name in names) and any(".local_bias.dense." in name for name in names)
    trained = dict(model.transformer.named_parameters())
    # the update moved the thresholds away from their initial 5.0
    assert any((trained[name] != 5.0).any() for name in names if name.endswith(".local_bias.threshold.bias"))
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    loaded_parameters = dict(loaded.get_pipe("sla_transformer").model.transformer.named_parameters())
    for name in names:
        assert torch.equal(trained[name], loaded_parameters[name]), name
    doc_before = nlp(the_cat_sat(nlp.vocab))
    doc_after = loaded(the_cat_sat(loaded.vocab))
    numpy.testing.assert_allclose(trf_output(doc_after), trf_output(doc_before), atol=1e-6)
    assert doc_after.cats == pytest.approx(doc_before.cats, abs=1e-6)


def test_the_scale_follows_the_formula_by_hand():
    module = DependencyScaleLayer(hidden_size=2, n_heads=2, max_distance=2)
    with torch.no_grad():
        module.dense.weight.copy_(torch.eye(2))
        module.dense.bias.zero_()
        module.threshold.weight.copy_(torch.tensor([[2.0, 0.0], [0.0, 4.0]]))
        module.threshold.bias.copy_(torch.tensor([1.0, 0.0]))
    a = math.atanh(0.5)
    hidden = torch.tensor([[[a, 0.0], [0.0, a], [0.0, 0.0]]])
    # tanh(dense(h)) = (0.5, 0), (0, 0.5), (0, 0): tau head 0 = (2, 1, 1), head 1 = (0, 2, 0)
    assert torch.allclose(module.thresholds(hidden)[0], torch.tensor([[2.0, 1.0, 1.0], [0.0, 2.0, 0.0]]), atol=1e-6)
    # buckets 0..2 are distances, 3 is "farther" (unreachable), 4 special (distance 0)
    buckets = torch.tensor([[[0, 1, 3], [1, 0, 2], [4, 4, 0]]])

    def s(x):
        return 0.5 + 0.5 * math.tanh(x)

    expected = torch.tensor(
        [
            [[s(2), s(1), 0.0], [s(0), s(1), s(-1)], [s(1), s(1), s(1)]],
            [[s(0), s(-1), 0.0], [s(1), s(2), s(0)], [s(0), s(0), s(0)]],
        ]
    )
    transform = module(buckets, hidden)
    assert torch.allclose(transform.scale[0], expected, atol=1e-6)
    scores = torch.arange(18.0).view(1, 2, 3, 3) - 9.0
    assert torch.allclose(transform(scores), scores * expected, atol=1e-5)


def test_the_initial_threshold_is_the_same_for_every_token():
    module = DependencyScaleLayer(hidden_size=8, n_heads=3, max_distance=4, initial_threshold=5.0)
    hidden = torch.randn(2, 5, 8)
    assert torch.equal(module.thresholds(hidden), torch.full((2, 3, 5), 5.0))
    buckets = torch.randint(0, 7, (2, 5, 5))
    distance = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, FAR_DISTANCE, 0.0])[buckets]
    expected = (0.5 + 0.5 * torch.tanh(5.0 - distance))[:, None].expand(-1, 3, -1, -1)
    assert torch.allclose(module(buckets, hidden).scale, expected)
    assert module.n_gates == 3


def test_a_span_without_syntax_keeps_its_scores():
    module = DependencyScaleLayer(hidden_size=4, n_heads=2, max_distance=1, initial_threshold=-3.0)
    buckets = torch.full((2, 3, 3), 3)  # all "special": a Doc without a parse
    buckets[1, 0, 0] = 0
    scale = module(buckets, torch.randn(2, 3, 4)).scale
    assert torch.equal(scale[0], torch.ones(2, 3, 3))
    assert (scale[1] < 0.1).all()
