"""The coded errors of `spacy sla annotate` (docs/reference.md lists them
with their fixes)."""
from spacy_sla.errors import SLACodes


class Errors(metaclass=SLACodes):
    E076 = (
        "Cannot use {output_dir} as the annotation's output directory: "
        "{reason}. Give a directory (new or existing), not a file, in a "
        "place that can be written."
    )
    E077 = (
        "{output_dir} holds shards written by another version of the "
        "pipeline {pipeline}: its {changed} changed since they were written, "
        "so resuming would mix the output of two models. Use --overwrite to "
        "delete those shards and annotate again, or another OUTPUT_DIR."
    )
    E078 = (
        "The input {input_path} lies in the output directory under a name "
        "the annotation writes ({name}), so it would be overwritten or "
        "deleted. Move the input out of {output_dir}, or give another "
        "OUTPUT_DIR."
    )
    E079 = (
        "{output_dir} holds files that this annotation would write over but "
        "did not write itself (no manifest {manifest} lists them): "
        "{names}. They are left alone, also by --overwrite. Move or delete "
        "them yourself, or give another OUTPUT_DIR."
    )
    E080 = (
        "Cannot read the {what} {path}: {reason}. Give an existing, "
        "readable file{hint}."
    )
    E081 = (
        "{path} is not a trained spaCy pipeline: it has no {missing}. Give "
        "the directory that `spacy train` writes (e.g. output/model-best) "
        "or that `nlp.to_disk` writes, or an installed pipeline package's "
        "name."
    )
    E082 = (
        "The manifest {path} cannot be read ({reason}), so it is unknown "
        "which shards in {output_dir} were written by which annotation. "
        "Delete the directory's shard-* files and the manifest yourself, or "
        "give another OUTPUT_DIR."
    )
    E083 = (
        "Could not load the pipeline {pipeline}: {reason}. Check that it is "
        "a complete pipeline directory or installed package; if it has "
        "custom components or functions, pass the file that registers them "
        "with --code."
    )
    E084 = (
        "Annotating on Ray stopped: a worker failed ({reason}). The shards "
        "written so far are kept, and running the command again resumes "
        "with the others. The worker's own traceback is in Ray's logs "
        "(/tmp/ray/session_latest/logs on its node). Check that every node "
        "sees the pipeline, the input, the output directory and the --code "
        "file at the same paths, with the packages the pipeline needs."
    )
    E096 = (
        "{path}:{line}: {reason}. Nothing was written for its shard; the "
        "shards written before are kept. Fix or remove the line and run the "
        "command again (it resumes with the missing shards), or pass "
        "--on-error skip to list such lines in bad-lines.txt and annotate "
        "the others."
    )
    E097 = (
        "{output_dir} is in use by another `spacy sla annotate` (pid {pid} "
        "on {host}, lock file {lock}): two annotations into one output "
        "directory would mix their shards. Wait for it to finish, give this "
        "call another OUTPUT_DIR, or, if that process is not an annotation "
        "of this directory (e.g. on another host that is gone), delete "
        "{lock}."
    )
    E136 = (
        "{where} \"{key}\", which the annotation writes into every JSONL "
        "record for --fields {fields} (with {writers}): the input's own "
        "value would be lost. Nothing was written. Rename that field in the "
        "input (or give another --text-key), leave {writers} out of "
        "--fields, or write .spacy shards (--format spacy), which keep the "
        "input's fields apart, in doc.user_data[\"input_fields\"]."
    )
    E137 = (
        "The output directory {output_dir} is inside the pipeline's "
        "directory {pipeline_dir}: the shards written there would change "
        "the pipeline's files, so a second run would take it for another "
        "pipeline and never resume (and the shards would travel with the "
        "pipeline). Give an OUTPUT_DIR outside {pipeline_dir}."
    )
    E138 = (
        "The pipeline {pipeline} failed on every one of the {n_docs} "
        "documents of lines {first}-{last} of {path} (e.g. {reason}), so "
        "the pipeline or the machine is at fault, not those lines: none was "
        "skipped, and the shards written before are kept. Check the "
        "pipeline on one of them (`nlp(text)`), fix the cause and run the "
        "command again; it resumes with the missing shards."
    )
