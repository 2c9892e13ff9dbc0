"""Reading an image definition's file, bounded: a hostile file costs its own size and no more.

The file is read through the one bounded reader (a regular file, at most 1 MiB, UTF-8) and
parsed by a YAML SafeLoader that refuses what a definition never needs and a hostile file
abuses: anchors and aliases, merge keys, keys that are not strings or appear twice, nesting
beyond a bound and more nodes than a definition holds. Every key is then checked against the
definition's schema. Each refusal is one :class:`~torchpod.errors.InputError` line naming
the file (and the line, where YAML gives one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from torchpod import readers
from torchpod.errors import InputError

from .definition_values import shown

# Bounds on reading: a definition is a few hundred bytes and two levels deep; these leave
# room while keeping a hostile file cheap.
MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_NODES = 4096  # the largest shipped definition has about 60; PyYAML spends tens of us on each


def _printable(text: str) -> str:
    """``text`` on one line: what is not printable written as its escape (YAML's own
    messages quote the offending character, but a message must never break a line)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def read_text(path: Path, cap: int = MAX_FILE_BYTES, what: str = "a YAML image definition") -> str:
    """A regular file's text, at most ``cap`` bytes of UTF-8, through the one bounded reader
    (torchpod.readers): a FIFO, a device, a directory, a larger file or undecodable bytes
    are one line naming the file."""
    return readers.read_text(path, what=str(path), expected=what, cap=cap)


def _loader_class(path: Path):
    """A SafeLoader that refuses what a definition never needs and a hostile file abuses.

    Anchors and aliases are refused as the composer meets them (yaml/composer.py,
    ``compose_node``), before any node is copied, so a billion-laughs file costs its own
    size and no more; the composer is also the only recursive stage (the parser keeps an
    explicit state stack), so bounding its depth bounds the recursion, and counting its
    nodes bounds the time a large file costs. Keys must be strings, appear once, and merge
    keys (``<<``) are refused.
    """
    import yaml  # build-host dependency only

    class Loader(yaml.SafeLoader):
        depth = nodes = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise InputError(f"{path}: line {line}: YAML anchors and aliases (&name, *name) are not allowed; "
                                 "expected every value written out")
            if self.depth >= MAX_DEPTH:
                raise InputError(f"{path}: line {line}: nested deeper than {MAX_DEPTH} levels; expected a "
                                 "definition's two levels (torch: {version: ...})")
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise InputError(f"{path}: line {line}: more than {MAX_NODES} keys and values; expected an image "
                                 "definition (a few dozen)")
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_object(self, node, deep=False):
            try:
                return super().construct_object(node, deep=deep)
            except (ValueError, OverflowError) as exc:  # a scalar SafeLoader cannot build: 2024-13-45, 5000 digits
                raise InputError(f"{path}: line {node.start_mark.line + 1}: {shown(node.value)} cannot be read "
                                 f"({_printable(str(exc))}); expected quoted text for versions and names") from None

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise InputError(f"{path}: line {line}: merge keys (<<) are not allowed; expected the keys written out")
            key = loader.construct_object(key_node, deep=deep)
            if not isinstance(key, str):
                seen_as = shown(key) if isinstance(key_node, yaml.ScalarNode) else f"of type {type(key).__name__}"
                raise InputError(f"{path}: line {line}: key {seen_as} is not a string; expected a name "
                                 "such as 'torch' (quote it)")
            if key in seen:
                raise InputError(f"{path}: line {line}: key {key!r} appears twice; "
                                 "expected each key once (one net plugin, one torch, ...)")
            seen.add(key)
        return yaml.SafeLoader.construct_mapping(loader, node, deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def read_yaml(path: Path, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The definition in ``path``: a mapping whose keys ``schema`` knows, each of its type."""
    import yaml  # build-host dependency only

    text = read_text(path)
    loader = None
    try:
        loader = _loader_class(path)(text)  # the reader refuses non-printable characters here
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark is not None else ""
        said = " ".join(filter(None, (getattr(exc, "context", None), getattr(exc, "problem", None))))
        problem = said or (str(exc).splitlines() or ["?"])[0]
        raise InputError(f"{path}:{where} malformed YAML: {_printable(problem)}") from None
    finally:
        if loader is not None:
            loader.dispose()
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of keys at the top level, got {type(data).__name__}")
    check_keys(path, data, schema, "")
    return data


def check_keys(path: Path, data: Mapping[str, Any], schema: Mapping[str, Any], prefix: str) -> None:
    """Every key of ``data`` one ``schema`` names, its value of the type named there (a nested
    schema for a mapping); ``prefix`` is the dotted path of ``data`` in the file."""
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if key not in schema:
            raise InputError(
                f"{path}: unknown key {dotted!r}; expected one of "
                f"{', '.join(prefix + k for k in schema)}"
            )
        expected = schema[key]
        if isinstance(expected, dict):
            if not isinstance(value, dict):
                raise InputError(f"{path}: {dotted!r} must be a mapping, got {shown(value)}")
            check_keys(path, value, expected, dotted + ".")
        elif not isinstance(value, expected):
            raise InputError(
                f"{path}: {dotted!r} must be a {expected.__name__}, got {shown(value)} "
                + ("(quote version numbers: \"3.11\")" if expected is str else "")
            )
