"""`spacy sla annotate`: batch annotation with a trained pipeline, in one
process or on Ray (spacy_sla/tools/annotation/)."""
from pathlib import Path
from typing import Optional

from spacy.cli._util import Arg, Opt
from wasabi import msg

from ..annotation import (
    DEFAULT_FIELDS,
    FIELDS,
    AnnotateSettings,
    AnnotateSummary,
    AnnotationError,
    annotate,
    annotate_on_ray,
)
from ..support.ray_session import on_ray
from ._app import sla_cli

INPUT_HELP = ("JSONL ({\"text\": ...} per line, other fields kept), a .spacy file, or plain UTF-8 text "
              "(any other suffix: one document per line)")


def _split(values: str) -> tuple:
    return tuple(value.strip() for value in values.split(",") if value.strip())


@sla_cli.command("annotate")
def annotate_cli(
    pipeline: str = Arg(..., help="A trained pipeline: package name or directory"),
    input_path: Path = Arg(..., help=INPUT_HELP, exists=True, dir_okay=False),
    output_dir: Path = Arg(..., help="Directory for the shards (shard-00000.spacy|jsonl, ...) and annotate.json"),
    output_format: str = Opt("spacy", "--format", "-f", help="spacy (DocBin shards) or jsonl"),
    fields: str = Opt(",".join(DEFAULT_FIELDS), "--fields", help=f"JSONL fields, comma-separated: {', '.join(FIELDS)} (gates: doc._.sla_gates, also kept in .spacy shards)"),
    text_key: str = Opt("text", "--text-key", "-tk", help="The JSONL field with the text"),
    on_error: str = Opt("stop", "--on-error", help="A bad input line (not UTF-8, not JSON, no text, longer than the pipeline's max_length, not storable in a shard): stop the job, or skip it (listed in OUTPUT_DIR/bad-lines.txt)"),
    batch_size: int = Opt(64, "--batch-size", "-b", help="Documents per nlp.pipe batch", min=1),
    shard_size: int = Opt(1000, "--shard-size", help="Input lines (or Docs) per output shard: the unit of work and of retries", min=1),
    gpu_id: int = Opt(-1, "--gpu-id", "-g", help="GPU for the single-process path, or -1"),
    code_path: Optional[Path] = Opt(None, "--code", "-c", help="A Python file with registered functions (custom components), imported by every worker", exists=True, dir_okay=False),
    overwrite: bool = Opt(False, "--overwrite", help="Delete what another annotation wrote in OUTPUT_DIR (the files its annotate.json names) first; never the input or other files"),
    ray: bool = Opt(False, "--ray", help="Annotate with a Ray Data pipeline: on a local Ray instance (listening on 127.0.0.1 only), or on --ray-address"),
    ray_address: Optional[str] = Opt(None, "--ray-address", help="A Ray cluster to join (implies --ray): auto, HOST:PORT or ray://HOST:10001; local: a Ray instance here"),
    workers: Optional[int] = Opt(None, "--workers", help="Ray workers, each with its own copy of the pipeline (default: as many as the cluster's CPUs or GPUs allow)", min=1),
    cpus_per_worker: float = Opt(1.0, "--cpus-per-worker", help="CPUs Ray reserves for each worker"),
    gpus_per_worker: float = Opt(0.0, "--gpus-per-worker", help="GPUs Ray reserves for each worker (0.5: two share one)"),
):
    """Annotate a large input with a trained pipeline and write numbered
    shards in input order. Without --ray: one process with nlp.pipe. With
    --ray: a Ray Data pipeline whose workers each load the pipeline once and
    annotate and write whole shards. A shard is written atomically, so a run
    that stopped can be started again and resumes with the missing shards,
    if the settings and the pipeline's files are those of OUTPUT_DIR/annotate.json.
    On Ray, the workers get the driver's HF_*, TRANSFORMERS_* and TOKENIZERS_*
    variables except credentials (HF_TOKEN, ...); name those to forward in
    SPACY_SLA_RAY_FORWARD_ENV, e.g. SPACY_SLA_RAY_FORWARD_ENV=HF_TOKEN."""
    settings = AnnotateSettings(
        pipeline=pipeline, input_path=str(input_path), output_dir=str(output_dir), output_format=output_format,
        fields=_split(fields), text_key=text_key, on_error=on_error, batch_size=batch_size, shard_size=shard_size,
        code_path=None if code_path is None else str(code_path),
    )
    try:
        if on_ray(ray, ray_address):
            if gpu_id >= 0:
                msg.warn("--gpu-id is ignored with --ray: give each worker a GPU with --gpus-per-worker 1")
            summary = annotate_on_ray(settings, address=ray_address, workers=workers, cpus_per_worker=cpus_per_worker,
                                      gpus_per_worker=gpus_per_worker, overwrite=overwrite)
        else:
            if workers is not None or gpus_per_worker > 0:
                msg.warn("--workers and --gpus-per-worker apply with --ray only")
            summary = annotate(settings, gpu_id=gpu_id, overwrite=overwrite)
    except (AnnotationError, ImportError) as error:
        msg.fail(str(error), exits=1)
    _report(summary, output_dir)


def _report(summary: AnnotateSummary, output_dir: Path) -> None:
    for line in summary.bad_lines[:20]:
        msg.warn(f"skipped {line}")
    if len(summary.bad_lines) > 20:
        msg.warn(f"... and {len(summary.bad_lines) - 20} more bad lines")
    if summary.bad_lines:
        msg.info(f"All skipped lines: {output_dir / 'bad-lines.txt'}")
    kept = f", {summary.n_resumed} kept from an earlier run" if summary.n_resumed else ""
    msg.good(f"{summary.n_docs} documents annotated in {summary.seconds:.1f} s: "
             f"{summary.n_shards} shard(s) in {output_dir}{kept}")
