"""The package's name and version, which setup.cfg and `spacy package`
requirements read."""
import configparser
from pathlib import Path

import spacy_sla
from spacy_sla.about import __title__, __version__


def test_the_version_is_the_packages_and_setup_cfg_reads_it():
    assert (__title__, __version__) == ("spacy-sla", "0.1.0") and spacy_sla.__version__ == __version__
    setup = configparser.ConfigParser()
    setup.read(Path(__file__).parent.parent / "setup.cfg")
    assert setup["metadata"]["name"] == __title__
    assert setup["metadata"]["version"] == "attr: spacy_sla.about.__version__"
