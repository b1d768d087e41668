"""The house record decorator builds its own ``__init__`` (each field through its slot's descriptor):
it must take the same arguments and give the same objects as a frozen, slotted dataclass."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from fleet_tui.core.monitor.snapshot import DeviceSnapshot
from fleet_tui.core.records import Record, record, validate


@record
class _Plain(Record):
    a: int
    b: str = "x"
    c: tuple = dataclasses.field(default_factory=tuple)
    d: list = dataclasses.field(default_factory=list, compare=False)


@record(kw_only=True)
class _KwOnly(Record):
    name: str
    size: int = 1


@record
class _Mixed:
    a: int
    b: int = dataclasses.field(default=5, kw_only=True)
    c: int = 7


@record
class _Checked:
    low: int
    high: int
    span: int = dataclasses.field(init=False, default=0)
    seen: list = dataclasses.field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"low {self.low} above high {self.high}")
        object.__setattr__(self, "span", self.high - self.low)


@record
class _Base:
    x: int


@record
class _Derived(_Base):
    y: int = 2


def _twin(cls: type) -> type:
    """The same fields as a plain frozen, slotted dataclass (the reference behaviour)."""
    fields = [(f.name, f.type, f) for f in dataclasses.fields(cls)]
    return dataclasses.make_dataclass("Twin", [(n, t, dataclasses.field(
        default=f.default, default_factory=f.default_factory, init=f.init, kw_only=f.kw_only))
        for n, t, f in fields], frozen=True, slots=True)


@pytest.mark.parametrize("cls", [_Plain, _KwOnly, _Mixed, _Derived])
def test_signature_is_dataclass_signature(cls):
    assert str(inspect.signature(cls)) == str(inspect.signature(_twin(cls)))


def test_positional_keyword_and_defaults():
    p = _Plain(1)
    assert (p.a, p.b, p.c, p.d) == (1, "x", (), [])
    assert _Plain(2, "y", (3,)) == _Plain(a=2, b="y", c=(3,))
    assert _Plain(1).d is not _Plain(1).d  # a factory runs per instance
    given = [9]
    assert _Plain(1, d=given).d is given
    assert _Mixed(1, 8, b=6) == _Mixed(a=1, c=8, b=6)
    assert (_Mixed(1).b, _Mixed(1).c) == (5, 7)
    assert _Derived(1) == _Derived(x=1, y=2) and _Derived(1, 3).y == 3


def test_wrong_arguments_raise_as_dataclass_does():
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'a'"):
        _Plain()
    with pytest.raises(TypeError, match="takes 1 positional argument but 3 were given"):
        _KwOnly("n", 2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'zz'"):
        _Plain(1, zz=2)
    with pytest.raises(TypeError, match="multiple values for argument 'a'"):
        _Plain(1, a=2)


def test_post_init_and_init_false_fields():
    c = _Checked(2, 5)
    assert (c.span, c.seen) == (3, [])
    with pytest.raises(ValueError, match="low 6 above high 5"):
        _Checked(6, 5)
    with pytest.raises(TypeError):
        _Checked(1, 2, 3)  # span is not a parameter


def test_frozen_slotted_replace_and_equality():
    p = _Plain(1, d=[1])
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.a = 2
    assert not hasattr(p, "__dict__")
    q = dataclasses.replace(p, b="z")
    assert (q.a, q.b, q.d) == (1, "z", [1]) and q.d is p.d  # replace passes every init field on
    assert p == dataclasses.replace(p, d=[2])  # d is compare=False
    assert hash(p) == hash(_Plain(1))


def test_pydantic_validation_still_checks_and_runs_post_init():
    assert validate(_Checked, {"low": "1", "high": 4}).span == 3
    with pytest.raises(ValueError):
        validate(_Checked, {"low": 9, "high": 4})


def test_mistakes_in_a_record_class_are_refused_at_definition():
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record
        class _Bad:
            a: int = 1
            b: int
    with pytest.raises(ValueError, match="mutable default"):
        @record
        class _Shared:
            a: list = []  # noqa: RUF012 (the mistake under test)


def test_device_snapshot_fields_all_stored():
    names = [f.name for f in dataclasses.fields(DeviceSnapshot) if f.init]
    values = {n: (i if n not in ("name", "uuid", "vendor", "node") else f"v{i}") for i, n in enumerate(names)}
    d = DeviceSnapshot(**values)
    assert {n: getattr(d, n) for n in names} == values


def test_initvar_fields_reach_post_init():
    """An InitVar is passed to __post_init__ (the class keeps dataclass's own __init__ for it)."""

    @record
    class _Scaled:
        value: float
        factor: dataclasses.InitVar[float] = 1.0

        def __post_init__(self, factor: float) -> None:
            object.__setattr__(self, "value", self.value * factor)

    assert _Scaled(2.0, 3.0).value == 6.0 and _Scaled(2.0).value == 2.0
