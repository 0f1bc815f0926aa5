"""Help text in the classic form: ``--out PATH``, ``--workers INTEGER``, flags without a type,
arguments named for what they are (``DATASET``, ``SOURCE``).

Typer 0.2x prints types as ``<bool>``, ``<list[Path]>`` and a required argument as ``{out}``
(issue #17); these three display hooks of typer's parameter classes put click's names back. Only
how help is drawn changes, never parsing."""

from __future__ import annotations

from typing import Any

# no `import click`: typer >= 0.2x vendors its own copy (typer._click) and a fresh install has no
# click at all, so parameter types are recognised by what they have, not by their class

# Positional arguments holding a built dataset, whatever the function's variable is called
_DATASET_NAMES = {"dataset", "out", "directory", "dataset_dir"}


_NAMES = {bool: None, int: "INTEGER", float: "FLOAT", str: "TEXT"}


def _type_name(param: Any) -> str | None:
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return None
    t = getattr(param, "type", None)
    choices = getattr(t, "choices", None)
    if choices and not isinstance(choices, str):  # a Choice type, whichever click it comes from
        return "[" + "|".join(str(c) for c in choices) + "]"
    desc = getattr(param, "type_descriptor", None)  # typer >= 0.2x: the annotation behind the type
    if desc is not None:
        if getattr(desc, "is_choice", False):
            return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices or ()) + "]"
        if getattr(desc, "is_path", False):
            return "PATH"
        ann = desc.annotation
        args = getattr(ann, "__args__", None)
        if args and getattr(ann, "__origin__", None) is list:
            ann = args[0]
        if ann in _NAMES:
            return _NAMES[ann]
        if isinstance(ann, type) and issubclass(ann, __import__("pathlib").PurePath):
            return "PATH"
    name = (getattr(t, "name", "") or "").upper()
    return None if name == "BOOLEAN" else (name or "TEXT")


def _arg_name(param: Any) -> str:
    if param.metavar:
        return str(param.metavar)
    name = str(param.name or "arg")
    return "DATASET" if name in _DATASET_NAMES else name.upper()


def plain_placeholders() -> None:
    from typer import core

    def option_type(self: Any, ctx: Any) -> str | None:
        if self.metavar is not None:
            return str(self.metavar)
        t = _type_name(self)
        return None if t is None else t + ("..." if self.nargs != 1 or getattr(self, "multiple", False) else "")

    def argument_type(self: Any, ctx: Any) -> str | None:
        return None  # the argument's name says it (DATASET, SOURCE, PATH)

    def display_name_raw(self: Any) -> str:
        return _arg_name(self)

    def usage_name(self: Any) -> str:
        name = _arg_name(self)
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    core.TyperOption.display_type_rich = option_type  # type: ignore[method-assign]
    core.TyperArgument.display_type_rich = argument_type  # type: ignore[method-assign]
    core.TyperArgument.display_name_raw = property(display_name_raw)  # type: ignore[assignment,method-assign]
    core.TyperArgument._usage_display_name = usage_name  # type: ignore[method-assign]
