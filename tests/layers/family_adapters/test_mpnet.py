"""MPNetStyleAttention: the encoder's relative position bias is the score
bias of both branches and of the supervised head."""
import copy

import pytest
import torch
from torch.nn import functional as F

from spacy_sla.data_classes import IGNORED_TARGET, ParentAttention
from spacy_sla.layers import SyntaxAwareTransformer

from .position_terms import position_term_tests
from util import batch_inputs, tiny_encoder

FAMILIES = ["mpnet"]


(
    test_with_its_position_term_prediction_gives_the_plain_output_and_the_references,
    test_training_gives_the_references_gradients_with_its_position_term,
    test_a_training_step_changes_the_gates_and_the_position_tables,
) = position_term_tests(FAMILIES)


def test_the_supervised_head_learns_the_attention_of_the_model_with_its_position_term():
    model = tiny_encoder("mpnet")
    input_ids, attention_mask = batch_inputs()
    targets = torch.full((2, 9), IGNORED_TARGET)
    targets[0, :6] = torch.tensor([1, 2, 2, 2, 5, 3])
    targets[1, :4] = torch.tensor([3, 3, 0, 3])
    with torch.no_grad():
        attentions = copy.deepcopy(model)(input_ids, attention_mask=attention_mask, output_attentions=True).attentions
    expected = F.nll_loss(attentions[1][:, 2].log().flatten(0, 1), targets.flatten(), ignore_index=IGNORED_TARGET)
    sla = SyntaxAwareTransformer(model, [], parent_attention=ParentAttention(layer=1, head=2, weight=0.5)).eval()
    output = sla(input_ids, attention_mask, parent_attention_targets=targets)
    assert float(output.parent_attention_loss.detach()) == pytest.approx(0.5 * float(expected), rel=1e-5)
