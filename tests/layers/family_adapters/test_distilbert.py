"""DistilBertStyleAttention: DistiBERT's attention module holds its output
projection, which runs after the branches are mixed."""
import copy

import pytest
import torch

from spacy_sla.layers import SyntaxAwareTransformer

from ..masked_batches import LONG, SHORT, encoder_inputs, reference_encoder
from util import tiny_encoder, vanilla_output


@pytest.mark.parametrize("n_pieces", [SHORT, LONG])
def test_the_output_projection_follows_the_mixed_branches(n_pieces):
    model = tiny_encoder("distilbert")
    inputs = encoder_inputs(n_pieces, restricted=[0, 3])
    sla = SyntaxAwareTransformer(copy.deepcopy(model)).eval()
    real = inputs["attention_mask"].bool()[..., None]
    with torch.no_grad():
        output = sla(**inputs).last_hidden_state
        reference = reference_encoder(sla, model)(**inputs).last_hidden_state
        plain = vanilla_output(model, inputs["input_ids"], inputs["attention_mask"])
    assert torch.allclose(output * real, reference * real, atol=1e-5)
    assert (output * real - plain * real).abs().max() > 1e-3
