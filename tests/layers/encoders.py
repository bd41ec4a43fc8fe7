"""Encoder outputs with and without syntax-aware attention."""
import copy

import torch

from spacy_sla.layers import SyntaxAwareTransformer


def sla_output(model, input_ids, attention_mask, local_mask, sla_layers=None):
    sla = SyntaxAwareTransformer(copy.deepcopy(model), sla_layers).eval()
    with torch.no_grad():
        return sla(input_ids, attention_mask, local_mask=local_mask).last_hidden_state
