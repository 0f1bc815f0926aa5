"""Arrow schemas for the IR, derived from ``radvqa.model`` itself, and fast IR <-> Arrow conversion.

The schemas are not written out by hand: they are compiled from the msgspec type information of the
structs (``QA``, ``SceneGraph``, ...), so a field added to ``model.py`` (with a default, at the end)
appears as a column without touching this file. Mapping:

- ``str`` / ``Literal[str]`` -> ``string``; ``int`` -> ``int64``; ``float`` -> ``float64``;
  ``bool`` -> ``bool``; ``X | None`` -> the type of X (Arrow fields are nullable);
- ``list[X]`` -> ``list<X>``; a nested ``Struct`` -> ``struct<...>``;
- ``dict[str, str]`` -> ``list<struct<key: string, value: string>>`` (insertion order kept).
  Arrow's ``map`` type would be the natural fit, but Hugging Face ``datasets`` cannot load it.

Conversion to Arrow is columnar: one Python list per leaf column (``attrgetter`` over the objects),
list offsets computed with numpy, nested lists of structs flattened once. This avoids building a
dict per row and per nested struct (``msgspec.to_builtins`` + ``Table.from_pylist``), which measured
~3x slower on QA rows (see benchmarks/scale.py ``--writer-only``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from itertools import chain
from operator import attrgetter
from typing import Any

import msgspec
import msgspec.inspect as mi
import numpy as np
import pyarrow as pa

from radvqa.model import QA, SceneGraph

# Bumped when the on-disk layout of a table changes (written into the Parquet schema metadata).
SCHEMA_VERSION = "1"

_KV = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.string())])

Converter = Callable[[Sequence[Any]], pa.Array]


def _strip_optional(t: mi.Type) -> mi.Type:
    if isinstance(t, mi.UnionType):
        rest = [x for x in t.types if not isinstance(x, mi.NoneType)]
        if len(rest) != 1:
            raise TypeError(f"unsupported union type for Arrow: {t}")
        return rest[0]
    return t


def _arrow_type(t: mi.Type) -> pa.DataType:
    t = _strip_optional(t)
    if isinstance(t, mi.StrType):
        return pa.string()
    if isinstance(t, mi.LiteralType):
        if all(isinstance(v, str) for v in t.values):
            return pa.string()
        return pa.int64()
    if isinstance(t, mi.BoolType):
        return pa.bool_()
    if isinstance(t, mi.IntType):
        return pa.int64()
    if isinstance(t, mi.FloatType):
        return pa.float64()
    if isinstance(t, mi.ListType):
        return pa.list_(_arrow_type(t.item_type))
    if isinstance(t, mi.DictType):
        return pa.list_(_KV)
    if isinstance(t, mi.StructType):
        return pa.struct([pa.field(f.name, _arrow_type(f.type)) for f in t.fields])
    raise TypeError(f"no Arrow mapping for msgspec type {t!r}")


def _is_scalar(t: mi.Type) -> bool:
    return isinstance(
        _strip_optional(t), (mi.StrType, mi.LiteralType, mi.BoolType, mi.IntType, mi.FloatType)
    )


def _compile(t: mi.Type) -> Converter:
    """A function turning a list of Python values of type ``t`` (``None`` allowed) into an Array."""
    t = _strip_optional(t)
    atype = _arrow_type(t)
    if _is_scalar(t):
        return lambda vals: pa.array(vals, type=atype)
    if isinstance(t, mi.ListType) and _is_scalar(t.item_type):
        # pyarrow converts nested lists of scalars in C++; nothing to gain by flattening by hand.
        return lambda vals: pa.array(vals, type=atype)
    if isinstance(t, mi.DictType):
        def conv_dict(vals: Sequence[Any]) -> pa.Array:
            return pa.array(
                [None if d is None else [{"key": k, "value": v} for k, v in d.items()] for d in vals],
                type=atype,
            )
        return conv_dict
    if isinstance(t, mi.ListType):
        item_conv = _compile(t.item_type)

        def conv_list(vals: Sequence[Any]) -> pa.Array:
            n = len(vals)
            has_null = None in vals  # C-level scan (identity first), much cheaper than a genexpr
            if has_null:
                mask = pa.array([v is None for v in vals], type=pa.bool_())
                vals = [() if v is None else v for v in vals]
            else:
                mask = None
            # map/chain run the per-element loop in C (no bytecode per list): ~2x a comprehension
            offsets = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(np.fromiter(map(len, vals), dtype=np.int64, count=n), out=offsets[1:])
            flat = list(chain.from_iterable(vals))
            child = item_conv(flat)
            return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), child, type=atype, mask=mask)

        return conv_list
    if isinstance(t, mi.StructType):
        names = [f.name for f in t.fields]
        getters = [attrgetter(nm) for nm in names]
        convs = [_compile(f.type) for f in t.fields]
        fields = list(atype)

        def conv_struct(vals: Sequence[Any]) -> pa.Array:
            if None in vals:
                children = [
                    c([None if v is None else g(v) for v in vals]) for g, c in zip(getters, convs)
                ]
                mask = pa.array([v is None for v in vals], type=pa.bool_())
                return pa.StructArray.from_arrays(children, fields=fields, mask=mask)
            children = [c(list(map(g, vals))) for g, c in zip(getters, convs)]
            if not vals:
                return pa.array([], type=atype)
            return pa.StructArray.from_arrays(children, fields=fields)

        return conv_struct
    raise TypeError(f"no Arrow converter for msgspec type {t!r}")


def _fixer(t: mi.Type) -> Callable[[Any], Any] | None:
    """Post-processing of ``Table.to_pylist()`` values back into msgspec-convertible builtins.
    Only dicts need it (stored as key/value lists); returns None when nothing below ``t`` does."""
    t = _strip_optional(t)
    if isinstance(t, mi.DictType):
        return lambda v: None if v is None else {kv["key"]: kv["value"] for kv in v}
    if isinstance(t, mi.ListType):
        inner = _fixer(t.item_type)
        if inner is None:
            return None
        return lambda v: None if v is None else [inner(x) for x in v]
    if isinstance(t, mi.StructType):
        subs = [(f.name, _fixer(f.type)) for f in t.fields]
        subs = [(n, fx) for n, fx in subs if fx is not None]
        if not subs:
            return None

        def fix_struct(v: Any) -> Any:
            if v is None:
                return None
            for n, fx in subs:
                if n in v:
                    v[n] = fx(v[n])
            return v

        return fix_struct
    return None


class ArrowCodec:
    """Schema plus converters for one msgspec Struct class (one table kind)."""

    def __init__(self, cls: type[msgspec.Struct], kind: str) -> None:
        info = mi.type_info(cls)
        assert isinstance(info, mi.StructType)
        self.cls = cls
        self.kind = kind
        self.names = [f.name for f in info.fields]
        self._getters = [attrgetter(n) for n in self.names]
        self._convs = [_compile(f.type) for f in info.fields]
        self.schema = pa.schema(
            [pa.field(f.name, _arrow_type(f.type)) for f in info.fields],
            metadata={b"radvqa.kind": kind.encode(), b"radvqa.schema_version": SCHEMA_VERSION.encode()},
        )
        self._fix = _fixer(info)

    def to_table(self, objs: Sequence[msgspec.Struct]) -> pa.Table:
        cols = [c(list(map(g, objs))) for g, c in zip(self._getters, self._convs)]
        return pa.Table.from_arrays(cols, schema=self.schema)

    def to_table_pylist(self, objs: Sequence[msgspec.Struct]) -> pa.Table:
        """Reference (slower) path through builtins; kept to check the fast path against it."""
        rows = [msgspec.to_builtins(o) for o in objs]
        for r in rows:
            for f in self.schema:
                if pa.types.is_list(f.type) and f.type.value_type == _KV and isinstance(r.get(f.name), dict):
                    r[f.name] = [{"key": k, "value": v} for k, v in r[f.name].items()]
        return pa.Table.from_pylist(rows, schema=self.schema)

    def from_rows(self, rows: Iterable[dict[str, Any]]) -> list[Any]:
        rows = list(rows)
        if self._fix is not None:
            rows = [self._fix(r) for r in rows]
        return msgspec.convert(rows, type=list[self.cls])

    def from_table(self, table: pa.Table | pa.RecordBatch) -> list[Any]:
        return self.from_rows(table.to_pylist())

    def check_schema(self, schema: pa.Schema) -> list[str]:
        """Differences between ``schema`` and the expected one (empty list = compatible)."""
        problems = []
        expected = {f.name: f.type for f in self.schema}
        got = {f.name: f.type for f in schema}
        for name, typ in expected.items():
            if name not in got:
                problems.append(f"missing column {name!r}")
            elif not got[name].equals(typ):
                problems.append(f"column {name!r} has type {got[name]}, expected {typ}")
        for name in got:
            if name not in expected:
                problems.append(f"unexpected column {name!r}")
        return problems


@lru_cache(maxsize=None)
def codec(kind: str) -> ArrowCodec:
    """``codec("qa")`` / ``codec("scene_graphs")``."""
    if kind == "qa":
        return ArrowCodec(QA, "qa")
    if kind == "scene_graphs":
        return ArrowCodec(SceneGraph, "scene_graphs")
    raise KeyError(f"unknown table kind {kind!r} (expected 'qa' or 'scene_graphs')")


def qa_schema() -> pa.Schema:
    return codec("qa").schema


def scene_graph_schema() -> pa.Schema:
    return codec("scene_graphs").schema


def qa_to_table(qas: Sequence[QA]) -> pa.Table:
    return codec("qa").to_table(qas)


def scene_graphs_to_table(sgs: Sequence[SceneGraph]) -> pa.Table:
    return codec("scene_graphs").to_table(sgs)


def table_to_qa(table: pa.Table) -> list[QA]:
    return codec("qa").from_table(table)


def table_to_scene_graphs(table: pa.Table) -> list[SceneGraph]:
    return codec("scene_graphs").from_table(table)
