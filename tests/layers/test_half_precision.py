"""Half precision on the CPU: every family SLA wraps, under autocast to
bfloat16 and float16, with local masks at the edges (rows that see only
their own piece, a row that sees no key, padding far beyond a sliding
window): finite outputs and gradients on every computation path, and
outputs and gradients as close to float32 as the unwrapped family's own.
The same on a GPU, with CUDA's float16: test_cuda.py.

The tolerance and why: family_batches.tolerance."""
import pytest
import torch

from spacy_sla.layers import ATTENTION_FAMILIES
from spacy_sla.layers.attention_batch import hidden_offset

from .family_batches import (
    COMPUTATIONS,
    WRAPPED_FAMILIES,
    all_finite,
    autocast_deviations,
    edge_batch,
    family_encoder,
    gradient_error,
    model_type,
    not_finite_on_every_path,
    output_error,
    run,
    sla_encoder,
    tolerance,
    variant,
    variant_inputs,
)

HALF_TYPES = [torch.bfloat16, torch.float16]
HALF_IDS = ["bfloat16", "float16"]


@pytest.fixture(autouse=True)
def one_thread():
    """The tiny encoders' products are too small to share between threads."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def require_cpu_autocast(dtype: torch.dtype) -> None:
    """Skips where this torch build has no CPU autocast to `dtype` (float16
    came to the CPU after bfloat16)."""
    try:
        with torch.autocast("cpu", dtype=dtype):
            torch.nn.functional.linear(torch.ones(1, 2), torch.ones(2, 2))
    except RuntimeError as error:
        pytest.skip(f"no CPU autocast to {dtype} in torch {torch.__version__}: {error}")


def test_the_families_cover_every_model_type_sla_wraps():
    assert {model_type(family) for family in WRAPPED_FAMILIES} == set(ATTENTION_FAMILIES)


@pytest.mark.parametrize("family", WRAPPED_FAMILIES)
def test_every_computation_gives_the_references_float32_outputs_and_gradients_on_the_edge_batch(family):
    """The reference of the comparisons below; a row that sees no key
    locally gets a zero local branch in every computation."""
    for long in (False, True):
        batch = edge_batch(long=long)
        real = batch["attention_mask"].bool()
        expected, expected_grads = run(sla_encoder(family, 8.0, reference=True), batch, torch.float32, True)
        for name in ("default", "materialised"):
            predicted = run(sla_encoder(family, 8.0), batch, torch.float32, False, **COMPUTATIONS[name])[0]
            assert torch.allclose(predicted[real], expected[real], atol=1e-5), (name, long)
            states, grads = run(sla_encoder(family, 8.0), batch, torch.float32, True, **COMPUTATIONS[name])
            assert torch.allclose(states[real], expected[real], atol=1e-5), (name, long)
            assert gradient_error(grads, expected_grads) < 1e-5, (name, long)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=HALF_IDS)
@pytest.mark.parametrize("family", WRAPPED_FAMILIES)
def test_autocast_stays_as_close_to_float32_as_the_unwrapped_family(family, dtype):
    require_cpu_autocast(dtype)
    assert autocast_deviations(family, dtype) == []


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=HALF_IDS)
@pytest.mark.parametrize("family", WRAPPED_FAMILIES)
def test_scores_of_hundreds_stay_finite_on_every_path(family, dtype):
    """Weights 40 times their initial scale spread the scores over
    hundreds: a score added to float16's lowest value then rounds to -inf,
    which made the padding rows beyond ModernBERT's window NaN. Every path
    of prediction, and of training with dropout: the states of every piece
    (padding included: they are the next layer's values) and every gradient
    are finite (the unwrapped family too)."""
    require_cpu_autocast(dtype)
    assert not_finite_on_every_path(family, dtype) == {}


@pytest.mark.parametrize("name", ["softbias", "logthreshold", "depscale", "sgnet", "lisa"])
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=HALF_IDS)
def test_the_variants_modules_stay_finite_and_close_in_half_precision(name, dtype):
    """The local biases from tree distances (one sequence with only the
    "special" bucket), SG-Net's guided layer and LISA's supervised head, on
    BERT."""
    require_cpu_autocast(dtype)
    batch = edge_batch()
    extra = variant_inputs(name, batch)
    sla, plain = sla_encoder("bert", 8.0, **variant(name)), family_encoder("bert", 8.0)
    plain_full, plain_full_grads = run(plain, batch, torch.float32, True)
    plain_half, plain_half_grads = run(plain, batch, dtype, True)
    for gradients in (False, True):
        full, full_grads = run(sla, batch, torch.float32, gradients, extra)
        half, half_grads = run(sla, batch, dtype, gradients, extra)
        assert all_finite(half, half_grads) == []
        assert output_error(half, full, batch) <= tolerance(output_error(plain_half, plain_full, batch), full, dtype)
        if gradients:
            reference = gradient_error(plain_half_grads, plain_full_grads)
            assert gradient_error(half_grads, full_grads) <= 3.0 * reference + torch.finfo(dtype).eps


@pytest.mark.parametrize("dtype", [torch.float32, *HALF_TYPES], ids=["float32", *HALF_IDS])
def test_the_hidden_offset_leaves_room_for_a_score_and_a_second_offset(dtype):
    offset = torch.tensor(hidden_offset(dtype), dtype=dtype)
    large = torch.tensor(torch.finfo(dtype).max / 4, dtype=dtype)
    assert torch.isfinite(offset + offset) and torch.isfinite(offset - large)
    # with the lowest value itself, a score below -16 overflows float16
    if dtype == torch.float16:
        assert torch.isinf(torch.tensor(torch.finfo(dtype).min, dtype=dtype) - torch.tensor(17.0, dtype=dtype))
    # a hidden key gets no weight, and a row whose keys are all hidden stays finite
    scores = torch.tensor([[3.0, -200.0, 0.5], [-300.0, -250.0, -100.0]], dtype=dtype)
    hidden = torch.tensor([[False, True, False], [True, True, True]])
    probabilities = (scores + torch.where(hidden, offset, torch.zeros((), dtype=dtype))).float().softmax(-1)
    assert probabilities[0, 1] == 0.0 and torch.allclose(probabilities[0, [0, 2]].sum(), torch.tensor(1.0))
    assert torch.isfinite(probabilities).all()
