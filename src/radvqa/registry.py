"""One registry idiom for every extension point: name -> implementation, filled by a decorator
where the implementation is defined, its modules imported only on the first lookup.

    SOURCES = Registry("source", modules=("radvqa.sources.openi", "radvqa.sources.nih", ...))

    @SOURCES.register("openi")          # in radvqa/sources/openi.py
    class OpenISource: ...

    SOURCES.get("openi")                # imports the listed modules until "openi" is registered
    SOURCES.names()                     # every registered name (imports all listed modules)

Plugins and tests register the same way (``@SOURCES.register("mine")``, or ``SOURCES.add(name,
obj)``), or list a module with ``SOURCES.add_module("pkg.mod")``. A name registered twice is an
error, as is a lookup of an unknown name (the message lists the known ones).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, modules: Iterable[str] = ()) -> None:
        self.kind = kind  # "source", "extractor", ... (for messages)
        self._modules = list(modules)
        self._imported: set[str] = set()
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: ``@REG.register("name")`` on a class or function."""

        def deco(obj: T) -> T:
            self.add(name, obj)
            return obj

        return deco

    def add(self, name: str, obj: T) -> None:
        old = self._items.get(name)
        if old is not None and old is not obj:
            raise ValueError(f"{self.kind} {name!r} is registered twice ({old!r} and {obj!r})")
        self._items[name] = obj

    def add_module(self, module: str) -> None:
        """A module whose import registers more names (plugins)."""
        if module not in self._modules:
            self._modules.append(module)

    def _load(self, until: str | None = None) -> None:
        for m in self._modules:
            if until is not None and until in self._items:
                return
            if m not in self._imported:
                importlib.import_module(m)
                self._imported.add(m)

    def get(self, name: str) -> T:
        if name not in self._items:
            self._load(until=name)
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}") from None

    def names(self) -> tuple[str, ...]:
        """Every name: those of the listed modules in the modules' order (within a module, in
        registration order), then the others (plugins) in registration order. The order does not
        depend on which lookups came first."""
        self._load()
        rank = {m: i for i, m in enumerate(self._modules)}
        items = list(self._items.items())
        order = sorted(range(len(items)),
                       key=lambda i: (rank.get(getattr(items[i][1], "__module__", ""), len(rank)), i))
        return tuple(items[i][0] for i in order)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        if name not in self._items:
            self._load(until=name)
        return name in self._items
