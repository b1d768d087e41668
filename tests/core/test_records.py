"""Records: frozen, slotted dataclasses whose constrained fields (``fleet_tui.core.types``) pydantic
checks only when outside data is validated."""

from __future__ import annotations

import dataclasses

import pydantic
import pytest

from fleet_tui.core.records import FORBID_EXTRA, Record, record, validate
from fleet_tui.core.types import NonEmptyStr, NonNegativeInt, PositiveFloat, PositiveInt, UnitFraction


@record(kw_only=True)
class _Row(Record):
    __pydantic_config__ = FORBID_EXTRA

    name: NonEmptyStr
    count: PositiveInt = 1
    spare: NonNegativeInt = 0
    rate: PositiveFloat | None = None
    share: UnitFraction = 0.5
    tags: tuple[str, ...] = ()


@record
class _Checked:
    low: int
    high: int
    span: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"low {self.low} above high {self.high}")
        object.__setattr__(self, "span", self.high - self.low)


def test_a_record_is_a_frozen_slotted_dataclass():
    r = _Row(name="a")
    assert dataclasses.is_dataclass(r) and not hasattr(r, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.count = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        _Row("a")  # type: ignore[misc]  # keyword-only
    assert r == _Row(name="a") and hash(r) == hash(_Row(name="a"))


def test_validation_coerces_and_runs_post_init():
    r = validate(_Row, {"name": "a", "count": "3", "rate": 2, "tags": ["x"]})
    assert (r.count, r.rate, r.tags) == (3, 2.0, ("x",))
    assert validate(_Checked, {"low": "1", "high": 4}).span == 3
    with pytest.raises(ValueError, match="low 9 above high 4"):
        validate(_Checked, {"low": 9, "high": 4})


@pytest.mark.parametrize(("field", "value", "error"), [
    ("name", "", "string_too_short"),
    ("count", 0, "greater_than"),
    ("spare", -1, "greater_than_equal"),
    ("rate", 0.0, "greater_than"),
    ("share", 1.5, "less_than_equal"),
    ("share", 0, "greater_than"),
    ("extra", 1, "unexpected_keyword_argument"),  # extra="forbid" on a dataclass
])
def test_constrained_types_refuse_what_pydantic_own_types_refuse(field, value, error):
    with pytest.raises(pydantic.ValidationError) as exc:
        validate(_Row, {"name": "a", field: value})
    assert [e["type"] for e in exc.value.errors()] == [error]
    assert exc.value.errors()[0]["loc"] == (field,)


def test_the_pydantic_style_api():
    r = _Row(name="a", tags=("x", "y"))
    assert r.model_dump()["tags"] == ("x", "y") and r.model_dump(mode="json")["tags"] == ["x", "y"]
    assert r.model_copy(update={"count": 4}).count == 4
    assert list(_Row.model_fields)[:2] == ["name", "count"]
    assert _Row.model_validate({"name": "b"}).name == "b"
    assert '"name":"a"' in r.model_dump_json()
