"""The checks of the families whose scores carry a position term (BERT's
relative_key and relative_key_query, MPNet's relative bias, ALBERT with
relative keys, DeBERTa-v3's disentangled terms, ModernBERT's sliding
window), which each family's test module runs: the plain output with a mask
that hides nothing and the reference's (tests/reference.py) with a
restrictive one, in prediction on either side of MATERIALISE_UP_TO and with
output_attentions; the reference's gradients in training, the position
parameters' included; a training step that moves the gates and the
position tables."""
import copy
from typing import Callable, Dict, List, Tuple

import pytest
import torch

from spacy_sla.layers import SyntaxAwareTransformer

from ..masked_batches import LONG, SHORT, encoder_inputs, reference_encoder
from util import batch_inputs, random_local_mask, tiny_encoder, vanilla_output

# how prediction computes: (width, output_attentions)
PREDICTIONS = {"mixed probabilities": (SHORT, False), "SDPA": (LONG, False), "output_attentions": (SHORT, True)}
WIDTHS = [SHORT, LONG]


def position_parameters(sla: SyntaxAwareTransformer) -> Dict[str, torch.nn.Parameter]:
    return {
        name: parameter
        for name, parameter in sla.named_parameters()
        if any(table in name for table in ("distance_embedding", "relative_attention_bias", "rel_embeddings"))
    }


def check_prediction(family: str, prediction: str) -> None:
    n_pieces, output_attentions = PREDICTIONS[prediction]
    model = tiny_encoder(family)
    inputs = encoder_inputs(n_pieces, restricted=[0, 1, 3])
    input_ids, attention_mask = inputs["input_ids"], inputs["attention_mask"]
    expected = vanilla_output(model, input_ids, attention_mask)
    real = attention_mask.bool()[..., None]
    torch.manual_seed(4)
    sla = SyntaxAwareTransformer(copy.deepcopy(model)).eval()
    with torch.no_grad():
        for module in sla.sla_modules():
            module.gate.weight.normal_(std=0.5)
    everything = torch.ones(len(input_ids), n_pieces, n_pieces, dtype=torch.bool)
    with torch.no_grad():
        for mask in (everything, None):
            output = sla(input_ids, attention_mask, local_mask=mask, output_attentions=output_attentions)
            assert torch.allclose(output.last_hidden_state * real, expected * real, atol=1e-5)
        restricted = sla(**inputs, output_attentions=output_attentions).last_hidden_state
        reference = reference_encoder(sla, model)(**inputs).last_hidden_state
    assert (restricted * real - expected * real).abs().max() > 1e-3
    assert torch.allclose(restricted * real, reference * real, atol=1e-5)


def gradients(sla: SyntaxAwareTransformer, n_pieces: int) -> Dict[str, torch.Tensor]:
    """The gradients of every parameter (gates and position tables
    included) for a restrictive mask, without dropout."""
    inputs = encoder_inputs(n_pieces, restricted=[0, 1, 3])
    output = sla(**inputs).last_hidden_state
    weights = torch.randn(output.shape, generator=torch.Generator().manual_seed(6))
    (output * weights * inputs["attention_mask"][..., None]).sum().backward()
    return {name: parameter.grad for name, parameter in sla.named_parameters() if parameter.grad is not None}


def check_gradients(family: str, n_pieces: int) -> None:
    """TwoBranchAttention's backward gives the reference's (autograd's) gradients."""
    sla = SyntaxAwareTransformer(tiny_encoder(family)).eval()
    with torch.no_grad():
        for module in sla.sla_modules():
            module.gate.weight.normal_(std=0.5, generator=torch.Generator().manual_seed(5))
    reference = reference_encoder(sla, tiny_encoder(family))
    saving, expected = gradients(sla, n_pieces), gradients(reference, n_pieces)
    assert saving.keys() == expected.keys()
    positions = position_parameters(sla)
    assert (positions or family == "modernbert") and set(positions) <= saving.keys()
    assert any(".gate." in name for name in saving)
    for name in saving:
        # float32 sums over different orders: relative to the gradient's scale
        # (ALBERT's shared embedding projection collects gradients of ~100)
        scale = float(expected[name].abs().max())
        torch.testing.assert_close(saving[name], expected[name], rtol=1e-4, atol=1e-5 * max(scale, 1.0), msg=name)
    assert all(saving[name].abs().max() > 0 for name in positions)


def check_training_step(family: str) -> None:
    torch.manual_seed(0)
    sla = SyntaxAwareTransformer(tiny_encoder(family)).train()
    before = {name: parameter.detach().clone() for name, parameter in sla.named_parameters()}
    optimizer = torch.optim.Adam(sla.parameters(), lr=1e-3)  # moves every parameter with a gradient
    input_ids, attention_mask = batch_inputs()
    output = sla(input_ids, attention_mask, local_mask=random_local_mask()).last_hidden_state
    loss = (output * attention_mask[..., None]).pow(2).mean()
    assert torch.isfinite(loss)
    loss.backward()
    optimizer.step()
    changed = {name for name, parameter in sla.named_parameters() if not torch.equal(parameter, before[name])}
    gates = {name for name in before if ".gate." in name}
    assert gates and gates <= changed
    assert set(position_parameters(sla)) <= changed


def position_term_tests(families: List[str], stepped: Tuple[str, ...] = ()) -> Tuple[Callable[..., None], ...]:
    """The three tests of a family module, over its families with a position
    term (and `stepped`: families whose training step is checked too)."""

    @pytest.mark.parametrize("prediction", PREDICTIONS)
    @pytest.mark.parametrize("family", families)
    def test_with_its_position_term_prediction_gives_the_plain_output_and_the_references(family, prediction):
        check_prediction(family, prediction)

    @pytest.mark.parametrize("n_pieces", WIDTHS)
    @pytest.mark.parametrize("family", families)
    def test_training_gives_the_references_gradients_with_its_position_term(family, n_pieces):
        check_gradients(family, n_pieces)

    @pytest.mark.parametrize("family", families + list(stepped))
    def test_a_training_step_changes_the_gates_and_the_position_tables(family):
        check_training_step(family)

    return (
        test_with_its_position_term_prediction_gives_the_plain_output_and_the_references,
        test_training_gives_the_references_gradients_with_its_position_term,
        test_a_training_step_changes_the_gates_and_the_position_tables,
    )
