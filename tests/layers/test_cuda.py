"""The layers and the thinc model on a CUDA GPU (marked gpu: skipped
without one; `python -m performance.gpu_check run` runs them on the device):
the CPU's outputs and gradients in float32, float16 autocast finite and
close at the masks' edges, every mask, gate and bias on the model's device
and in its dtype, no host-device synchronisation per layer, and spaCy's
PyTorch allocator and mixed precision in a training step."""
import math
import warnings
from typing import Callable, Dict, List

import numpy
import pytest
import torch
from torch.nn import functional

from spacy_sla.layers import prediction, syntax_aware_attention
from spacy_sla.layers.two_branch import TwoBranchAttention

from .family_batches import (
    WRAPPED_FAMILIES,
    all_finite,
    autocast_deviations,
    edge_batch,
    gradient_error,
    not_finite_on_every_path,
    run,
    sla_encoder,
    variant,
    variant_inputs,
)
from util import sla_nlp, the_cat_sat, train_textcat, trf_output

pytestmark = pytest.mark.gpu

CUDA = "cuda"
VARIANTS = ["softbias", "logthreshold", "depscale", "sgnet", "lisa"]
# The families, and the variants' modules on BERT ("bert/softbias", ...)
FAMILIES_AND_VARIANTS = WRAPPED_FAMILIES + [f"bert/{name}" for name in VARIANTS]


def encoder_and_inputs(name: str, batch, **options):
    """The SLA encoder of a family or of "bert/VARIANT" on the GPU, and the
    inputs the variant reads besides the batch."""
    family, _, variant_name = name.partition("/")
    if not variant_name:
        return sla_encoder(family, 8.0, **options).to(CUDA), {}
    return sla_encoder(family, 8.0, **variant(variant_name), **options).to(CUDA), variant_inputs(variant_name, batch)


@pytest.fixture(autouse=True)
def float32_products():
    """float32 matrix products in float32 (no TF32), whatever the process set."""
    previous = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = previous


@pytest.mark.parametrize("family", WRAPPED_FAMILIES)
def test_cuda_gives_the_cpu_outputs_and_gradients_in_float32(family):
    """Different kernels sum in a different order: through three layers the
    float32 rounding (1e-7 of the states' size) stays far below 1e-4."""
    cpu_batch, cuda_batch = edge_batch(), edge_batch(CUDA)
    sla = sla_encoder(family, 8.0)
    cpu_predicted, _ = run(sla, cpu_batch, torch.float32, False)
    cpu_states, cpu_grads = run(sla, cpu_batch, torch.float32, True)
    sla.to(CUDA)
    cuda_predicted, _ = run(sla, cuda_batch, torch.float32, False)
    cuda_states, cuda_grads = run(sla, cuda_batch, torch.float32, True)
    real = cpu_batch["attention_mask"].bool()
    assert torch.allclose(cuda_predicted.cpu()[real], cpu_predicted[real], rtol=1e-4, atol=1e-4)
    assert torch.allclose(cuda_states.cpu()[real], cpu_states[real], rtol=1e-4, atol=1e-4)
    assert gradient_error({name: grad.cpu() for name, grad in cuda_grads.items()}, cpu_grads) < 1e-4


@pytest.mark.parametrize("family", WRAPPED_FAMILIES)
def test_float16_autocast_is_finite_and_close_at_the_masks_edges(family):
    """Rows that see only their own piece, a row that sees no key, padding
    beyond a sliding window: finite on every path with scores of hundreds,
    and as close to float32 as the unwrapped family (the tolerance of the
    CPU's test, family_batches.tolerance)."""
    assert not_finite_on_every_path(family, torch.float16, CUDA) == {}
    assert autocast_deviations(family, torch.float16, CUDA) == []


@pytest.mark.parametrize("name", [f"bert/{name}" for name in VARIANTS])
def test_the_variants_modules_are_finite_under_float16_autocast(name):
    batch = edge_batch(CUDA)
    sla, extra = encoder_and_inputs(name, batch)
    for training in (False, True):
        sla.train(training)
        assert all_finite(*run(sla, batch, torch.float16, training, extra)) == [], training


class RecordingFunctional:
    """torch.nn.functional as the SLA attention module sees it, recording
    each SDPA call's query and mask."""

    def __init__(self, calls: List[Dict[str, torch.Tensor]]):
        self.calls = calls

    def __getattr__(self, name: str):
        return getattr(functional, name)

    def scaled_dot_product_attention(self, query, key, value, attn_mask=None, **kwargs):
        self.calls.append({"query": query, "mask": attn_mask})
        return functional.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, **kwargs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
