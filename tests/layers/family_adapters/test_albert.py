"""AlbertStyleAttention: ALBERT's layer module, run at several depths,
gets one gate, and its relative keys are unscaled."""
import torch
from transformers import AlbertConfig, AlbertModel

from spacy_sla.layers import SyntaxAwareTransformer
from spacy_sla.layers.family_adapters import AlbertStyleAttention

from .position_terms import position_term_tests
from util import ENCODER_SIZES, batch_inputs, random_local_mask, tiny_encoder

FAMILIES = ["albert-relative_key_query"]


(
    test_with_its_position_term_prediction_gives_the_plain_output_and_the_references,
    test_training_gives_the_references_gradients_with_its_position_term,
    test_a_training_step_changes_the_gates_and_the_position_tables,
) = position_term_tests(FAMILIES, stepped=("albert",))


def test_albert_gates_its_shared_layer_once_and_records_a_gate_per_depth():
    model = tiny_encoder("albert")
    assert model.config.num_hidden_layers == 3 and len(AlbertStyleAttention.layers(model)) == 1
    sla = SyntaxAwareTransformer(model).eval()
    assert len(sla.sla_modules()) == 1
    assert [name for name in sla.sla_parameter_names()] == [
        "transformer.encoder.albert_layer_groups.0.albert_layers.0.attention.gate.weight",
        "transformer.encoder.albert_layer_groups.0.albert_layers.0.attention.gate.bias",
    ]
    depths = []
    sla.sla_modules()[0].gate.register_forward_hook(lambda module, inputs, output: depths.append(torch.sigmoid(output[..., 0])))
    input_ids, attention_mask = batch_inputs()
    with torch.no_grad():
        output = sla(input_ids, attention_mask, local_mask=random_local_mask(), record_gates=True)
    # one row, as sla_layers has one module: the mean over the three depths,
    # whose inputs, and so gates, differ
    assert len(depths) == 3 and not torch.allclose(depths[0], depths[1])
    assert output.gates.shape == (1, 2, 9)
    assert torch.allclose(output.gates[0], torch.stack(depths).mean(0))


def test_albert_with_a_module_per_depth_gates_each():
    model = AlbertModel(AlbertConfig(hidden_size=32, embedding_size=16, num_hidden_groups=3, **ENCODER_SIZES)).eval()
    sla = SyntaxAwareTransformer(model, sla_layers=[0, 2]).eval()
    assert len(AlbertStyleAttention.layers(model)) == 3 and len(sla.sla_modules()) == 2
    input_ids, attention_mask = batch_inputs()
    with torch.no_grad():
        output = sla(input_ids, attention_mask, local_mask=random_local_mask(), record_gates=True)
    assert output.gates.shape == (2, 2, 9)
