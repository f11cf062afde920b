"""The embedder registry: a spec string (``minilm``, ``st:<dir>``, ``ollama:<model>``) names a
factory; :func:`register` adds one, :func:`make_embedder` builds from a spec. The built-in
backends register in :mod:`hybrid.embedders`; this module imports none of them, so a backend
that builds another embedder (late interaction) can use the registry without a circle."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import ConfigError
from hybrid.embedders.base import Embedder

if TYPE_CHECKING:
    from hybrid.core.settings import Settings

DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"


@dataclass(frozen=True)
class Options:
    """The settings a factory may read; every factory gets all of them. ``redact`` is the
    secrets redactor (:mod:`hybrid.store.agent.redact`, a layer above this one) that model
    servers' backends pass text through before it leaves the machine: without it they refuse
    to send text anywhere but this machine (see :mod:`hybrid.embedders.remote`)."""
    ollama_host: str = DEFAULT_OLLAMA_HOST
    batch_size: int = 32
    openai_base_url: str = ""
    openai_api_key_env: str = "OPENAI_API_KEY"
    rerank_base_url: str = ""
    rerank_api_key_env: str = "RERANK_API_KEY"
    remote_timeout: float = 60.0
    remote_retries: int = 4
    redact_outbound: str = "remote"
    redact: Callable[[str], str] | None = None


def options_from(settings: Settings, redact: Callable[[str], str] | None = None) -> Options:
    """The factories' options from a handle's settings (every field of Options but ``redact``
    is a setting of the same name)."""
    values: dict[str, Any] = {f.name: getattr(settings, f.name) for f in fields(Options) if f.name != "redact"}
    return Options(**values, redact=redact)


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
                  batch_size: int = 32, options: Options | None = None) -> Embedder:
    """Build an embedder from its spec string (see the module docstring). Loads no model: the
    backends load weights on their first embedding. ``options`` (see :func:`options_from`)
    replaces ``ollama_host`` and ``batch_size``."""
    found = _lookup(spec)
    if found is None:
        raise _unknown(spec)
    backend, arg = found
    try:
        return backend.factory(arg, options or Options(ollama_host=ollama_host, batch_size=batch_size))
    except UnknownSpec:
        raise _unknown(spec) from None


def spec_id(spec: str) -> str:
    """The id an embedder spec will record in the catalog, without loading anything."""
    found = _lookup(spec)
    if found is None or found[0].spec_id is None:
        return spec
    backend, arg = found
    return backend.spec_id(arg)  # type: ignore[misc]
