"""The coded errors of the mask statistics, `spacy sla mask-stats`
(docs/reference.md lists them with their fixes)."""
from spacy_sla.errors import SLACodes


class Errors(metaclass=SLACodes):
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


# how to fix [SLA-E005] in `spacy sla mask-stats`: after TransformerLoadFixes.HUB
TOKENIZER_OFFLINE_FIX = "With `spacy sla mask-stats`, pass that directory as `--transformer PATH`."
