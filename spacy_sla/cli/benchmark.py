"""`python -m spacy sla benchmark`: SLA vs plain attention, side by side."""
import json
from pathlib import Path

from spacy.cli._util import Opt
from wasabi import msg

from ..research.benchmark import DEFAULT_DATA, format_table, ratio_rows, run_benchmark
from ..research.profiling import format_differences, parse_profile_setting
from ._app import sla_cli


@sla_cli.command("benchmark")
def benchmark_cli(
    model: str = Opt("training/minilm", "--model", help="Hugging Face model name or local directory"),
    parser: str = Opt("en_core_web_sm", "--parser", help="The spaCy pipeline whose parser runs first"),
    data: Path = Opt(DEFAULT_DATA, "--data", help="CoNLL-U or .spacy file with the sentences"),
    lengths: str = Opt("10,25,40,120,400", "--lengths", help="Words per document, comma-separated"),
    batch_sizes: str = Opt("8,32", "--batch-sizes", help="Documents per batch, comma-separated"),
    repeats: int = Opt(5, "--repeats", help="Timed repetitions (after one warm-up)"),
    n_batches: int = Opt(1, "--n-batches", help="Batches per prediction measurement"),
    timing: bool = Opt(True, "--timing/--no-timing", help="Time the variants (--no-timing: peak memory alone)"),
    train: bool = Opt(True, "--train/--no-train", help="Also time training steps"),
    memory: bool = Opt(True, "--memory/--no-memory", help="Also measure peak memory (a process per variant)"),
    gpu_id: int = Opt(-1, "--gpu-id", help="GPU id, or -1 for the CPU"),
    mixed_precision: bool = Opt(False, "--mixed-precision", help="Autocast the transformers (GPU)"),
    profile: str = Opt("", "--profile", help="Also profile one setting per PyTorch operator, as WORDSxBATCH (e.g. 25x32)"),
    output: Path = Opt(Path("metrics/benchmark.json"), "--output", help="Where to write the JSON report"),
):
    """Throughput of the transformer component, the whole pipeline and a
    training step for vanilla, SLA and window attention on the same parsed
    Docs, the share of mask building, peak memory, and the SLA / vanilla
    ratios, per input length and batch size."""
    if not data.is_file():
        msg.fail(f"No sentences at {data}: pass --data with a CoNLL-U or .spacy file (the default is the sample in the project's assets/).", exits=1)
    report = run_benchmark(
        model,
        parser,
        data,
        lengths=[int(x) for x in lengths.split(",")],
        batch_sizes=[int(x) for x in batch_sizes.split(",")],
        repeats=repeats,
        train=train,
        memory=memory,
        gpu_id=gpu_id,
        n_batches=n_batches,
        mixed_precision=mixed_precision,
        profile=parse_profile_setting(profile) if profile else None,
        timing=timing,
    )
    report["ratios"] = ratio_rows(report)
    table = format_table(report)
    report["table"] = table
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2), encoding="utf8")
    print(f"\n{report['date']}, {report['machine']}\nmodel {model}, parser {parser}\n")
    print(table)
    if report["profile"]:
        print(f"Where SLA's extra time goes (~{report['profile']['words']} words, batch {report['profile']['batch_size']}):\n")
        for differences in report["profile"]["differences"]:
            print(format_differences(differences))
    msg.good(f"Wrote {output}")
