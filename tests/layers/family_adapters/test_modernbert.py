"""ModernBertStyleAttention: the sliding window of ModernBERT's local layers
is the score bias of both branches; unpadded Flash Attention layers are
refused."""
import copy

import pytest
import torch

from spacy_sla.layers import SyntaxAwareTransformer

from .position_terms import position_term_tests
from util import tiny_encoder

FAMILIES = ["modernbert"]


(
    test_with_its_position_term_prediction_gives_the_plain_output_and_the_references,
    test_training_gives_the_references_gradients_with_its_position_term,
    test_a_training_step_changes_the_gates_and_the_position_tables,
) = position_term_tests(FAMILIES)


def test_modernbert_windows_only_the_layers_the_model_windows_and_refuses_unpadded_layers():
    model = tiny_encoder("modernbert")
    sla = SyntaxAwareTransformer(copy.deepcopy(model))
    windows = [module.window_bias(5, torch.float32, torch.device("cpu")) for module in sla.sla_modules()]
    assert windows[0] is None and windows[2] is None
    assert torch.equal(windows[1][0, 0] == 0, (torch.arange(5)[:, None] - torch.arange(5)[None, :]).abs() <= 2)
    model.config._attn_implementation = "flash_attention_2"
    with pytest.raises(ValueError, match=r"\[SLA-E009\].*flash_attention_2.*\"sdpa\" or \"eager\""):
        SyntaxAwareTransformer(model)
