"""Records read from user input: plain frozen dataclasses, validated by pydantic only when needed.

``ModelArch``, ``Accelerator``, ``Workload`` and the interconnect/capability rows are
:func:`record` classes (frozen, slotted dataclasses) deriving from :class:`Record`. Their annotations are
the one definition of each field: they name pydantic's constrained types (``PositiveInt``,
``PositiveFloat``, ``NonNegativeInt``, ``NonEmptyStr``, ``UnitFraction``) as strings (every record
module has ``from __future__ import annotations``), which nothing evaluates until a value from a
file or a user must be checked: then :func:`validate` builds a pydantic ``TypeAdapter`` for the
class, resolving those names here, and validates (coercion, constraints, ``extra="forbid"`` via
``__pydantic_config__``, then the record's ``__post_init__`` cross-field rules).

Why: importing pydantic and building its schemas cost ``fleet-tui size`` ~100 ms of a ~200 ms run
(bench/bench_catalog.py); a record built by our own code or read from the compiled catalog needs
neither. Constructing a record directly runs only ``__post_init__`` (types are the caller's job, as
with pydantic's ``model_construct``); :func:`validate` is for outside data.

:class:`Record` keeps the small pydantic-style API callers already use (``model_copy``,
``model_dump``, ``model_dump_json``, ``model_validate``, ``model_fields``), implemented on
:mod:`dataclasses`.
"""

from __future__ import annotations

import dataclasses
import operator
import threading
from typing import Any, TypeVar

R = TypeVar("R", bound="Record")
T = TypeVar("T", bound=type)


def record(cls: T | None = None, /, *, kw_only: bool = False) -> Any:
    """``@dataclass(frozen=True, slots=True)``, with ``__eq__``, ``__hash__`` and ``__repr__`` built
    without :func:`exec`.

    Why: on Python < 3.13 :mod:`dataclasses` compiles every generated method from source text with
    its own ``exec``: six for a frozen class, ~0.6 ms a class, 28 ms of the 87 ms a ``fleet-tui
    size`` process took (it defines 36 of them; cProfile). Here dataclasses compiles only the frozen
    ``__setattr__``/``__delattr__``, and :func:`_init_of` one ``__init__`` that stores the fields
    through their slots (2.6x faster to build: sources build a snapshot per device per reading);
    equality and hashing compare the same fields in the same order through one
    :func:`operator.attrgetter` (C code, as fast as the generated methods), and the repr reads the
    same. The semantics are dataclass's: the same ``__init__`` parameters, defaults, factories and
    ``__post_init__`` call (tests/core/test_records.py), ``compare=False`` fields are left out of
    equality and hashing, ``hash=`` and ``repr=False`` on a field are honoured, a method the class
    defines itself is kept, and instances of another class never compare equal.
    """

    def wrap(c: T) -> T:
        body = c.__dict__
        own_eq, own_repr = "__eq__" in body, "__repr__" in body
        own_hash = "__hash__" in body and not (body["__hash__"] is None and own_eq)
        # dataclass's own __init__ where the class writes one or has InitVar pseudo-fields (which
        # _init_of does not pass to __post_init__)
        annotations = body.get("__annotations__", {})
        own_init = "__init__" in body or any("InitVar" in str(a) for a in annotations.values())
        c = dataclasses.dataclass(c, frozen=True, slots=True, kw_only=kw_only, eq=False, repr=False,
                                  init=own_init)
        fields = dataclasses.fields(c)
        qual = c.__qualname__
        if not own_init:
            c.__init__ = _named(_init_of(c, fields), qual, "__init__")
        compared = tuple(f.name for f in fields if f.compare)
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        shown = tuple(f.name for f in fields if f.repr)
        if not own_eq:
            c.__eq__ = _named(_eq_by(_key(compared)), qual, "__eq__")
        if not own_hash:
            c.__hash__ = _named(_hash_by(_key(hashed)), qual, "__hash__")
        if not own_repr:
            c.__repr__ = _named(_repr_of(shown), qual, "__repr__")
        return c

    return wrap if cls is None else wrap(cls)


