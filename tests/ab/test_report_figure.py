"""report.png of `spacy sla ab`: two panels for one training size, a third
(the paired difference against size) for several."""
import pytest

from spacy_sla.ab.report_figure import plot_report

from .reports import report

pytest.importorskip("matplotlib")


@pytest.mark.parametrize("sizes,panels", [(("all",), 2), (("50", "all"), 3)])
def test_the_figure_has_a_panel_per_view(tmp_path, sizes, panels):
    import matplotlib.image

    path = tmp_path / "figures" / "report.png"
    plot_report(report(sizes), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = matplotlib.image.imread(path).shape[:2]
    assert (width, height) == (5 * panels * 110, 4 * 110)  # 5 x 4 inches a panel at 110 dpi
