"""Tiny encoders of every family SLA wraps and a batch whose local masks
sit at the edges of half precision: the inputs of the half-precision tests
on the CPU (test_half_precision.py) and of the GPU tests (test_cuda.py)."""
from contextlib import nullcontext
from typing import Dict, List, Optional, Tuple

import torch
from transformers import AutoConfig, AutoModel

from spacy_sla.data_classes import IGNORED_TARGET, ParentAttention
from spacy_sla.layers import SyntaxAwareTransformer
from spacy_sla.variants.dependency_scale import DependencyScaleLayer
from spacy_sla.variants.threshold_log_bias import ThresholdLogBiasLayer
from spacy_sla.variants.tree_distance_bias import TreeDistanceBiasLayer

from reference import reference_gated_attention
from util import ENCODER_SIZES, tiny_encoder

# Every model type of ATTENTION_FAMILIES, and BERT with a position term in
# its scores (its relative_key_query embeddings); test_half_precision checks
# that the list stays complete.
WRAPPED_FAMILIES = [
    "bert", "bert-relative_key_query", "roberta", "xlm-roberta", "camembert", "electra", "distilbert", "mpnet",
    "albert", "deberta-v2", "modernbert",
]
# The computations whose numerics differ, as the inputs choose them:
# prediction mixes the probability matrices on the CPU in float32 up to
# MATERIALISE_UP_TO pieces (the edge batch) and calls SDPA beyond (the long
# edge batch) and in half precision; training runs TwoBranchAttention;
# output_attentions (and score transforms) materialise the probabilities,
# in both. The reference (tests/reference.py) is what they all compute.
COMPUTATIONS = {
    "default": {},
    "long": {"long": True},
    "materialised": {"output_attentions": True},
}
PREDICTIONS = ("default", "long", "materialised")
TRAININGS = ("default", "materialised")
N_SEQUENCES, N_PIECES, LONG_PIECES = 3, 12, 140


def model_type(family: str) -> str:
    return family.split("-relative")[0]


def family_encoder(family: str, weight_scale: float = 1.0) -> torch.nn.Module:
    """The family's tiny random encoder (tests/util.py's tiny_encoder; XLM-R
    and CamemBERT: RoBERTa's shape under their own model types), in eval
    mode, with every matrix but the embeddings multiplied by weight_scale:
    at the initial scale (0.02) every score is near 0 and attention near
    uniform, so a mask changes little; at 8 the scores spread over a few
    units, at 40 over hundreds."""
    if family in ("xlm-roberta", "camembert"):
        torch.manual_seed(0)
        config = AutoConfig.for_model(family, hidden_size=32, pad_token_id=1, **ENCODER_SIZES)
        model = AutoModel.from_config(config, add_pooling_layer=False).eval()
    else:
        model = tiny_encoder(family)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 2 and "embed" not in name:
                parameter.mul_(weight_scale)
    return model


def edge_batch(device: str = "cpu", long: bool = False) -> Dict[str, torch.Tensor]:
    """input_ids, attention_mask and local_mask of three sequences of 12
    pieces (with `long`, LONG_PIECES, beyond MATERIALISE_UP_TO):
    0: each piece sees only itself locally (every other key hidden);
    1: a random mask, padded after 7 pieces, whose piece 3 sees no key at
       all locally (its local branch is zero);
    2: two real pieces, then padding, far beyond ModernBERT's window of two
       pieces either side (a padding query whose window holds no real
       key)."""
    n_pieces = LONG_PIECES if long else N_PIECES
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(5, 30, (N_SEQUENCES, n_pieces), generator=generator)
    attention_mask = torch.ones(N_SEQUENCES, n_pieces, dtype=torch.long)
    attention_mask[1, 7:] = 0
    attention_mask[2, 2:] = 0
    local_mask = (torch.rand(N_SEQUENCES, n_pieces, n_pieces, generator=generator) < 0.3) | torch.eye(n_pieces, dtype=torch.bool)
    local_mask[0] = torch.eye(n_pieces, dtype=torch.bool)
    local_mask[1, 3] = False
    batch = {"input_ids": input_ids, "attention_mask": attention_mask, "local_mask": local_mask}
    return {name: tensor.to(device) for name, tensor in batch.items()}


def sla_encoder(family: str, weight_scale: float = 1.0, **options) -> SyntaxAwareTransformer:
    """The family's encoder with SLA in every layer (options: those of
    SyntaxAwareTransformer; `reference`: computing its local branches by
    the reference), its gates drawn so that they differ between tokens
    (they start at 0.5 everywhere)."""
    if options.pop("reference", False):
        options["gated_attention"] = reference_gated_attention
    sla = SyntaxAwareTransformer(family_encoder(family, weight_scale), **options).eval()
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for module in sla.sla_modules():
            module.gate.weight.copy_(torch.randn(module.gate.weight.shape, generator=generator) * 0.5)
    return sla


