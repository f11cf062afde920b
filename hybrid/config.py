"""Settings table, vault registry and on-disk locations.

Everything the user can configure is declared once in ``SETTINGS``; the README documents each one
and a test checks that it does. The config file is TOML::

    [settings]
    chunk_tokens = 200

    [vaults.notes]
    path = "/home/me/notes"
    exclude = ["archive/**"]

``HYBRID_HOME`` moves both the config file and the indexes (tests point it at a temp dir).
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError, VaultError

APP_NAME = "hybrid"
VAULT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str


SETTINGS: tuple[Setting, ...] = (
    Setting("embedder", "minilm",
            "Embedding model: `minilm` (bundled all-MiniLM-L6-v2), `minilm-onnx` / `minilm-int8` "
            "(the same model on ONNX Runtime, fp32 or int8; `pip install 'hybrid[onnx]'`), `ollama:<model>`, "
            "`st:<directory>` (a local sentence-transformers model), `hash:<dim>` (tests only)."),
    Setting("ollama_host", "http://127.0.0.1:11434", "Where the Ollama server listens."),
    Setting("chunk_tokens", 128,
            "Target chunk size in the embedder's own tokens (header included); never more than "
            "the model reads."),
    Setting("chunk_overlap", 32, "Tokens of trailing context repeated at the start of the next "
                                 "chunk when a long section is split."),
    Setting("context_header", True, "Prefix each embedded chunk with `title > heading path`."),
    Setting("batch_size", 32, "Texts per embedding batch."),
    Setting("max_file_bytes", 5_000_000, "Larger notes are skipped with a warning."),
    Setting("include", ["**/*.md"], "Globs (vault-relative) of files to index; a vault may "
                                    "override."),
    Setting("exclude", [], "Globs of files to leave out; a vault may add its own."),
    Setting("rrf_k", 10, "Reciprocal-rank-fusion constant k."),
    Setting("weight_lexical", 1.0, "Weight of the BM25 ranking in fusion."),
    Setting("weight_vector", 1.5, "Weight of the vector ranking in fusion."),
    Setting("candidates", 100, "How many hits each arm contributes to fusion (hybrid eval ranks the top 100, so the same depth keeps it faithful)."),
    Setting("fuzzy", True, "Match a word of 5+ letters that is absent from the index within one "
                           "edit (typo tolerance)."),
    Setting("stopwords", True, "Drop English function words from free-text queries in the BM25 arm "
                               "(never from phrases or the index)."),
    Setting("exact_first", True, "In hybrid mode, chunks containing every literal of the query "
                                 "(identifiers like `orders-created`, codes like `K7QX2M`) rank first, "
                                 "in fused order (BM25 order when the query is only literals)."),
    Setting("recency_months", 0, "Demote notes not modified for this many months (0 = off)."),
    Setting("recency_penalty", 0.1, "Fraction of the fused score taken off stale notes."),
    Setting("snippet_chars", 300, "Length of the snippet shown with each hit."),
    Setting("rerank_model", "", "Cross-encoder for `--rerank`: a local directory or a model name "
                                "already in the Hugging Face cache (empty = none)."),
    Setting("rerank_top_n", 30, "How many fused candidates the cross-encoder rescores."),
    Setting("ann_threshold", 50_000,
            "Vectors per vault at which an approximate FAISS IVF index replaces the exact flat one "
            "(0 = always exact). Rebuilt automatically when the vault crosses it."),
    Setting("ann_recall", 0.99,
            "Recall@10 against exact search that the IVF index's nprobe is calibrated to reach "
            "when it is built, as a fraction of what the stored codes allow (sq8 codes alone "
            "reach ~0.98); higher = slower queries."),
    Setting("vector_storage", "float32",
            "How FAISS stores vectors: `float32`, `float16` (half the memory) or `sq8` (8-bit "
            "scalar quantization, a quarter). Changing it rebuilds the vector index from the "
            "catalog, without re-embedding."),
)
CHOICES = {"vector_storage": ("float32", "float16", "sq8")}
SETTING_NAMES = {s.name for s in SETTINGS}
VAULT_KEYS = {"path", "include", "exclude", "embedder"}


def home_dir() -> Path | None:
    value = os.environ.get("HYBRID_HOME")
    return Path(value).expanduser() if value else None


def config_path() -> Path:
    home = home_dir()
    if home is not None:
        return home / "config.toml"
    import platformdirs
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def data_dir() -> Path:
    home = home_dir()
    if home is not None:
        return home / "data"
    import platformdirs
    return Path(platformdirs.user_data_dir(APP_NAME))


@dataclass
class Vault:
    name: str
    path: Path
    include: list[str]
    exclude: list[str]
    embedder: str
    index_dir: Path


@dataclass
class Config:
    settings: dict[str, Any] = field(default_factory=lambda: {s.name: s.default for s in SETTINGS})
    vaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path = field(default_factory=config_path)
    data: Path = field(default_factory=data_dir)

    def __getitem__(self, name: str) -> Any:
        return self.settings[name]

    def vault(self, name: str) -> Vault:
        if name not in self.vaults:
            known = ", ".join(sorted(self.vaults)) or "none registered"
            raise VaultError(f"unknown vault {name!r} (known: {known}); "
                             f"register one with `hybrid vault add PATH --name NAME`")
        raw = self.vaults[name]
        return Vault(
            name=name,
            path=Path(raw["path"]).expanduser(),
            include=list(raw.get("include") or self.settings["include"]),
            exclude=list(self.settings["exclude"]) + list(raw.get("exclude") or []),
            embedder=str(raw.get("embedder") or self.settings["embedder"]),
            index_dir=self.data / "vaults" / name,
        )

    def all_vaults(self) -> list[Vault]:
        return [self.vault(n) for n in sorted(self.vaults)]

    def select(self, names: list[str] | tuple[str, ...] | None) -> list[Vault]:
        """The named vaults, or all of them; an unknown name raises VaultError."""
        if not names:
            if not self.vaults:
                raise VaultError("no vaults registered; run `hybrid vault add PATH` or "
                                 "`hybrid index PATH`")
            return self.all_vaults()
        return [self.vault(n) for n in dict.fromkeys(names)]

    def add_vault(self, path: Path, name: str | None = None, include: list[str] | None = None,
                  exclude: list[str] | None = None) -> Vault:
        path = Path(path).expanduser().resolve()
        if not path.is_dir():
            raise VaultError(f"vault folder {str(path)!r} does not exist or is not a folder")
        name = name or re.sub(r"[^A-Za-z0-9_.-]+", "-", path.name).strip("-.") or "vault"
        if not VAULT_NAME_RE.match(name):
            raise VaultError(f"bad vault name {name!r}: use letters, digits, '-', '_' or '.'")
        for other, raw in self.vaults.items():
            if other != name and Path(raw["path"]).expanduser().resolve() == path:
                raise VaultError(f"{path} is already registered as vault {other!r}")
        entry: dict[str, Any] = dict(self.vaults.get(name, {}))
        entry["path"] = str(path)
        if include:
            entry["include"] = list(include)
        if exclude:
            entry["exclude"] = list(exclude)
        self.vaults[name] = entry
        return self.vault(name)

    def remove_vault(self, name: str) -> Vault:
        vault = self.vault(name)
        del self.vaults[name]
        return vault

    def save(self) -> None:
        import tomli_w
        defaults = {s.name: s.default for s in SETTINGS}
        changed = {k: v for k, v in self.settings.items() if defaults.get(k) != v}
        doc: dict[str, Any] = {}
        if changed:
            doc["settings"] = changed
        if self.vaults:
            doc["vaults"] = self.vaults
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".toml.tmp")
        tmp.write_text(tomli_w.dumps(doc), encoding="utf-8")
        os.replace(tmp, self.path)


def _check_setting(name: str, value: Any, where: str) -> Any:
    if name not in SETTING_NAMES:
        raise ConfigError(f"{where}: unknown setting {name!r} (known: {', '.join(sorted(SETTING_NAMES))})")
    default = next(s.default for s in SETTINGS if s.name == name)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0
    elif isinstance(default, list):
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    else:
        ok = isinstance(value, str) and (value != "" or name == "rerank_model")
    if ok and name in CHOICES:
        ok = value in CHOICES[name]
    if ok and name == "ann_recall":
        ok = 0 < value <= 1
    if not ok:
        hint = f"one of {', '.join(CHOICES[name])}" if name in CHOICES else f"like {default!r}"
        raise ConfigError(f"{where}: setting {name!r} must be {hint}, got {value!r}")
    return value


def load_config(home: Path | None = None) -> Config:
    """Read the config file (a missing file means defaults and no vaults). ``home`` plays the
    part of ``HYBRID_HOME``."""
    if home is not None:
        home = Path(home).expanduser()
        cfg = Config(path=home / "config.toml", data=home / "data")
    else:
        cfg = Config()
    path = cfg.path
    if not path.exists():
        return cfg
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or delete the file") from None
    for name, value in (doc.get("settings") or {}).items():
        cfg.settings[name] = _check_setting(name, value, str(path))
    for name, raw in (doc.get("vaults") or {}).items():
        if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
            raise ConfigError(f"{path}: vault {name!r} needs a `path` string")
        unknown = set(raw) - VAULT_KEYS
        if unknown:
            raise ConfigError(f"{path}: vault {name!r} has unknown keys {sorted(unknown)}")
        cfg.vaults[name] = raw
    return cfg


def override(cfg: Config, **values: Any) -> Config:
    """Apply programmatic setting overrides (``hybrid.open(chunk_tokens=128)``)."""
    for name, value in values.items():
        cfg.settings[name] = _check_setting(name, value, "override")
    return cfg
