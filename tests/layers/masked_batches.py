"""Batches of four sequences whose local masks hide real pieces only in the
sequences chosen, at a width production predicts from the mixed
probability matrices (SHORT) and at one it predicts with fused SDPA calls
(LONG), one SLA layer to attend over them (SITUATIONS: one batch and layer
per computation), the reference it is checked against
(tests/reference.py), and encoders and pipelines that compute by the
reference: the inputs of the tests of the attention's computations."""
import copy
from typing import Dict, List, Optional, Sequence, Tuple

import pytest
import torch
from spacy.language import Language
from spacy_transformers.data_classes import HFObjects
from spacy_transformers.layers.transformer_model import set_pytorch_transformer
from torch.nn import functional as F

from spacy_sla.layers import AttentionBatch, SyntaxAwareAttention, SyntaxAwareTransformer
from spacy_sla.layers.prediction_schedule import MATERIALISE_UP_TO
from spacy_sla.variants.tree_distance_bias import TreeDistanceBiasLayer

from reference import reference_gated_attention, two_branch_attention
from util import sla_nlp

N_SEQUENCES, N_HEADS, HEAD_SIZE = 4, 4, 8
HIDDEN = N_HEADS * HEAD_SIZE
SHORT = 9
LONG = MATERIALISE_UP_TO + 8
N_BUCKETS = 5


def lengths_of(n_pieces: int, varied: bool = True) -> List[int]:
    """Four lengths: the second and fourth padded (with `varied`), so that
    the restricted sequences differ in width; all n_pieces otherwise."""
    return [n_pieces, (2 * n_pieces) // 3, n_pieces, n_pieces // 2] if varied else [n_pieces] * N_SEQUENCES


class SdpaCalls:
    """Records (batch, width) of every fused attention call."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.shapes: List[Tuple[int, int]] = []
        original = F.scaled_dot_product_attention

        def recorded(query, *args, **kwargs):
            self.shapes.append((query.shape[0], query.shape[2]))
            return original(query, *args, **kwargs)

        monkeypatch.setattr(F, "scaled_dot_product_attention", recorded)

    @property
    def batch_sizes(self) -> List[int]:
        return [size for size, _ in self.shapes]


def attention_mask(lengths: Sequence[int]) -> torch.Tensor:
    mask = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for i, length in enumerate(lengths):
        mask[i, :length] = 1
    return mask


def local_mask(restricted: Sequence[int], lengths: Sequence[int], seed: int = 2) -> torch.Tensor:
    """Random masks showing each piece itself that hide real pieces from
    each other only in the `restricted` sequences; every other sequence
    hides nothing but padding pairs."""
    n_pieces = max(lengths)
    generator = torch.Generator().manual_seed(seed)
    mask = (torch.rand(len(lengths), n_pieces, n_pieces, generator=generator) < 0.4) | torch.eye(n_pieces, dtype=torch.bool)
    for i, length in enumerate(lengths):
        if i not in restricted:
            mask[i, :length, :length] = True
        assert bool(mask[i, :length, :length].all()) != (i in restricted)
    return mask


def buckets(n_pieces: int, seed: int = 4) -> torch.Tensor:
    return torch.randint(0, N_BUCKETS, (N_SEQUENCES, n_pieces, n_pieces), generator=torch.Generator().manual_seed(seed))


def position_term(n_pieces: int) -> torch.Tensor:
    """A position term of the scores, (1, heads, n, n), as the score-bias families pass."""
    return torch.randn(1, N_HEADS, n_pieces, n_pieces, generator=torch.Generator().manual_seed(6))


def make_module(bias: bool = False, dropout: float = 0.0) -> SyntaxAwareAttention:
    """An SLA layer with a boolean mask (or with `bias`, a TreeDistanceBiasLayer
    of spread values), its gates differing between tokens."""
    torch.manual_seed(7)
    local_bias = None
    if bias:
        local_bias = TreeDistanceBiasLayer(N_HEADS, N_BUCKETS)
        torch.nn.init.normal_(local_bias.bias, std=2.0)
    module = SyntaxAwareAttention(HIDDEN, N_HEADS, dropout, local_bias=local_bias)
    with torch.no_grad():
        module.gate.weight.normal_(std=0.5)
        module.gate.bias.fill_(0.2)
    return module.eval()


def make_inputs(n_pieces: int, grad: bool = False, n_sequences: int = N_SEQUENCES):
    generator = torch.Generator().manual_seed(3)
    hidden = torch.randn(n_sequences, n_pieces, HIDDEN, generator=generator)
    qkv = [torch.randn(n_sequences, N_HEADS, n_pieces, HEAD_SIZE, generator=generator) for _ in range(3)]
    if grad:
        qkv = [tensor.requires_grad_() for tensor in qkv]
    return hidden, qkv


def attend(module: SyntaxAwareAttention, batch: AttentionBatch, grad: bool = False, **options):
    """The context of the module's attend on the batch (options: those of
    attend), and the queries, keys and values it attended over."""
    hidden, qkv = make_inputs(batch.global_mask.shape[-1], grad, len(batch.global_mask))
    with torch.set_grad_enabled(grad):
        context, _ = module.attend(batch, hidden, *qkv, **options)
    return context, qkv


def reference_context(module: SyntaxAwareAttention, batch: AttentionBatch, qkv, score_bias=None) -> torch.Tensor:
    """What the module's attend should give, from tests/reference.py, with
    the module's own gate and local input."""
    hidden, _ = make_inputs(batch.global_mask.shape[-1], n_sequences=len(batch.global_mask))
    gate = torch.sigmoid(module.gate(hidden)).transpose(1, 2)[..., None]
    local = module.local_input(batch, qkv[0].dtype, hidden)
    context, _ = two_branch_attention(*qkv, batch.global_mask, gate, local, score_bias)
    return module.merge_heads(context)


