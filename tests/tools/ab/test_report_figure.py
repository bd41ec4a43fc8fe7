"""report.png of `spacy sla ab`: the paired differences to vanilla with
their intervals (none over seeds from fewer than three), and the dev curves."""
import pytest

from spacy_sla.tools.ab.report_figure import difference_marks, plot_report

from .reports import report
from .test_report_summary import computed_report


def test_the_figure_marks_the_paired_differences_and_their_intervals():
    five = computed_report([0.02, 0.025, 0.03, 0.018, 0.027])["sections"][0]
    row = five["rows"][1]
    marks = difference_marks(five, "sla")
    assert marks["differences"] == pytest.approx([2.0, 2.5, 3.0, 1.8, 2.7])
    assert marks["mean"] == pytest.approx(2.4)
    assert marks["over_seeds"] == pytest.approx((100 * row["over_seeds"]["low"], 100 * row["over_seeds"]["high"]))
    assert marks["over_documents"] == pytest.approx((100 * row["over_documents"]["low"],
                                                     100 * row["over_documents"]["high"]))
    two = difference_marks(computed_report([0.01, 0.03])["sections"][0], "sla")
    assert two["differences"] == pytest.approx([1.0, 3.0]) and two["over_seeds"] is None
    assert two["over_documents"] is not None


@pytest.mark.parametrize("sizes", [("all",), ("50", "all")])
def test_the_figure_has_the_differences_and_the_curves(tmp_path, sizes):
    pytest.importorskip("matplotlib")
    import matplotlib.image

    path = tmp_path / "figures" / "report.png"
    plot_report(report(sizes), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = matplotlib.image.imread(path).shape[:2]
    assert (width, height) == (10 * 110, 4 * 110)  # two 5 x 4 inch panels at 110 dpi
    plot_report(computed_report([0.01, 0.03]), path)  # two seeds: no interval over seeds to draw
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
