"""`python -m spacy sla baseline TASK CORPUS_DIR`: the plain transformers +
torch fine-tune, the reference row ("plain fine-tune") of the comparisons."""
from pathlib import Path

from spacy.cli._util import Arg, Opt
from wasabi import msg

from ..research.baseline import (
    CLIPS,
    HEAD_INITS,
    LOSS_REDUCTIONS,
    POOLINGS,
    SEQUENCE_TASKS,
    TOKEN_TASKS,
    VARIANT,
    BaselineSettings,
    run_baseline,
)
from ._app import sla_cli


@sla_cli.command("baseline")
def baseline_cli(
    task: str = Arg(..., help=f"Task: {', '.join(SEQUENCE_TASKS + TOKEN_TASKS)}"),
    corpus_dir: Path = Arg(..., help="Directory with train.spacy and dev.spacy (from `spacy sla prepare`)", exists=True, file_okay=False),
    results_dir: Path = Opt(Path("results"), "--results-dir", help="Writes RESULTS_DIR/TASK/VARIANT/seedN.json"),
    transformer: str = Opt(..., "--transformer", help="Hugging Face model name or local directory"),
    seeds: str = Opt("0", "--seeds", help="Comma-separated seeds, one run each"),
    max_steps: int = Opt(800, "--max-steps"),
    batch_size: int = Opt(32, "--batch-size", help="Documents per batch"),
    learn_rate: float = Opt(5e-5, "--learn-rate", help="Peak learning rate"),
    warmup_steps: int = Opt(80, "--warmup-steps", help="Linear warm-up, then linear decay to 0 at max-steps"),
    weight_decay: float = Opt(0.01, "--weight-decay", help="AdamW weight decay"),
    grad_clip: float = Opt(1.0, "--grad-clip", help="Gradient norm clip"),
    pooling: str = Opt("mean", "--pooling", help=f"Sequence tasks: {' or '.join(POOLINGS)} (mean over pieces, or [CLS])"),
    max_length: int = Opt(512, "--max-length", help="Pieces per document (longer ones are truncated)"),
    eval_frequency: int = Opt(0, "--eval-frequency", help="Also score the dev set every N steps (0: at the end only)"),
    head_init: str = Opt("normal", "--head-init", help=f"{' or '.join(HEAD_INITS)} (zero: as thinc's Softmax)"),
    clip: str = Opt("global", "--clip", help=f"{' or '.join(CLIPS)} (per-parameter: as thinc's Adam)"),
    loss_reduction: str = Opt("mean", "--loss-reduction", help=f"{' or '.join(LOSS_REDUCTIONS)} (sum: as spaCy)"),
    variant: str = Opt(VARIANT, "--variant", help="The record's variant name (another keeps a measurement apart)"),
):
    """Fine-tune the same model with plain transformers + torch on the same
    converted data, steps, schedule and seed as the spaCy runs, score the dev
    set with the project's scorer, and write a record that `spacy sla
    compare` shows as the "plain fine-tune" row."""
    for seed in [int(value) for value in seeds.split(",") if value.strip()]:
        settings = BaselineSettings(
            task=task, transformer=transformer, seed=seed, max_steps=max_steps, batch_size=batch_size,
            learn_rate=learn_rate, warmup_steps=warmup_steps, weight_decay=weight_decay, grad_clip=grad_clip,
            pooling=pooling, max_length=max_length, eval_frequency=eval_frequency, head_init=head_init,
            clip=clip, loss_reduction=loss_reduction, variant=variant,
        )
        try:
            settings.validate()
        except ValueError as error:
            msg.fail(str(error), exits=1)
        # flushed at once: the runs are long and usually logged to a file
        record, path = run_baseline(settings, corpus_dir, results_dir, log=lambda line: print(line, flush=True))
        msg.good(f"{task} {variant} seed {seed}: {record['metric']} = {record['score']:.4f} -> {path}")
