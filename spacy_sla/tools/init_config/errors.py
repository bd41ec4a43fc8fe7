"""The coded errors of `spacy sla init-config` (docs/reference.md lists them
with their fixes)."""
from spacy_sla.errors import SLACodes


class Errors(metaclass=SLACodes):
    E030 = (
        "The config has no single spacy-transformers transformer component "
        "to turn into attention variants (transformer components found: "
        "{found}{given}; pipeline: {pipeline}). `spacy sla init-config` "
        "needs a component with factory \"transformer\" (or \"sla_transformer\") "
        "and the architecture spacy-transformers.TransformerModel.v1-v3, as "
        "`spacy init config --gpu` writes it; with several, name one with "
        "`--component NAME`."
    )
    E033 = (
        "Cannot source a parser from '{parser}': {reason}. SLA needs a "
        "dependency parse before the transformer runs: {install}, or pass "
        "the path of a trained pipeline with a parser as `--parser`."
    )
    E034 = (
        "The config's language is '{lang}', but the parser pipeline "
        "'{parser}' is for '{parser_lang}'. Pass a pipeline with a parser for "
        "'{lang}' as `--parser` (e.g. {example}); SLA's masks come from that "
        "parse."
    )
    E035 = (
        "No component of the pipeline listens to the transformer "
        "'{transformer}' (none has a TransformerListener with upstream "
        "\"{transformer}\" or \"*\"): {pipeline}. Its output would go "
        "nowhere, so an A/B of its attention would compare nothing. Give a "
        "component a spacy-transformers.TransformerListener.v1 as its "
        "tok2vec (`spacy init config --gpu` does), or pass a config whose "
        "components use the transformer."
    )
    E038 = (
        "The variant option `{option}` fits none of the chosen variants "
        "({variants}). --threshold is the hop limit m of the syntax masks "
        "(sla, sla-noneighbours, sla-nopunct), --window the width of the "
        "window mask (window), --punct-rule the punctuation rule of both, "
        "--sla-layers the layers with a local branch."
    )
    E054 = (
        "`spacy sla init-config` does not write into {output_dir}: it holds "
        "{files}. Give a new or empty folder, or pass `--overwrite` to "
        "replace the files of the same names and those of the earlier "
        "init-config call (its {manifest}); other files are left alone and "
        "are not taken as arms by `spacy sla ab`."
    )
    E055 = (
        "{config_dir} {problem}: {manifest} is the record `spacy sla init-config` "
        "writes of the configs it made, and `spacy sla ab` compares those and "
        "nothing else, so that a stray or hand-edited config is not taken as "
        "an arm. Make the configs with `spacy sla init-config YOUR.cfg "
        "{config_dir}` (add `--overwrite` if the folder holds configs "
        "already)."
    )
    E059 = (
        "Invalid variant option {option} {value}: {reason} Nothing was written."
    )
    E060 = (
        "The transformer component '{name}' is sourced from the pipeline "
        "{source}, so its config block has no model for `spacy sla "
        "init-config` to turn into attention variants. Give the config that "
        "trains it instead (a trained pipeline's config is its "
        "config.cfg, e.g. `python -m spacy init fill-config "
        "PIPELINE/config.cfg YOUR.cfg`), or name another transformer "
        "component with `--component NAME`."
    )
    E061 = (
        "The component '{name}' is defined in [components] but is not in "
        "[nlp] pipeline ({pipeline}), so the parse cannot be put before it. "
        "Add '{name}' to [nlp] pipeline, or name the transformer that the "
        "pipeline runs with `--component NAME`."
    )
