"""SLA against plain attention on a bare encoder, without spaCy: a
BERT-base-sized model with random weights (hidden 768, 12 layers, 12 heads),
batch 32 x 128 pieces, mixed precision on a GPU. It prints the same ratios as
`spacy sla benchmark` (prediction, training step, peak memory; SLA /
vanilla) and torch.cuda.max_memory_allocated of each (on the CPU, with
--cpu-memory, the peak RSS of a fresh process per variant), for three
variants:

- vanilla: the model's own SDPA attention;
- sla: SyntaxAwareTransformer, training through TwoBranchAttention;
- sla-two-sdpa: the same encoder training by two SDPA calls per layer
  (performance/attention_alternatives.py: the formulation before
  TwoBranchAttention) and predicting as sla, to show what
  TwoBranchAttention saves.

The local mask is syntax-like: a band of +-3 pieces plus 5% random
long-distance pairs; the documents have 75-100% of the pieces (padding).

--model-type builds the same-shaped random encoder of another family SLA
wraps (MODEL_TYPES; bert by default): the family's own attention
implementation is vanilla (SDPA where transformers has it for the family,
else eager), and a variant that cannot run on a family is reported as
not applicable with its error instead of stopping the run.

    python -m performance.encoder_cost            # on cuda:0, a few minutes
    python -m performance.encoder_cost --layers 2 --hidden 64 --heads 4 --pieces 16 --batch-size 4 --repeats 2
    python -m performance.encoder_cost --model-type deberta-v2 --device cpu --no-mixed-precision
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

import torch
from transformers import AutoConfig, AutoModel, BertConfig, BertModel, PretrainedConfig, PreTrainedModel

from spacy_sla.layers import SyntaxAwareTransformer, check_transformer_config

from .attention_alternatives import two_sdpa_training

VARIANTS = ("vanilla", "sla", "sla-two-sdpa")

# DeBERTa-v3's attention settings (DebertaV2Config)
DEBERTA_V3 = dict(
    relative_attention=True,
    position_buckets=256,
    max_relative_positions=-1,
    pos_att_type=["p2c", "c2p"],
    share_att_key=True,
    norm_rel_ebd="layer_norm",
    position_biased_input=False,
    type_vocab_size=0,
)
# --model-type: (transformers model type, config options besides the sizes)
MODEL_TYPES: Dict[str, Any] = {
    "bert": ("bert", {}),
    "bert-relative-key": ("bert", {"position_embedding_type": "relative_key"}),
    "bert-relative-key-query": ("bert", {"position_embedding_type": "relative_key_query"}),
    "distilbert": ("distilbert", {}),
    "electra": ("electra", {}),
    "roberta": ("roberta", {}),
    "mpnet": ("mpnet", {}),
    "albert": ("albert", {}),
    "deberta-v2": ("deberta-v2", DEBERTA_V3),  # configured as DeBERTa-v3
    "modernbert": ("modernbert", {"pad_token_id": 0, "cls_token_id": 2, "sep_token_id": 3, "bos_token_id": 2, "eos_token_id": 3}),
}
FAMILY_NAMES = {
    "bert": "BERT", "bert-relative-key": "BERT (relative_key)", "bert-relative-key-query": "BERT (relative_key_query)",
    "distilbert": "DistilBERT", "electra": "ELECTRA", "roberta": "RoBERTa", "mpnet": "MPNet", "albert": "ALBERT",
    "deberta-v2": "DeBERTa-v3 (deberta-v2)", "modernbert": "ModernBERT",
}


def family_config(model_type: str, layers: int, hidden: int, heads: int) -> PretrainedConfig:
    """The random encoder's config of a --model-type: hidden, layers, heads
    and a feed-forward of 4 x hidden under the family's field names, a
    vocabulary of 30522 pieces (the input ids are below 20000)."""
    hf_type, options = MODEL_TYPES[model_type]
    if hf_type == "distilbert":
        sizes = dict(dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=4 * hidden)
    else:
        sizes = dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=4 * hidden)
        if hf_type in ("electra", "albert"):
            sizes["embedding_size"] = hidden
    config = AutoConfig.for_model(hf_type, vocab_size=30522, **sizes, **options)
    check_transformer_config(config, model_type)  # SLA-E002 / SLA-E009 before any model is built
    return config


def family_model(model_type: str, layers: int, hidden: int, heads: int) -> PreTrainedModel:
    """The family's encoder with random weights (no pooler), through SDPA
    where transformers has it for the family and its position embeddings,
    else its eager attention."""
    config = family_config(model_type, layers, hidden, heads)
    options = {"add_pooling_layer": False} if config.model_type in ("bert", "roberta", "albert") else {}
    if getattr(config, "position_embedding_type", "absolute") != "absolute":
        # BERT's SDPA attention computes relative positions eagerly
        return AutoModel.from_config(config, attn_implementation="eager", **options)
    try:
        return AutoModel.from_config(config, attn_implementation="sdpa", **options)
    except ValueError:  # no SDPA attention for the family (MPNet, DeBERTa-v2)
        return AutoModel.from_config(config, attn_implementation="eager", **options)


def encoder(
    variant: str, layers: int, hidden: int, heads: int, device: torch.device, seed: int = 0, model_type: str = "bert"
) -> torch.nn.Module:
    """The same random weights for every variant."""
    torch.manual_seed(seed)
    if model_type == "bert":
        config = BertConfig(
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            intermediate_size=4 * hidden,
            attn_implementation="sdpa",
        )
        model = BertModel(config, add_pooling_layer=False)
    else:
        model = family_model(model_type, layers, hidden, heads)
    if variant == "sla":
        model = SyntaxAwareTransformer(model)
    elif variant == "sla-two-sdpa":
        model = SyntaxAwareTransformer(model, gated_attention=two_sdpa_training)
    return model.to(device)


def inputs(batch_size: int, pieces: int, device: torch.device, seed: int = 1) -> Dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1000, 20000, (batch_size, pieces), generator=generator)
    lengths = torch.randint(pieces * 3 // 4, pieces + 1, (batch_size,), generator=generator)
    attention_mask = (torch.arange(pieces)[None] < lengths[:, None]).long()
    positions = torch.arange(pieces)
    band = (positions[:, None] - positions[None]).abs() <= 3
    local_mask = band[None] | (torch.rand(batch_size, pieces, pieces, generator=generator) < 0.05)
    return {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device), "local_mask": local_mask.to(device)}


def _forward(model: torch.nn.Module, variant: str, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
    if variant == "vanilla":
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    return model(batch["input_ids"], batch["attention_mask"], local_mask=batch["local_mask"]).last_hidden_state


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _seconds(function: Callable[[], Any], device: torch.device) -> float:
    _synchronize(device)
    start = time.perf_counter()
    function()
    _synchronize(device)
    return time.perf_counter() - start


def _rss_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def cpu_memory_probe(variant: str, layers: int, hidden: int, heads: int, batch_size: int, pieces: int, model_type: str) -> List[float]:
    """In this (fresh) process: build the variant's encoder and the batch,
    reset the peak RSS (Linux: /proc/self/clear_refs), predict once and take
    one training step; [peak RSS, peak RSS - RSS before], in MiB."""
    device = torch.device("cpu")
    batch = inputs(batch_size, pieces, device)
    model = encoder(variant, layers, hidden, heads, device, model_type=model_type)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-5)
    before = _rss_mib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    with torch.no_grad():
        _forward(model.eval(), variant, batch)
    _forward(model.train(), variant, batch).pow(2).mean().backward()
    optimizer.step()
    peak = _rss_mib("VmHWM")
    return [peak, peak - before]


def cpu_memory(variant: str, layers: int, hidden: int, heads: int, batch_size: int, pieces: int, model_type: str) -> List[float]:
    """cpu_memory_probe in a fresh process, so that the variants do not
    share a high-water mark."""
    code = "import json, sys; from performance.encoder_cost import cpu_memory_probe; print(json.dumps(cpu_memory_probe(*json.load(sys.stdin))))"
    arguments = [variant, layers, hidden, heads, batch_size, pieces, model_type]
    result = subprocess.run([sys.executable, "-c", code], input=json.dumps(arguments), capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def run(
    layers: int = 12,
    hidden: int = 768,
    heads: int = 12,
    batch_size: int = 32,
    pieces: int = 128,
    repeats: int = 10,
    device_name: str = "cuda",
    mixed_precision: bool = True,
    variants: Sequence[str] = VARIANTS,
    model_type: str = "bert",
    measure_cpu_memory: bool = False,
) -> Dict[str, Any]:
    """Per variant: median seconds of a prediction (eval, no_grad) and of a
    training step (train mode with dropout, forward + backward + SGD step),
    variants taking turns; then the peak memory of one training step per
    variant (a fresh high-water mark each; on the CPU with
    measure_cpu_memory, the peak RSS of a fresh process that predicts and
    takes one step, and its growth over the RSS before). A variant other than vanilla
    that fails to build or run on the family is left out of the timings
    and listed under "not_applicable" with its error."""
    device = torch.device(device_name)
    batch = inputs(batch_size, pieces, device)
    not_applicable: Dict[str, str] = {}
    models = {}
    for variant in variants:
        try:
            models[variant] = encoder(variant, layers, hidden, heads, device, model_type=model_type)
        except Exception as error:  # noqa: BLE001 - reported, not raised
            if variant == "vanilla":
                raise
            not_applicable[variant] = f"{type(error).__name__}: {error}"
    variants = [variant for variant in variants if variant in models]
    optimizers = {variant: torch.optim.SGD(model.parameters(), lr=1e-5) for variant, model in models.items()}
    autocast = torch.autocast(device.type, dtype=torch.float16, enabled=mixed_precision and device.type == "cuda")

    def predict(variant: str) -> None:
        model = models[variant].eval()
        with torch.no_grad(), autocast:
            _forward(model, variant, batch)

    def train_step(variant: str) -> None:
        model = models[variant].train()
        with autocast:
            loss = _forward(model, variant, batch).float().pow(2).mean()
        loss.backward()
        optimizers[variant].step()
        optimizers[variant].zero_grad(set_to_none=True)

    for variant in list(variants):
        if variant == "vanilla":
            continue
        try:  # a first prediction and training step tell whether the variant runs on the family
            predict(variant)
            train_step(variant)
        except Exception as error:  # noqa: BLE001 - reported, not raised
            not_applicable[variant] = f"{type(error).__name__}: {error}"
            variants.remove(variant)
            del models[variant], optimizers[variant]
    samples: Dict[str, Dict[str, List[float]]] = {v: {"predict": [], "train": []} for v in variants}
    for repeat in range(repeats + 1):  # repetition 0 warms up
        for variant in variants:
            predict_seconds = _seconds(lambda: predict(variant), device)
            train_seconds = _seconds(lambda: train_step(variant), device)
            if repeat:
                samples[variant]["predict"].append(predict_seconds)
                samples[variant]["train"].append(train_seconds)
    peak: Dict[str, Optional[float]] = {}
    step_growth: Dict[str, float] = {}
    for variant in variants:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            train_step(variant)
            peak[variant] = torch.cuda.max_memory_allocated(device) / 2**20
        elif measure_cpu_memory:
            peak[variant], step_growth[variant] = cpu_memory(variant, layers, hidden, heads, batch_size, pieces, model_type)
        else:
            peak[variant] = None  # RSS is per process; the spaCy benchmark measures it
    report: Dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else device_name,
        "torch": torch.__version__,
        "model": {"layers": layers, "hidden": hidden, "heads": heads, "weights": "random"},
        "batch_size": batch_size,
        "pieces": pieces,
        "mixed_precision": mixed_precision and device.type == "cuda",
        "repeats": repeats,
        "variants": {
            variant: {
                "predict_seconds": statistics.median(samples[variant]["predict"]),
                "train_seconds": statistics.median(samples[variant]["train"]),
                "peak_memory_mib": peak[variant],
                **({"step_memory_mib": step_growth[variant]} if variant in step_growth else {}),
            }
            for variant in variants
        },
    }
    if model_type != "bert":  # bert's report keeps its earlier keys
        vanilla_config = models["vanilla"].config
        report["model"].update(family=model_type, model_type=vanilla_config.model_type,
                               vanilla_attention=vanilla_config._attn_implementation)
        report["not_applicable"] = not_applicable
    elif not_applicable:
        report["not_applicable"] = not_applicable
    report["ratios"] = ratios(report)
    return report


def ratios(report: Dict[str, Any]) -> Dict[str, Dict[str, Optional[float]]]:
    """Each variant / vanilla: time ratios (above 1: slower) and memory."""
    variants = report["variants"]
    base = variants["vanilla"]
    result = {}
    for variant, values in variants.items():
        if variant == "vanilla":
            continue
        memory = None
        if values["peak_memory_mib"] is not None and base["peak_memory_mib"]:
            memory = values["peak_memory_mib"] / base["peak_memory_mib"]
        result[variant] = {
            "predict": values["predict_seconds"] / base["predict_seconds"],
            "train": values["train_seconds"] / base["train_seconds"],
            "peak_memory": memory,
        }
        if values.get("step_memory_mib") and base.get("step_memory_mib"):
            result[variant]["step_memory"] = values["step_memory_mib"] / base["step_memory_mib"]
    return result


def format_report(report: Dict[str, Any]) -> str:
    family = report["model"].get("family", "bert")
    encoder_name = "BERT encoder" if family == "bert" else f"{FAMILY_NAMES[family]} encoder ({report['model']['vanilla_attention']} attention in vanilla)"
    lines = [
        f"{report['date']}, {report['device']}, torch {report['torch']}; {encoder_name} with random weights "
        f"({report['model']['layers']} layers, hidden {report['model']['hidden']}, {report['model']['heads']} heads), "
        f"batch {report['batch_size']} x {report['pieces']} pieces, mixed precision {report['mixed_precision']}, "
        f"{report['repeats']} repetitions",
        "",
        "| variant | predict ms | train step ms | peak MiB | / vanilla predict | / vanilla train | / vanilla memory |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant, values in report["variants"].items():
        ratio = report["ratios"].get(variant, {"predict": 1.0, "train": 1.0, "peak_memory": 1.0})
        memory = "-" if values["peak_memory_mib"] is None else f"{values['peak_memory_mib']:.0f}"
        memory_ratio = "-" if ratio["peak_memory"] is None else f"{ratio['peak_memory']:.3f}"
        lines.append(
            f"| {variant} | {1000 * values['predict_seconds']:.1f} | {1000 * values['train_seconds']:.1f} | {memory} "
            f"| {ratio['predict']:.3f} | {ratio['train']:.3f} | {memory_ratio} |"
        )
    if any("step_memory_mib" in values for values in report["variants"].values()):
        lines.append("")
        lines.append("peak MiB: peak RSS of a fresh process per variant; its growth in the prediction and step, "
                     "MiB (/ vanilla): " + ", ".join(
                         f"{variant} {values['step_memory_mib']:.0f} ({report['ratios'].get(variant, {}).get('step_memory', 1.0):.3f})"
                         for variant, values in report["variants"].items()))
    for variant, error in report.get("not_applicable", {}).items():
        lines.append(f"| {variant} | not applicable to {family}: {error} | | | | | |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--pieces", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--no-mixed-precision", action="store_true")
    parser.add_argument("--model-type", default="bert", choices=sorted(MODEL_TYPES),
                        help="the encoder family (bert-relative-key*: BERT with relative position embeddings)")
    parser.add_argument("--cpu-memory", action="store_true",
                        help="on the CPU, measure the peak RSS of a fresh process per variant (Linux)")
    parser.add_argument("--output", default=None, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    report = run(
        args.layers, args.hidden, args.heads, args.batch_size, args.pieces, args.repeats, args.device,
        not args.no_mixed_precision, model_type=args.model_type,
        measure_cpu_memory=args.cpu_memory,
    )
    print(format_report(report), flush=True)
    if args.output:
        with open(args.output, "w", encoding="utf8") as file:
            json.dump(report, file, indent=2)
    return report


if __name__ == "__main__":
    main()