@pytest.mark.parametrize("name", FAMILIES_AND_VARIANTS)
def test_masks_gates_and_biases_are_on_the_models_device_and_in_its_dtype(name, dtype, monkeypatch):
    """In prediction (two SDPA calls) and training (TwoBranchAttention), with
    autocast to float16 and without: an SDPA mask is boolean or of the
    query's dtype, TwoBranchAttention gets the gate and the padding offsets
    in the query's dtype and the local offsets in float32 (they are added to
    its float32 logits) or the query's, and every one of them, every gate
    and every local bias is on the GPU."""
    sdpa_calls: List[Dict[str, torch.Tensor]] = []
    for module in (syntax_aware_attention, prediction):  # the modules of SLA's SDPA calls
        monkeypatch.setattr(module, "F", RecordingFunctional(sdpa_calls))
    two_branch_calls: List[tuple] = []
    original_apply = TwoBranchAttention.apply

    def recording_apply(*args):
        two_branch_calls.append(args)
        return original_apply(*args)

    monkeypatch.setattr(TwoBranchAttention, "apply", recording_apply)
    batch = edge_batch(CUDA)
    sla, extra = encoder_and_inputs(name, batch)  # prediction on a GPU: two SDPA calls
    gates: List[torch.Tensor] = []
    biases: List[torch.Tensor] = []
    hooks = [module.gate.register_forward_hook(lambda module, args, output: gates.append(output)) for module in sla.sla_modules()]
    hooks += [module.local_bias.register_forward_hook(lambda module, args, output: biases.append(getattr(output, "scale", output)))
              for module in sla.sla_modules() if module.local_bias is not None]
    run(sla, batch, dtype, False, extra)
    run(sla, batch, dtype, True, extra)
    for hook in hooks:
        hook.remove()
    assert gates and {gate.dtype for gate in gates} == {dtype}
    assert bool(biases) == ("/soft" in name or name.endswith("depscale"))
    assert all(tensor.device.type == CUDA for tensor in gates + biases)
    assert sdpa_calls or name.endswith("depscale")  # the score transform takes the materialised path
    for call in sdpa_calls:
        mask = call["mask"]
        assert mask.device == call["query"].device and mask.dtype in (torch.bool, call["query"].dtype)
    assert two_branch_calls or name.endswith("depscale")
    for query, key, value, gate, global_offsets, local, empty_rows, dropout in two_branch_calls:
        assert query.dtype == dtype and gate.dtype == dtype and global_offsets.dtype == dtype
        assert local.dtype in (torch.float32, dtype)
        for tensor in (key, value, gate, global_offsets, local, *(() if empty_rows is None else (empty_rows,))):
            assert tensor.device == query.device
        assert empty_rows is None or empty_rows.dtype == torch.bool


def synchronisations(step: Callable[[], object]) -> int:
    """How many host-device synchronisations `step` asks for, as CUDA's sync
    debug mode counts them (item(), bool() of a tensor, copies between host
    and device, nonzero, ...)."""
    torch.cuda.synchronize()
    previous = torch.cuda.get_sync_debug_mode()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode(previous)
    return sum("synchronizing CUDA operation" in str(warning.message) for warning in caught)


def test_the_synchronisation_count_sees_a_synchronisation():
    assert synchronisations(lambda: torch.ones(1, device=CUDA).sum().item()) >= 1
    assert synchronisations(lambda: torch.ones(3, device=CUDA) * 2) == 0


# Made once per forward pass for all layers: whether some row sees no key
# locally (AttentionBatch.empty_local_rows), and slack for one more. A
# synchronisation in each of the three layers would count at least three.
SYNCHRONISATIONS_PER_PASS = 2


@pytest.mark.parametrize("name", FAMILIES_AND_VARIANTS)
def test_the_layers_add_no_host_device_synchronisation_per_layer(name):
    """The synchronisations of a prediction and of a training step (forward
    and backward, with dropout) of the encoder with SLA in every layer (and
    the variant's modules), less those of the same encoder with SLA in no
    layer: at most SYNCHRONISATIONS_PER_PASS, whatever the number of layers
    (ALBERT runs its one layer module three times)."""
    batch = edge_batch(CUDA)
    family = name.partition("/")[0]
    counts = {}
    for layers in ("none", "all"):
        if layers == "none":
            sla, extra = sla_encoder(family, 8.0, sla_layers=[]).to(CUDA), {}
        else:
            sla, extra = encoder_and_inputs(name, batch)
        for training in (False, True):
            sla.train(training)
            run(sla, batch, torch.float16, training, extra)  # lazy initialisation: kernels, cuBLAS handles
            counts[layers, training] = synchronisations(lambda: run(sla, batch, torch.float16, training, extra))
    for training in (False, True):
        assert counts["all", training] - counts["none", training] <= SYNCHRONISATIONS_PER_PASS, counts


def test_spacys_pytorch_allocator_is_honoured_and_mixed_precision_trains(tiny_bert, monkeypatch):
    """With thinc's "pytorch" GPU allocator (what `[training] gpu_allocator
    = "pytorch"` sets), CuPy allocates through torch and its own pool stays
    empty through mixed-precision training steps; the SLA layers compute in
    float16 and the losses are finite."""
    cupy = pytest.importorskip("cupy")
    from thinc.api import require_cpu, require_gpu, set_gpu_allocator

    require_gpu(0)
    try:
        set_gpu_allocator("pytorch")
        cupy_pool = cupy.get_default_memory_pool()
        cupy_pool.free_all_blocks()
        before = torch.cuda.memory_allocated()
        probe = cupy.zeros(1 << 20, dtype="float32")  # 4 MiB through the allocator
        assert torch.cuda.memory_allocated() >= before + 4 * 2**20
        del probe
        query_dtypes = []
        original_apply = TwoBranchAttention.apply
        monkeypatch.setattr(TwoBranchAttention, "apply", lambda *args: query_dtypes.append(args[0].dtype) or original_apply(*args))
        nlp = sla_nlp(tiny_bert, initialize=False, mixed_precision=True)
        history = train_textcat(nlp, n_steps=3)
        assert all(math.isfinite(value) for losses in history for value in losses.values())
        assert query_dtypes and set(query_dtypes) == {torch.float16}
        transformer = nlp.get_pipe("sla_transformer").model.transformer
        assert next(transformer.parameters()).device.type == CUDA
        output = cupy.asnumpy(trf_output(nlp(the_cat_sat(nlp.vocab))))
        assert output.shape[-1] == 32 and numpy.isfinite(output).all()
        assert cupy_pool.used_bytes() == 0 and cupy_pool.total_bytes() == 0
    finally:
        require_cpu()