def run(
    model: torch.nn.Module,
    batch: Dict[str, torch.Tensor],
    dtype: torch.dtype,
    gradients: bool,
    extra_inputs: Optional[Dict[str, torch.Tensor]] = None,
    output_attentions: bool = False,
) -> Tuple[torch.Tensor, Optional[Dict[str, torch.Tensor]]]:
    """The last hidden states in float32 (every piece, padding included),
    under autocast to `dtype` (none for float32), and with `gradients` each
    parameter's gradient of a fixed random projection of the real pieces'
    states, in float32 (model: an SLA encoder, or a plain one, which gets
    no local mask)."""
    device_type = batch["input_ids"].device.type
    model.zero_grad(set_to_none=True)
    inputs = dict(batch)
    if not isinstance(model, SyntaxAwareTransformer):
        inputs.pop("local_mask")
    elif output_attentions:
        inputs["output_attentions"] = True
    inputs.update(extra_inputs or {})
    autocast = nullcontext() if dtype == torch.float32 else torch.autocast(device_type, dtype=dtype)
    with torch.set_grad_enabled(gradients), autocast:
        output = model(**inputs)
    states = output.last_hidden_state.float()
    if not gradients:
        return states.detach(), None
    weights = torch.randn(states.shape, generator=torch.Generator().manual_seed(6)).to(states.device)
    loss = (states * weights * batch["attention_mask"][..., None]).sum()
    if getattr(output, "parent_attention_loss", None) is not None:
        loss = loss + output.parent_attention_loss
    loss.backward()
    # copies: moving the model to another device moves its .grad tensors in place
    grads = {name: p.grad.detach().float().clone() for name, p in model.named_parameters() if p.grad is not None}
    return states.detach(), grads


def real_pieces(batch: Dict[str, torch.Tensor]) -> torch.Tensor:
    return batch["attention_mask"].bool()


def output_error(half: torch.Tensor, full: torch.Tensor, batch: Dict[str, torch.Tensor]) -> float:
    """The largest difference over the real pieces (padding rows are never read)."""
    return float((half - full)[real_pieces(batch)].abs().max())


def gradient_error(half: Dict[str, torch.Tensor], full: Dict[str, torch.Tensor]) -> float:
    """|g_half - g_full| / |g_full| over all parameters' gradients as one
    vector: the error of the step an optimizer would take (a single
    parameter's gradient can be a near-cancelling sum, e.g. a key bias's,
    which is zero in exact arithmetic)."""
    assert half.keys() == full.keys()
    difference = torch.cat([(half[name] - full[name]).flatten() for name in full])
    return float(difference.norm() / torch.cat([g.flatten() for g in full.values()]).norm())


def all_finite(states: torch.Tensor, grads: Optional[Dict[str, torch.Tensor]]) -> List[str]:
    """What is not finite: 'states', or the names of the parameters whose gradient is not."""
    bad = [] if bool(torch.isfinite(states).all()) else ["states"]
    return bad + [name for name, grad in (grads or {}).items() if not bool(torch.isfinite(grad).all())]


def tolerance(reference_error: float, states: torch.Tensor, dtype: torch.dtype) -> float:
    """How far SLA's states under autocast to `dtype` may move from its
    float32 states, given the unwrapped family's own move under the same
    autocast (reference_error): autocast runs the projections and products
    with the values in the half type (8 significant bits in bfloat16, 11 in
    float16: machine epsilon 2^-7, 2^-10) and the softmaxes in float32, so
    the unwrapped encoder already moves by a few epsilons of its states'
    size. SLA adds a second softmax and a gate per layer to the same
    products: three times the family's own move (measured on the CPU: at
    most 2.2 times, DistilBERT's bfloat16 prediction), plus one epsilon of
    the states' size where the family's own move happens to be tiny. An
    error in the masking constants, an overflow or a softmax in half
    precision shows as NaN or as an error of tenths."""
    return 3.0 * reference_error + torch.finfo(dtype).eps * float(states.abs().max())