def _init_of(c: type, fields: tuple[dataclasses.Field, ...]) -> Any:
    """``__init__`` for the frozen, slotted class ``c``: dataclass's parameters, defaults, default
    factories, keyword-only fields and ``__post_init__`` call, but each field stored through its
    slot's own descriptor (bound once, a closure variable) instead of dataclass's
    ``object.__setattr__`` looked up per field. Why: a 43-field ``DeviceSnapshot`` took 7.1 us to
    build, now 2.7 us, and every source builds one per device per reading (bench_sources.py). One
    exec per class, as dataclass's own ``__init__`` would have taken."""
    env: dict[str, Any] = {"__fi_missing": _FACTORY}
    annotations: dict[str, Any] = {}
    params: list[str] = []
    kw_params: list[str] = []
    lines: list[str] = []
    seen_default = False
    for i, f in enumerate(fields):
        setter = f"__fi_set{i}"
        env[setter] = _slot_of(c, f.name).__set__
        if f.default is not dataclasses.MISSING:
            env[f"__fi_default{i}"] = f.default
            value = f"__fi_default{i}"
        elif f.default_factory is not dataclasses.MISSING:
            env[f"__fi_factory{i}"] = f.default_factory
            value = f"__fi_factory{i}()"
        else:
            value = None
        if not f.init:
            if value is not None:
                lines.append(f"{setter}(self, {value})")
            continue
        annotations[f.name] = f.type
        if value is None:
            param = f.name
            if seen_default and not f.kw_only:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
        elif f.default is not dataclasses.MISSING:
            param = f"{f.name}={value}"
        else:  # a factory runs per instance, when the caller gave no value
            param = f"{f.name}=__fi_missing"
            lines.append(f"if {f.name} is __fi_missing: {f.name} = {value}")
        if f.kw_only:
            kw_params.append(param)
        else:
            seen_default = seen_default or value is not None
            params.append(param)
        lines.append(f"{setter}(self, {f.name})")
    if hasattr(c, "__post_init__"):
        lines.append("self.__post_init__()")
    signature = ", ".join(["self", *params, *(["*", *kw_params] if kw_params else [])])
    names = ", ".join(env)
    body = "\n".join(f"        {line}" for line in lines or ["pass"])
    source = f"def __make({names}):\n    def __init__({signature}):\n{body}\n    return __init__\n"
    scope: dict[str, Any] = {}
    exec(source, {}, scope)
    init = scope["__make"](**env)
    init.__annotations__ = {**annotations, "return": None}
    return init


class _Factory:
    """The default a field with a default factory shows in the signature, as dataclass's does."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _slot_of(c: type, name: str) -> Any:
    """The member descriptor that stores field ``name`` of the slotted class ``c`` (or a base)."""
    for k in c.__mro__:
        slot = k.__dict__.get(name)
        if slot is not None:
            return slot
    raise TypeError(f"{c.__qualname__}.{name} has no slot")


def _key(names: tuple[str, ...]) -> Any:
    if not names:
        return lambda obj: ()
    get = operator.attrgetter(*names)
    return get if len(names) > 1 else (lambda obj: (get(obj),))


def _eq_by(key: Any) -> Any:
    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash_by(key: Any) -> Any:
    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


def _repr_of(names: tuple[str, ...]) -> Any:
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in names)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _named(fn: Any, qual: str, name: str) -> Any:
    fn.__qualname__ = f"{qual}.{name}"
    return fn

#: ``extra="forbid"`` for every record (an unknown key in a file is a located problem).
FORBID_EXTRA = {"extra": "forbid"}


class _FieldsOf:
    """``Record.model_fields``: field name -> :class:`dataclasses.Field`, in declaration order."""

    def __get__(self, obj: Any, cls: type) -> dict[str, dataclasses.Field]:
        return {f.name: f for f in dataclasses.fields(cls)}


def _dump(value: Any, json_mode: bool) -> Any:
    if isinstance(value, Record):
        return value.model_dump(mode="json" if json_mode else "python")
    if isinstance(value, (tuple, list)):
        items = [_dump(v, json_mode) for v in value]
        return items if json_mode or isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _dump(v, json_mode) for k, v in value.items()}
    return value


class Record:
    """Base of the validated records (see the module docstring). Subclasses are frozen dataclasses."""

    __slots__ = ()
    model_fields = _FieldsOf()

    def model_copy(self: R, update: dict[str, Any] | None = None) -> R:
        """A copy with ``update`` applied (not type-checked, as pydantic's ``model_copy``; the
        record's cross-field rules run again)."""
        return dataclasses.replace(self, **(update or {}))

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        """Fields as a dict in declaration order; ``mode="json"``: tuples as lists, nested records
        as dicts (what ``json.dumps`` needs)."""
        return {f.name: _dump(getattr(self, f.name), mode == "json") for f in dataclasses.fields(self)}

    def model_dump_json(self) -> str:
        import json  # rarely used: a command that prints no JSON need not import it

        return json.dumps(self.model_dump(mode="json"), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def model_validate(cls: type[R], data: Any) -> R:
        """``data`` (a mapping) checked and coerced; raises ``pydantic.ValidationError``."""
        return validate(cls, data)


_ADAPTERS: dict[type, Any] = {}
_ADAPTERS_LOCK = threading.Lock()


def _new_adapter(cls: type) -> Any:
    # The names the record annotations use: pydantic resolves a dataclass's string annotations in
    # its module and then in the frame that creates the TypeAdapter, i.e. these locals.
    from typing import Annotated

    from pydantic import Field, NonNegativeInt, PositiveFloat, PositiveInt, StringConstraints, TypeAdapter  # noqa: F401 (see above)

    NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]  # noqa: F841
    UnitFraction = Annotated[float, Field(gt=0, le=1)]  # noqa: F841
    return TypeAdapter(cls)


def validate(cls: type[R], data: Any) -> R:
    """An instance of the record class ``cls`` from ``data`` (a mapping), checked by pydantic.

    Raises ``pydantic.ValidationError`` (callers turn it into located problems or a UserError).
    """
    adapter = _ADAPTERS.get(cls)
    if adapter is None:
        with _ADAPTERS_LOCK:
            adapter = _ADAPTERS.get(cls)
            if adapter is None:
                adapter = _ADAPTERS[cls] = _new_adapter(cls)
    return adapter.validate_python(data)
