"""AttentionPaths: every path computes the same attention; the defaults are
the measured fastest, and a SyntaxAwareTransformer passes its own to each
forward pass."""
from dataclasses import FrozenInstanceError

import pytest
import torch

from spacy_sla.layers import AttentionBatch, AttentionPaths, SyntaxAwareTransformer

from .masked_batches import N_PIECES, N_SEQUENCES, attention_mask, local_mask
from util import tiny_encoder

OTHER_PATHS = [
    AttentionPaths(fused_attention=False),
    AttentionPaths(memory_saving_training=False),
    AttentionPaths(skip_fully_visible=False),
    AttentionPaths(materialise_up_to=0),
    AttentionPaths(materialise_up_to=0, gather_max_share=1.0),
    AttentionPaths(materialise_up_to=0, width_groups_min_saving=-1.0),
    AttentionPaths(materialise_up_to=0, width_groups_min_saving=-1.0, max_width_groups=1),
]


def test_the_defaults():
    paths = AttentionPaths()
    assert (paths.fused_attention, paths.memory_saving_training, paths.skip_fully_visible) == (True, True, True)
    assert (paths.materialise_up_to, paths.gather_max_share) == (128, 0.75)
    assert (paths.max_width_groups, paths.width_groups_min_saving) == (3, 0.15)
    with pytest.raises(FrozenInstanceError):
        paths.materialise_up_to = 0


def encoder_results(paths: AttentionPaths, train: bool):
    """The encoder output, gates in prediction, and with `train` the
    gradients of the gates (no dropout, so that every path draws alike)."""
    torch.manual_seed(0)
    sla = SyntaxAwareTransformer(tiny_encoder("bert"), attention_paths=paths)
    input_ids = torch.randint(5, 50, (N_SEQUENCES, N_PIECES), generator=torch.Generator().manual_seed(1))
    if not train:
        with torch.no_grad():
            output = sla.eval()(input_ids, attention_mask(), local_mask=local_mask([0, 3]), record_gates=True)
        return output.last_hidden_state, output.gates
    for module in sla.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    for module in sla.sla_modules():
        module.dropout_prob = 0.0
    output = sla.train()(input_ids, attention_mask(), local_mask=local_mask([0, 3]))
    (output.last_hidden_state * attention_mask()[..., None]).sum().backward()
    return output.last_hidden_state.detach(), torch.stack([module.gate.weight.grad for module in sla.sla_modules()])


@pytest.mark.parametrize("paths", OTHER_PATHS, ids=repr)
@pytest.mark.parametrize("train", [False, True])
def test_every_path_computes_what_the_defaults_compute(paths, train):
    expected = encoder_results(AttentionPaths(), train)
    results = encoder_results(paths, train)
    real = attention_mask().bool()[..., None]
    assert torch.allclose(results[0] * real, expected[0] * real, atol=1e-5)
    assert torch.allclose(results[1], expected[1], atol=1e-5)


def test_the_encoder_makes_each_batch_with_its_paths(monkeypatch):
    paths = AttentionPaths(materialise_up_to=0)
    made = []
    original = AttentionBatch.from_inputs.__func__

    def recorded(cls, *args, **kwargs):
        made.append(original(cls, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(AttentionBatch, "from_inputs", classmethod(recorded))
    sla = SyntaxAwareTransformer(tiny_encoder("bert"), attention_paths=paths).eval()
    with torch.no_grad():
        sla(torch.randint(5, 50, (N_SEQUENCES, N_PIECES)), attention_mask(), local_mask=local_mask([1]))
    sla.attention_paths = AttentionPaths()
    with torch.no_grad():
        sla(torch.randint(5, 50, (N_SEQUENCES, N_PIECES)), attention_mask(), local_mask=local_mask([1]))
    assert [batch.paths for batch in made] == [paths, AttentionPaths()]