def autocast_deviations(family: str, dtype: torch.dtype, device: str = "cpu") -> List[str]:
    """What of SLA's states and gradients under autocast to `dtype` is not
    finite or moves from float32 by more than the tolerance, on the edge
    batch; [] when nothing does. Gradients: the error of the whole
    gradient vector, within three times the family's own plus one epsilon."""
    batch = edge_batch(device)
    sla, plain = sla_encoder(family, 8.0).to(device), family_encoder(family, 8.0).to(device)
    failures = []
    for gradients in (False, True):
        sla_full, sla_full_grads = run(sla, batch, torch.float32, gradients)
        sla_half, sla_half_grads = run(sla, batch, dtype, gradients)
        plain_full, plain_full_grads = run(plain, batch, torch.float32, gradients)
        plain_half, plain_half_grads = run(plain, batch, dtype, gradients)
        failures += [f"not finite: {name}" for name in all_finite(sla_half, sla_half_grads)]
        error, reference = output_error(sla_half, sla_full, batch), output_error(plain_half, plain_full, batch)
        if not error <= tolerance(reference, sla_full, dtype):
            failures.append(f"states (gradients {gradients}): {error:.4g}, the family's own {reference:.4g}")
        if gradients:
            error, reference = gradient_error(sla_half_grads, sla_full_grads), gradient_error(plain_half_grads, plain_full_grads)
            if not error <= 3.0 * reference + torch.finfo(dtype).eps:
                failures.append(f"gradients: {error:.4g}, the family's own {reference:.4g}")
    return failures


def run_computation(
    model: torch.nn.Module, name: str, dtype: torch.dtype, gradients: bool, device: str = "cpu"
) -> Tuple[torch.Tensor, Optional[Dict[str, torch.Tensor]]]:
    """run on the edge batch (long or not) by one of COMPUTATIONS."""
    options = dict(COMPUTATIONS[name])
    batch = edge_batch(device, long=options.pop("long", False))
    return run(model, batch, dtype, gradients, **options)


def not_finite_on_every_path(family: str, dtype: torch.dtype, device: str = "cpu", weight_scale: float = 40.0) -> Dict[str, List[str]]:
    """What is not finite, per computation, under autocast to `dtype` with
    scores spread over hundreds (weights 40 times their initial scale):
    prediction on each computation (SDPA on either batch, in half
    precision, or the materialised probabilities) and training with
    dropout on each; the states of every piece (padding included: they
    are the next layer's values) and every gradient. {} when everything is
    finite; "family" when the unwrapped family itself is not."""
    found = {}
    plain = all_finite(*run(family_encoder(family, weight_scale).to(device), edge_batch(device), dtype, True))
    if plain:
        found["family"] = plain
    for name in PREDICTIONS:
        bad = all_finite(*run_computation(sla_encoder(family, weight_scale).to(device), name, dtype, False, device))
        if bad:
            found[f"prediction, {name}"] = bad
    for name in TRAININGS:
        torch.manual_seed(0)
        bad = all_finite(*run_computation(sla_encoder(family, weight_scale).to(device).train(), name, dtype, True, device))
        if bad:
            found[f"training, {name}"] = bad
    return found


# The local modules of the variants with distance buckets, the syntax-guided
# layer and a supervised head: SyntaxAwareTransformer options and the inputs they read.
N_BUCKETS = 6


def variant(name: str) -> dict:
    """SyntaxAwareTransformer options of a variant (softbias, logthreshold,
    depscale, sgnet, lisa)."""
    if name == "softbias":
        return {"local_bias": lambda config: TreeDistanceBiasLayer(config.num_attention_heads, N_BUCKETS)}
    if name == "logthreshold":
        return {"local_bias": lambda config: ThresholdLogBiasLayer(config.num_attention_heads, N_BUCKETS - 3, 2.0)}
    if name == "depscale":
        return {"local_bias": lambda config: DependencyScaleLayer(config.hidden_size, config.num_attention_heads, N_BUCKETS - 3)}
    if name == "sgnet":
        return {"ancestor_mask_layer": True}
    return {"parent_attention": ParentAttention(layer=1, head=0, weight=1.0)}


def variant_inputs(name: str, batch: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """The inputs the variant reads besides the encoder's: buckets (with the
    "special" bucket on the first sequence, which then carries no syntax),
    the guide mask (the local mask showing each piece itself, as
    spacy-sla.ancestor_mask.v1 does) or the parent targets."""
    device = batch["input_ids"].device
    generator = torch.Generator().manual_seed(3)
    if name in ("softbias", "logthreshold", "depscale"):
        buckets = torch.randint(0, N_BUCKETS, (N_SEQUENCES, N_PIECES, N_PIECES), generator=generator)
        buckets[0] = N_BUCKETS - 1
        return {"local_mask": None, "local_buckets": buckets.to(device)}
    if name == "sgnet":
        return {"guide_mask": batch["local_mask"] | torch.eye(N_PIECES, dtype=torch.bool, device=device)}
    targets = torch.randint(0, N_PIECES, (N_SEQUENCES, N_PIECES), generator=generator)
    targets[~batch["attention_mask"].bool().cpu()] = IGNORED_TARGET
    targets[0] = IGNORED_TARGET
    return {"parent_attention_targets": targets.to(device)}
