"""What redaction leaves alone: a recording's ``PATH@SPEED`` is a file and a speed, not a password."""

from __future__ import annotations

import pytest

from fleet_tui.cli import main
from fleet_tui.core.redact import MASK, forget_all, redact, redact_spec


@pytest.mark.parametrize("spec", ["replay:run.jsonl@2", "fleet-replay:fleet.jsonl@4",
                                  "fleet-replay:PATH[@SPEED]"])
def test_a_recording_spec_with_a_speed_is_shown_as_typed(spec):
    forget_all()
    assert redact_spec(spec) == spec
    assert redact(f"Allowed: {spec}, prometheus:URL.") == f"Allowed: {spec}, prometheus:URL."


def test_scheme_less_credentials_are_still_masked():
    forget_all()
    assert redact_spec("prometheus:alice:s3cret@prom:9090") == f"prometheus:{MASK}@prom:9090"


def test_the_source_error_lists_every_allowed_spec_unmasked(capsys):
    """A typo in --source answers with the list of specs; none of them may read as a secret."""
    forget_all()
    assert main(["monitor", "--once", "--source", "simm:8"]) == 2
    err = capsys.readouterr().err
    assert "fleet-replay:PATH[@SPEED]" in err and MASK not in err, err
