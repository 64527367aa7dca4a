"""What is wrong with a configuration msgspec refused, said for a person: the key as it is written
in the file (``[daemon] debounce_ms``), the value, where it came from (the file, a TARS_*
variable or the command line), and the values the key allows, read from the settings' own types.

msgspec's own message ("Expected `int` >= 0 - at `$.daemon.debounce_ms`") has all of it but the
origin, in its own notation; this turns it into a sentence that says what to change.
"""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import msgspec
import msgspec.inspect as types

# msgspec's "- at `$.daemon.debounce_ms`", and a dict's entry in the path as "[...]".
_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
MAX_SHOWN = 200  # characters of a refused value shown in the message
_LIST_ITEM = re.compile(r"\[\d+\]$")
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<name>[^`]+)`")


def explain(exc: msgspec.ValidationError, data: dict, root: type, origins: dict[tuple[str, str], str], file: Path) -> str:
    """One line: which key, its value, where it came from, and what it may be. ``origins`` names
    the keys set elsewhere than the file ("TARS_DAEMON_DEBOUNCE_MS", "the command line")."""
    found = _AT.match(str(exc))
    what, path = (found["what"], found["path"] or "") if found else (str(exc), "")
    # An entry of a table of tables ([mcp.servers.NAME]) is "[...]" in the path: a part of its own.
    # A list's item ("deliver[1]") is the list's key: the whole list is shown with what it may hold.
    parts = [_LIST_ITEM.sub("", p) or "[...]" for p in path.replace("[...]", ".").split(".")[1:]]
    names = _named_entries(parts, data, types.type_info(root))
    struct = _struct_at(types.type_info(root), names)
    unknown = _UNKNOWN.match(what)
    if unknown and isinstance(struct, types.StructType):
        keys = ", ".join(f.name for f in struct.fields)
        if not names:
            return f"there is no section [{unknown['name']}] (in {file}); the sections are: {keys}"
        return f"[{'.'.join(names)}] has no key {unknown['name']!r} (in {file}); its keys are: {keys}"
    if len(names) == 1:  # `vault = "x"` where a [vault] table belongs
        return f"{names[0]} = {_shown(data.get(names[0]))} in {file} is not allowed: it must be a table, [{names[0]}]"
    if not names:
        return f"{what} (in {file})"
    *table, key = names
    field = _struct_at(types.type_info(root), table)
    info = next((f.type for f in field.fields if f.name == key), None) if isinstance(field, types.StructType) else None
    if info is None:
        return f"[{'.'.join(table)}] {key}: {what} (in {file})"
    value = data
    for name in names:
        value = value.get(name) if isinstance(value, dict) else None
    origin = origins.get((table[0], key)) if len(table) == 1 else None
    if origin:  # an environment variable's or an option's text, as typed (quoted when it holds controls)
        shown = value if isinstance(value, str) and value.isprintable() and len(value) <= MAX_SHOWN else _shown(value)
        where = f"from {origin}"
    else:
        shown, where = _shown(value), f"in {file}"
    return f"[{'.'.join(table)}] {key} = {shown} {where} is not allowed: it must be {allowed(_declared(field.cls, key, info))}"


def allowed(info: types.Type) -> str:
    """The values a setting's type allows, in words: 'one of "debug", "info"', 'a whole number, 0 or more'."""
    if isinstance(info, types.Metadata):
        # A string with a pattern says in its description what the pattern allows: a regex is no help to a person.
        described = (info.extra_json_schema or {}).get("description")
        return described if described else allowed(info.type)
    if isinstance(info, types.LiteralType):
        return "one of " + ", ".join(json.dumps(v) for v in info.values)
    if isinstance(info, types.UnionType):
        return " or ".join(allowed(t) for t in info.types if not isinstance(t, types.NoneType))
    if isinstance(info, types.IntType):
        return "a whole number" + _range(info)
    if isinstance(info, types.FloatType):
        return "a number" + _range(info)
    if isinstance(info, types.BoolType):
        return "true or false"
    if isinstance(info, types.StrType):
        return "a string in quotes"
    if isinstance(info, types.ListType) and isinstance(info.item_type, types.LiteralType):
        return "a list of " + allowed(info.item_type)  # [routines] deliver: 'a list of one of "inbox", ...'
    if isinstance(info, types.ListType):
        return 'a list of strings in quotes, e.g. ["a", "b"]'  # the settings' other lists
    return "a table"


def _declared(struct: type, key: str, info: types.Type) -> types.Type:
    """A set of words in the order the settings list them (msgspec sorts them): the usual one first."""
    hint = typing.get_type_hints(struct).get(key)
    if isinstance(info, types.LiteralType) and typing.get_origin(hint) is typing.Literal:
        return types.LiteralType(values=typing.get_args(hint))
    return info


def _range(info: types.IntType | types.FloatType) -> str:
    low = f"{info.ge:g} or more" if info.ge is not None else f"more than {info.gt:g}" if info.gt is not None else ""
    high = f"at most {info.le:g}" if info.le is not None else f"less than {info.lt:g}" if info.lt is not None else ""
    if info.ge is not None and info.le is not None:
        return f", from {info.ge:g} to {info.le:g}"
    return ", " + " and ".join(p for p in (low, high) if p) if low or high else ""


def _named_entries(parts: list[str], data: dict, root: types.Type) -> list[str]:
    """msgspec writes an entry of a dict as "[...]": find which one it was by checking each."""
    names: list[str] = []
    for part in parts:
        if part != "[...]":
            names.append(part)
            continue
        entries: object = data
        for name in names:
            entries = entries.get(name, {}) if isinstance(entries, dict) else {}
        table = _struct_at(root, names)
        found = _first_bad(entries, table.value_type) if isinstance(table, types.DictType) else None
        names.append(found if found is not None else "NAME")
    return names


def _first_bad(entries: object, entry_type: types.Type) -> str | None:
    if not isinstance(entries, dict) or not isinstance(entry_type, types.StructType):
        return None
    for name, entry in entries.items():
        try:
            msgspec.convert(entry, entry_type.cls, strict=False)
        except msgspec.ValidationError:
            return name
    return None


def _struct_at(info: types.Type, names: list[str]) -> types.Type | None:
    for name in names:
        if isinstance(info, types.DictType):
            info = info.value_type
            continue
        if not isinstance(info, types.StructType):
            return None
        info = next((f.type for f in info.fields if f.name == name), None)
        if info is None:
            return None
    return info


def _shown(value: object) -> str:
    """The value about as TOML writes it; escaped, so a stray control character cannot reach the terminal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str) and len(value) > MAX_SHOWN:
        return json.dumps(value[:MAX_SHOWN]) + "..."
    return json.dumps(value, default=str)  # a TOML date or time is shown as its text
