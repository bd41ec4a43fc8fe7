"""Batch annotation: run a trained pipeline over a large input file and write
the annotated documents as numbered shards, `.spacy` DocBins or JSONL, in one
process (`nlp.pipe`) or on Ray (a Ray Data pipeline whose actor pool loads the
pipeline once per worker).

The input is cut into shards of `shard_size` consecutive input lines (or Docs
of a .spacy file) before anything runs, so both paths write the same shards:
shard k holds the documents of input lines k·S+1 .. (k+1)·S, in input order.
Each shard is read, annotated and written by one worker, atomically (a
temporary file, then os.replace): a shard file that exists is complete, a
worker that dies loses only the shard it was on (Ray retries it), and running
the same command again resumes with the missing shards.

OUTPUT_DIR/annotate.json, the manifest, records what decides the shards'
contents, the pipeline's fingerprint among them (files.pipeline_fingerprint:
its meta.json and config.cfg by hash, its other files by size and
modification time). A run resumes only where the manifest is the same, so a
pipeline replaced at its path is refused rather than mixed into the output.
--overwrite deletes only the files the manifest names (its shards and
bad-lines.txt), never the input and never a file that annotation did not
write; such a file at an output name is refused.

Inputs, chosen by suffix, as `spacy apply` reads them (except plain text,
which here has one document per line):
- `.jsonl`: one JSON object per line, its text in `text_key`; the other fields
  are kept (in the JSONL output's records; in doc.user_data["input_fields"]),
  and a record with a field that the JSONL output writes is refused before
  anything is written ([SLA-E136]);
- `.spacy`: the Docs of a DocBin, annotated as they are (the tokenizer does
  not run again, as in `spacy apply`);
- anything else: UTF-8 text, one document per line.
Blank lines are skipped. A bad line (not UTF-8, not a JSON object or JSON
Python cannot hold, no text), or a document that the pipeline cannot take
(longer than nlp.max_length, a lone surrogate in its text, one it fails on)
or a shard cannot hold (a field with an integer beyond 64 bits in a .spacy
shard) stops the job with [SLA-E096] naming FILE:LINE, or with
on_error="skip" is skipped and reported, and every shard is written without
it; a pipeline that fails on every document of a shard stops the job
([SLA-E138]). One annotation at a time holds OUTPUT_DIR
(.annotate.lock, as `spacy sla ab` holds its own; [SLA-E097]).

Ray is imported only by annotate_on_ray, never by `import spacy_sla`.
"""
from .input_file import plan_shards, read_lines
from .output import MANIFEST
from .run import annotate, annotate_on_ray, worker_failure
from .settings import (
    DEFAULT_FIELDS,
    FIELDS,
    AnnotateSettings,
    AnnotateSummary,
    AnnotationError,
    BadLine,
    Shard,
    pipeline_files_fingerprint,
)

__all__ = [
    "DEFAULT_FIELDS",
    "FIELDS",
    "MANIFEST",
    "AnnotateSettings",
    "AnnotateSummary",
    "AnnotationError",
    "BadLine",
    "Shard",
    "annotate",
    "annotate_on_ray",
    "pipeline_files_fingerprint",
    "plan_shards",
    "read_lines",
    "worker_failure",
]
