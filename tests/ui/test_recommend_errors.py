"""The Recommendations pane words core errors with its own labels, never the CLI's flags."""

from __future__ import annotations

from fleet_tui.core.errors import FieldError, UserError
from fleet_tui.ui.recommend import error_text


def test_field_errors_use_the_form_labels():
    err = FieldError("pricing", "{pricing} spot contradicts spot_allowed=False ({no_spot})")
    text = error_text(err)
    assert "--" not in text
    assert text.startswith("the pricing menu spot contradicts")
    assert error_text(FieldError("current", "{current}: unknown instance 'x'")) \
        == "current instance: unknown instance 'x'"
    assert error_text(UserError("plain")) == "plain"