def reference_encoder(sla: SyntaxAwareTransformer, model: torch.nn.Module, **options) -> SyntaxAwareTransformer:
    """The encoder `model` (unwrapped) wrapped as sla was (options:
    SyntaxAwareTransformer's), with sla's weights, its layers computing
    their local branches by the reference."""
    reference = SyntaxAwareTransformer(copy.deepcopy(model), gated_attention=reference_gated_attention, **options)
    reference.load_state_dict(sla.state_dict())
    return reference.train(sla.training)


def computing_by_reference(model, hf_objects: HFObjects) -> None:
    """SLATransformerModel's set_transformer hook, wrapping the encoder with
    layers that compute by the reference."""
    sla = SyntaxAwareTransformer(
        hf_objects.transformer, **model.settings.transformer_options(), gated_attention=reference_gated_attention
    )
    set_pytorch_transformer(model, HFObjects(hf_objects.tokenizer, sla, hf_objects.vocab_file_contents))


def reference_pipeline(production: Language, model_path, **model_config) -> Language:
    """A pipeline like `production` (sla_nlp(model_path, **model_config)),
    with its weights, whose layers compute by the reference."""
    nlp = sla_nlp(model_path, initialize=False, **model_config)
    nlp.get_pipe("sla_transformer").model.attrs["set_transformer"] = computing_by_reference
    nlp.initialize()
    weights = production.get_pipe("sla_transformer").model.transformer.state_dict()
    nlp.get_pipe("sla_transformer").model.transformer.load_state_dict(weights)
    return nlp


def encoder_inputs(n_pieces: int, restricted: Sequence[int], varied: bool = True) -> Dict[str, Optional[torch.Tensor]]:
    """input_ids, attention_mask and local_mask of four sequences for a tiny encoder."""
    lengths = lengths_of(n_pieces, varied)
    input_ids = torch.randint(5, 50, (N_SEQUENCES, n_pieces), generator=torch.Generator().manual_seed(1))
    return {"input_ids": input_ids, "attention_mask": attention_mask(lengths), "local_mask": local_mask(restricted, lengths)}


ALL = list(range(N_SEQUENCES))
# id: (width, varied lengths, restricted sequences, a row that sees no key,
# bias variant, position term, the (batch, width) of every SDPA call of prediction)
SITUATIONS = {
    "short, nothing hidden": (SHORT, True, [], False, False, False, [(4, SHORT)]),
    "short, some hidden": (SHORT, True, [2], False, False, False, []),
    "short, all hidden": (SHORT, True, ALL, False, False, False, []),
    "short, a row sees no key": (SHORT, True, [1], True, False, False, []),
    "short, bias": (SHORT, True, None, False, True, False, []),
    "short, position term": (SHORT, True, [1], False, False, True, []),
    "short, position term and bias": (SHORT, True, None, False, True, True, []),
    "long, nothing hidden": (LONG, False, [], False, False, False, [(4, LONG)]),
    "long, one gathered": (LONG, False, [2], False, False, False, [(4, LONG), (1, LONG)]),
    "long, three gathered": (LONG, False, [0, 1, 3], False, False, False, [(4, LONG), (3, LONG)]),
    "long, all hidden": (LONG, False, ALL, False, False, False, [(4, LONG), (4, LONG)]),
    "long, by width": (LONG, True, ALL, False, False, False, [(4, LONG), (1, LONG // 2), (1, 2 * LONG // 3), (2, LONG)]),
    "long, a row sees no key": (LONG, False, [1], True, False, False, [(4, LONG), (1, LONG)]),
    "long, bias": (LONG, True, None, False, True, False, [(4, LONG), (4, LONG)]),
    "long, position term": (LONG, True, [1, 2], False, False, True, [(4, LONG), (4, LONG)]),
    "long, position term and bias": (LONG, True, None, False, True, True, [(4, LONG), (4, LONG)]),
}


def situation(name: str, record_gates: bool = False) -> Tuple[SyntaxAwareAttention, AttentionBatch, Optional[torch.Tensor]]:
    """The layer, the batch and the position term (or None) of a situation."""
    n_pieces, varied, restricted, empty_row, bias, position, _ = SITUATIONS[name]
    lengths = lengths_of(n_pieces, varied)
    if bias:
        batch = AttentionBatch.from_inputs(attention_mask(lengths), local_buckets=buckets(n_pieces), record_gates=record_gates)
    else:
        mask = local_mask(restricted, lengths)
        if empty_row:  # no builder makes one; SDPA gives the row's local branch zeros
            mask[restricted[0], 2] = False
        batch = AttentionBatch.from_inputs(attention_mask(lengths), mask, record_gates=record_gates)
    return make_module(bias), batch, position_term(n_pieces) if position else None


def real_rows(batch: AttentionBatch) -> torch.Tensor:
    """(batch, n, 1): the real pieces' rows (padding rows are never read)."""
    return batch.global_mask[:, 0, 0, :, None]
