"""The embedder registry: a spec string (``minilm``, ``st:<dir>``, ``ollama:<model>``) names a
factory; :func:`register` adds one, :func:`make_embedder` builds from a spec. The built-in
backends register in :mod:`hybrid.embedders`; this module imports none of them, so a backend
that builds another embedder (late interaction) can use the registry without a circle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hybrid.core.errors import ConfigError
from hybrid.embedders.base import Embedder

DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"


@dataclass(frozen=True)
class Options:
    """The settings a factory may read; every factory gets all of them."""
    ollama_host: str = DEFAULT_OLLAMA_HOST
    batch_size: int = 32


Factory = Callable[[str, Options], Embedder]  # (argument after the colon, or "" for exact names)


class UnknownSpec(Exception):
    """Raised by a factory whose argument does not fit (``hash:abc``, ``st:`` with no directory);
    :func:`make_embedder` reports it as an unknown spec, listing the registered ones."""


@dataclass(frozen=True)
class _Backend:
    factory: Factory
    spec_id: Callable[[str], str] | None
    usage: str


_EXACT: dict[str, _Backend] = {}
_KINDS: dict[str, _Backend] = {}


def register(name: str, factory: Factory, *, exact: bool,
             spec_id: Callable[[str], str] | None = None, usage: str | None = None) -> None:
    """Make ``name`` a spec. ``exact``: the whole spec is ``name``; otherwise ``name`` is a kind
    and specs look like ``name:<arg>``. ``factory(arg, options)`` builds the embedder (``arg`` is
    "" for exact names). ``spec_id(arg)`` is the id it will record, computed without loading
    anything (default: the spec itself). ``usage`` is how the unknown-spec error lists it
    (default: ``name``, or ``name:<arg>`` for a kind)."""
    if not exact and ":" in name:
        raise ValueError(f"an embedder kind cannot contain ':' ({name!r})")
    table = _EXACT if exact else _KINDS
    if name in table:
        raise ValueError(f"embedder {name!r} is already registered")
    table[name] = _Backend(factory, spec_id, usage or (name if exact else f"{name}:<arg>"))


def _lookup(spec: str) -> tuple[_Backend, str] | None:
    """The backend of ``spec`` and its argument; exact names win over kinds."""
    if spec in _EXACT:
        return _EXACT[spec], ""
    kind, _, arg = spec.partition(":")
    if kind in _KINDS:
        return _KINDS[kind], arg
    return None


def _unknown(spec: str) -> ConfigError:
    usages = [f"`{b.usage}`" for b in (*_EXACT.values(), *_KINDS.values())]
    listed = ", ".join(usages[:-1]) + " or " + usages[-1] if len(usages) > 1 else "".join(usages)
    return ConfigError(f"unknown embedder {spec!r}: use {listed}")


def make_embedder(spec: str, *, ollama_host: str = DEFAULT_OLLAMA_HOST,
                  batch_size: int = 32) -> Embedder:
    """Build an embedder from its spec string (see the module docstring). Loads no model: the
    backends load weights on their first embedding."""
    found = _lookup(spec)
    if found is None:
        raise _unknown(spec)
    backend, arg = found
    try:
        return backend.factory(arg, Options(ollama_host=ollama_host, batch_size=batch_size))
    except UnknownSpec:
        raise _unknown(spec) from None


def spec_id(spec: str) -> str:
    """The id an embedder spec will record in the catalog, without loading anything."""
    found = _lookup(spec)
    if found is None or found[0].spec_id is None:
        return spec
    backend, arg = found
    return backend.spec_id(arg)  # type: ignore[misc]
