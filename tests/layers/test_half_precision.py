"""Half precision on the CPU: every family SLA wraps, under autocast to
bfloat16 and float16, with local masks at the edges (rows that see only
their own piece, a row that sees no key, padding far beyond a sliding
window): finite outputs and gradients on every computation path, and
outputs and gradients as close to float32 as the unwrapped family's own.
The same on a GPU, with CUDA's float16: test_cuda.py.

The tolerance: autocast runs the projections and the products with the
values in the half type (8 significant bits in bfloat16, 11 in float16;
machine epsilon 2^-7 and 2^-10) and the softmaxes in float32, so the
unwrapped encoder already moves from its float32 output by a few units of
epsilon times the size of its states. SLA adds a second softmax and a gate
per layer to the same products; its deviation must stay within three times
the unwrapped family's under the same autocast (measured: at most 2.2
times, DistilBERT's bfloat16 prediction), plus one epsilon of the states'
size for families whose own deviation happens to be tiny. An error in the
masking constants, an overflow or a softmax in half precision shows as NaN
or as an error of tenths."""
import pytest
import torch

from spacy_sla.layers import ATTENTION_FAMILIES
from spacy_sla.layers.attention_batch import hidden_offset

from .family_batches import (
    PATHS,
    WRAPPED_FAMILIES,
    all_finite,
    edge_batch,
    family_encoder,
    gradient_error,
    model_type,
    output_error,
    run,
    sla_encoder,
    variant,
    variant_inputs,
)

HALF_TYPES = [torch.bfloat16, torch.float16]
HALF_IDS = ["bfloat16", "float16"]


def require_cpu_autocast(dtype: torch.dtype) -> None:
    """Skips where this torch build has no CPU autocast to `dtype` (float16
    came to the CPU after bfloat16)."""
    try:
        with torch.autocast("cpu", dtype=dtype):
            torch.nn.functional.linear(torch.ones(1, 2), torch.ones(2, 2))
    except RuntimeError as error:
        pytest.skip(f"no CPU autocast to {dtype} in torch {torch.__version__}: {error}")


def tolerance(reference_error: float, states: torch.Tensor, dtype: torch.dtype) -> float:
    return 3.0 * reference_error + torch.finfo(dtype).eps * float(states.abs().max())


def test_the_families_cover_every_model_type_sla_wraps():
    assert {model_type(family) for family in WRAPPED_FAMILIES} == set(ATTENTION_FAMILIES)


# The paths each kind of call can take: prediction mixes the probability
# matrices on the CPU in float32 up to materialise_up_to pieces, else calls
# SDPA twice; training runs TwoBranchAttention or two SDPA calls; the
# materialised probabilities serve both.
PREDICTION_PATHS = ("default", "sdpa-prediction", "materialised")
TRAINING_PATHS = ("default", "materialised", "two-sdpa-training")


@pytest.mark.parametrize("family", WRAPPED_FAMILIES)
def test_every_path_gives_the_same_float32_outputs_and_gradients_on_the_edge_batch(family):
    """The reference of the comparisons below; a row that sees no key
    locally gets a zero local branch on every path."""
    batch = edge_batch()
    real = batch["attention_mask"].bool()
    predicted = {name: run(sla_encoder(family, 8.0, PATHS[name]), batch, torch.float32, False)[0] for name in PREDICTION_PATHS}
    trained = {name: run(sla_encoder(family, 8.0, PATHS[name]), batch, torch.float32, True) for name in TRAINING_PATHS}
    for name in PREDICTION_PATHS:
        assert torch.allclose(predicted[name][real], predicted["default"][real], atol=1e-5), name
    states, grads = trained["default"]
    for name, (other_states, other_grads) in trained.items():
        assert torch.allclose(other_states[real], states[real], atol=1e-5), name
        assert gradient_error(other_grads, grads) < 1e-5, name


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=HALF_IDS)
@pytest.mark.parametrize("family", WRAPPED_FAMILIES)
def test_autocast_stays_as_close_to_float32_as_the_unwrapped_family(family, dtype):
    require_cpu_autocast(dtype)
    batch = edge_batch()
    sla, plain = sla_encoder(family, 8.0), family_encoder(family, 8.0)
    for gradients in (False, True):
        sla_full, sla_full_grads = run(sla, batch, torch.float32, gradients)
        sla_half, sla_half_grads = run(sla, batch, dtype, gradients)
        plain_full, plain_full_grads = run(plain, batch, torch.float32, gradients)
        plain_half, plain_half_grads = run(plain, batch, dtype, gradients)
        assert all_finite(sla_half, sla_half_grads) == []
        error, reference = output_error(sla_half, sla_full, batch), output_error(plain_half, plain_full, batch)
        assert error <= tolerance(reference, sla_full, dtype), (gradients, error, reference)
        if gradients:
            error, reference = gradient_error(sla_half_grads, sla_full_grads), gradient_error(plain_half_grads, plain_full_grads)
            assert error <= 3.0 * reference + torch.finfo(dtype).eps, (error, reference)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=HALF_IDS)
@pytest.mark.parametrize("family", WRAPPED_FAMILIES)
def test_scores_of_hundreds_stay_finite_on_every_path(family, dtype):
    """Weights 40 times their initial scale spread the scores over
    hundreds: a score added to float16's lowest value then rounds to -inf,
    which made the padding rows beyond ModernBERT's window NaN. Every path
    of prediction, and of training with dropout: the states of every piece
    (padding included: they are the next layer's values) and every gradient
    are finite."""
    require_cpu_autocast(dtype)
    batch = edge_batch()
    assert all_finite(*run(family_encoder(family, 40.0), batch, dtype, True)) == []  # the family itself stays finite
    # In half precision prediction calls SDPA on the default paths at any length.
    for name in ("default", "materialised"):
        assert all_finite(*run(sla_encoder(family, 40.0, PATHS[name]), batch, dtype, False)) == [], name
    for name in TRAINING_PATHS:
        torch.manual_seed(0)
        assert all_finite(*run(sla_encoder(family, 40.0, PATHS[name]).train(), batch, dtype, True)) == [], name


@pytest.mark.parametrize("name", ["softbias", "softthreshold", "depscale", "sgnet", "lisa"])
@pytest.mark.parametrize("dtype", HALF_TYPES, ids=HALF_IDS)
def test_the_variants_modules_stay_finite_and_close_in_half_precision(name, dtype):
    """The local biases from tree distances (one sequence with only the
    "special" bucket), SG-Net's guided layer and LISA's supervised head, on
    BERT."""
    require_cpu_autocast(dtype)
    batch = edge_batch()
    extra = variant_inputs(name, batch)
    sla, plain = sla_encoder("bert", 8.0, **variant(name)), family_encoder("bert", 8.0)
    for gradients in (False, True):
        full, full_grads = run(sla, batch, torch.float32, gradients, extra)
        half, half_grads = run(sla, batch, dtype, gradients, extra)
        assert all_finite(half, half_grads) == []
        reference = output_error(run(plain, batch, dtype, False)[0], run(plain, batch, torch.float32, False)[0], batch)
        assert output_error(half, full, batch) <= tolerance(reference, full, dtype)
        if gradients:
            assert gradient_error(half_grads, full_grads) <= 0.05


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
