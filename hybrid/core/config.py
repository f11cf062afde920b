"""Settings table, vault registry and on-disk locations.

Everything the user can configure is declared once, in :class:`hybrid.core.settings.Settings`; the
docs/configuration.md documents each one and a test checks that it does. The config file is TOML::

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
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybrid.core.errors import ConfigError, VaultError
from hybrid.core.kinds import VAULT_KINDS, ocr_globs  # VAULT_KINDS: a folder, a bookmarks export, a Slack export
from hybrid.core.settings import NAMES, SETTINGS, Setting, Settings

__all__ = ["SETTINGS", "Setting", "Settings", "Config", "Vault", "load_config", "override"]

APP_NAME = "hybrid"
# A vault name becomes a folder name under the data dir, so it must never be a path: no '/',
# no leading '.', nothing that resolves elsewhere ('..', '/tmp/v').
VAULT_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
CONFIG_LOCK_TIMEOUT = 30.0
# Beside each index folder <name> live <name>.lock and, during a re-embed, <name>.reembed-*.
RESERVED_SUFFIX_RE = re.compile(r"\.(lock|reembed-[a-z]+)$", re.I)


def check_vault_name(name: object, where: str = "vault name") -> str:
    """``name`` if it is a safe vault name, else VaultError naming the rule."""
    if not isinstance(name, str) or not VAULT_NAME_RE.fullmatch(name) or ".." in name:
        raise VaultError(f"{where} {name!r} is not allowed: use up to 64 letters, digits, '-', '_' "
                         f"or '.', starting with a letter or digit")
    if RESERVED_SUFFIX_RE.search(name):
        raise VaultError(f"{where} {name!r} is not allowed: names ending in .lock or "
                         f".reembed-… are hybrid's own files beside the index folders")
    return name


VAULT_KEYS = {"path", "include", "exclude", "embedder", "agent_exclude", "store", "kind",
              "exclude_sections", "exclude_blocks", "ocr", "ocr_languages"}
# the settings a vault's table may hold: `include`, `embedder`, `store`, `ocr` and `ocr_languages`
# replace the setting for that vault, the others add to it (see Config.vault)
VAULT_SETTINGS = ("include", "exclude", "embedder", "agent_exclude", "store", "exclude_sections",
                  "exclude_blocks", "ocr", "ocr_languages")
ADDS_TO_SETTING = ("exclude", "agent_exclude", "exclude_sections", "exclude_blocks")
# the vault keys whose values are checked by the setting's rule when the file is read
CHECKED_VAULT_KEYS = ("exclude_sections", "exclude_blocks", "ocr", "ocr_languages")


def _real(path: str) -> Path:
    """A vault folder after ``~`` and symlinks (it may not exist on this machine)."""
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(Path(path).expanduser()))


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
    agent_exclude: list[str] = field(default_factory=list)  # the settings' and the vault's own
    store: str | None = None  # where its store is (hybrid.core.store_url): none/"" local files
    kind: str = "notes"  # or "bookmarks" / "slack": ``path`` is then that export (a file or folder)
    # other vaults whose folders overlap this one's, as (name, prefix, inside, their
    # agent_exclude): see hybrid.store.agent.view.Reach
    agent_reach: list[tuple[str, str, bool, tuple[str, ...]]] = field(default_factory=list)
    # headings and code block languages left out of its notes (the settings' and the vault's
    # own): see hybrid.sources.sections
    exclude_sections: list[str] = field(default_factory=list)
    exclude_blocks: list[str] = field(default_factory=list)
    # text in pictures (hybrid.sources.ocr): read at all, and in which languages (empty: English
    # and the vault's own); the vault's value replaces the setting's
    ocr: bool = True
    ocr_languages: list[str] = field(default_factory=list)

    @property
    def is_folder(self) -> bool:
        """Whether the documents are the files of a folder (a notes vault)."""
        return self.kind == "notes"


@dataclass
class Config:
    settings: Settings = field(default_factory=Settings)
    vaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    path: Path = field(default_factory=config_path)
    data: Path = field(default_factory=data_dir)
    loaded_stat: tuple[int, int] | None = None
    file_keys: set[str] = field(default_factory=set)  # the settings the file's [settings] holds

    def vault(self, name: str) -> Vault:
        if name not in self.vaults:
            known = ", ".join(sorted(self.vaults)) or "none registered"
            raise VaultError(f"unknown vault {name!r} (known: {known}); "
                             f"register one with `hybrid vault add PATH --name NAME`")
        raw = self.vaults[name]
        ocr = bool(raw["ocr"]) if isinstance(raw.get("ocr"), bool) else self.settings.ocr
        # with OCR off, images are no documents of the vault (never listed as skipped)
        no_pictures = [] if ocr else list(ocr_globs())
        return Vault(
            name=name,
            path=Path(raw["path"]).expanduser(),
            include=list(raw.get("include") or self.settings.include),
            exclude=list(self.settings.exclude) + list(raw.get("exclude") or []) + no_pictures,
            embedder=str(raw.get("embedder") or self.settings.embedder),
            index_dir=self.index_dir(name),
            agent_exclude=list(self.settings.agent_exclude) + list(raw.get("agent_exclude") or []),
            store=str(raw["store"]) if raw.get("store") else None,
            kind=str(raw.get("kind") or "notes"),
            agent_reach=self._reach(name),
            exclude_sections=list(self.settings.exclude_sections) + list(raw.get("exclude_sections") or []),
            exclude_blocks=list(self.settings.exclude_blocks) + list(raw.get("exclude_blocks") or []),
            ocr=ocr,
            ocr_languages=list(raw.get("ocr_languages") or self.settings.ocr_languages),
        )

    def _reach(self, name: str) -> list[tuple[str, str, bool, tuple[str, ...]]]:
        """The other folder vaults whose folders hold vault ``name``'s or lie inside it (after
        symlinks), each with its own ``agent_exclude``: what one vault hides from agents, a
        vault registered on a folder within it (or around it) hides too."""
        raw = self.vaults[name]
        if (raw.get("kind") or "notes") != "notes" or len(self.vaults) < 2:
            return []
        here = _real(raw["path"])
        out = []
        for other, o in sorted(self.vaults.items()):
            if other == name or (o.get("kind") or "notes") != "notes":
                continue
            there = _real(o["path"])
            if here == there:
                continue  # the same folder twice: each vault's own settings apply to it
            exclude = tuple(self.settings.agent_exclude) + tuple(o.get("agent_exclude") or [])
            if here.is_relative_to(there):
                out.append((other, here.relative_to(there).as_posix() + "/", True, exclude))
            elif there.is_relative_to(here):
                out.append((other, there.relative_to(here).as_posix() + "/", False, exclude))
        return out

    def index_dir(self, name: str) -> Path:
        """Where vault ``name`` keeps its index: ``<data>/vaults/<name>``, checked to lie inside
        that folder, so no name can make the indexer write into (or wipe) anything else."""
        check_vault_name(name)
        base = (self.data / "vaults").resolve()
        target = (base / name).resolve()
        if target.parent != base:
            raise VaultError(f"vault name {name!r} does not give a folder inside {base}; refused")
        return target

    def all_vaults(self) -> list[Vault]:
        return [self.vault(n) for n in sorted(self.vaults)]

    def select(self, names: Sequence[str] | None) -> list[Vault]:
        """The named vaults, or all of them; an unknown name raises VaultError."""
        if not names:
            if not self.vaults:
                raise VaultError("no vaults registered; run `hybrid vault add PATH` or "
                                 "`hybrid index PATH`")
            return self.all_vaults()
        return [self.vault(n) for n in dict.fromkeys(names)]

    def add_vault(self, path: Path, name: str | None = None, include: list[str] | None = None,
                  exclude: list[str] | None = None, store: str | None = None,
                  kind: str = "notes") -> Vault:
        """Register ``path`` (with ``store``, a PostgreSQL vault: the folder need exist only
        where it is indexed; other machines query the database). ``kind`` other than
        ``notes`` registers a source (:mod:`hybrid.sources`): ``path`` is then a bookmarks
        export file, or a Slack export (zip or folder)."""
        path = Path(path).expanduser().resolve()
        if kind not in VAULT_KINDS:
            raise VaultError(f"unknown source kind {kind!r} (known: {', '.join(VAULT_KINDS)})")
        if store is not None:
            from hybrid.core.store_url import check_store_value
            store = check_store_value(store)
        if kind == "notes" and not path.is_dir() and (store is None or path.exists()):
            raise VaultError(f"vault folder {str(path)!r} does not exist or is not a folder")
        stem = path.name if path.is_dir() or kind == "notes" else path.stem
        name = name or re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-.")[:64] or "vault"
        check_vault_name(name)
        self._check_folder(path, name)
        if name in self.vaults and self._folder(name) != path:
            raise VaultError(
                f"vault {name!r} is already registered at {self._folder(name)}; to point it at "
                f"{path} run `hybrid vault move {name} {path}`, or `hybrid vault remove {name}` "
                f"first, or pick another --name")
        entry: dict[str, Any] = dict(self.vaults.get(name, {}))
        entry["path"] = str(path)
        if include:
            entry["include"] = list(include)
        if exclude:
            entry["exclude"] = list(exclude)
        if store is not None:
            entry["store"] = store
        if kind != "notes":
            entry["kind"] = kind
        elif "kind" in entry:
            raise VaultError(f"vault {name!r} is a {entry['kind']} source; pick another --name")
        self.vaults[name] = entry
        return self.vault(name)

    def _folder(self, name: str) -> Path:
        return Path(self.vaults[name]["path"]).expanduser().resolve()

    def _check_folder(self, path: Path, name: str) -> None:
        """A folder serves one vault, and never the data dir or anything inside it (an index
        written into the notes, or notes inside an index that a wipe would delete)."""
        for other in self.vaults:
            if other != name and self._folder(other) == path:
                raise VaultError(f"{path} is already registered as vault {other!r}")
        data = self.data.resolve()
        if path.is_relative_to(data):
            raise VaultError(f"{path} is inside hybrid's data folder {data}; refused")

    def remove_vault(self, name: str) -> Vault:
        vault = self.vault(name)
        del self.vaults[name]
        return vault

    def rename_vault(self, old: str, new: str) -> tuple[Vault, Vault]:
        """Rename the registration (the caller moves the index folder)."""
        before = self.vault(old)
        check_vault_name(new)
        if new in self.vaults:
            raise VaultError(f"vault {new!r} already exists; pick another name")
        self.vaults = {(new if k == old else k): v for k, v in self.vaults.items()}
        return before, self.vault(new)

    def move_vault(self, name: str, path: Path) -> Vault:
        """Point vault ``name`` at another folder (the notes moved); its index is kept and the
        next index run only re-reads what differs."""
        vault = self.vault(name)
        path = Path(path).expanduser().resolve()
        if not vault.is_folder:
            if not path.exists():
                raise VaultError(f"{vault.kind} export {str(path)!r} does not exist")
        elif not path.is_dir():
            raise VaultError(f"vault folder {str(path)!r} does not exist or is not a folder")
        self._check_folder(path, name)
        self.vaults[name] = {**self.vaults[name], "path": str(path)}
        return self.vault(name)

    @contextmanager
    def edit(self):
        """Change the registry safely with other processes: under a lock on the config file,
        re-read it, let the caller change that fresh copy, write it atomically, and adopt its
        vaults here. (An atomic replace alone loses updates: two writers that both read the
        old file each write back only their own change.)"""
        from filelock import FileLock, Timeout

        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.path) + ".lock", timeout=CONFIG_LOCK_TIMEOUT)
        try:
            lock.acquire()
        except Timeout:
            raise ConfigError(f"{self.path} is locked by another hybrid process; try again") from None
        try:
            fresh = load_config(self.path.parent, data=self.data)
            yield fresh
            fresh.save()
            self.vaults = fresh.vaults
            self.loaded_stat = fresh.loaded_stat
        finally:
            lock.release()

    def save(self) -> None:
        """Write the settings and vaults into the config file, editing the file as it stands
        (tomlkit): the user's comments, blank lines, key order and formatting are kept, and
        only what differs is written. A setting is written when the file held it (see
        ``file_keys``) or when it differs from its default."""
        import tomlkit
        text = ""
        if self.path.exists():
            try:
                text = self.path.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"{self.path}: cannot read the config ({exc.strerror or exc})") from None
        try:
            doc = tomlkit.parse(text)
        except tomlkit.exceptions.ParseError as exc:
            raise ConfigError(f"{self.path}: not valid TOML ({exc}); fix or delete the file") from None
        current, defaults = self.settings.as_dict(), Settings().as_dict()
        _merge(doc, "settings", {k: v for k, v in current.items()
                                 if k in self.file_keys or v != defaults[k]})
        _merge(doc, "vaults", self.vaults)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            text = tomlkit.dumps(doc)
            # a table removed from the end leaves the blank line that parted it from the one before
            fh.write(text.rstrip("\n") + "\n" if text.strip() else "")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self.loaded_stat = file_stat(self.path)

    # --- editing the settings (`hybrid config`): each checked by the settings table ---------
    def set_setting(self, name: str, value: Any) -> None:
        """Set ``name`` in the file's [settings] (ConfigError naming the rule for a bad value)."""
        self.settings = Settings.from_mapping({name: value}, str(self.path), self.settings)
        if name == "store" and value:  # as `vault add --store` checks it: no password in the file
            from hybrid.core.store_url import check_store_value
            self.settings = Settings.from_mapping({name: check_store_value(value)}, str(self.path),
                                                  self.settings)
        self.file_keys.add(name)

    def unset_setting(self, name: str) -> bool:
        """Remove ``name`` from [settings]: its default applies again. Whether the file held it."""
        default = SETTINGS[NAMES.index(name)].default if name in NAMES else None
        self.settings = Settings.from_mapping({name: default}, str(self.path), self.settings)
        held = name in self.file_keys
        self.file_keys.discard(name)
        return held

    def set_vault_key(self, name: str, key: str, value: Any) -> None:
        """Set ``key`` (one of :data:`VAULT_SETTINGS`) in vault ``name``'s table, checked by the
        same rules as the setting of that name."""
        self.vault(name)  # VaultError naming the known ones
        check_vault_key(key)
        checked = Settings.from_mapping({key: value}, f"{self.path}: vault {name!r}")
        value = checked.as_dict()[key]
        if key == "store" and value:
            from hybrid.core.store_url import check_store_value
            value = check_store_value(value)
        self.vaults[name] = {**self.vaults[name], key: value}

    def unset_vault_key(self, name: str, key: str) -> bool:
        """Remove ``key`` from vault ``name``'s table (the setting applies to it again).
        Whether the table held it."""
        self.vault(name)
        check_vault_key(key)
        held = key in self.vaults[name]
        self.vaults[name] = {k: v for k, v in self.vaults[name].items() if k != key}
        return held


def check_vault_key(key: str) -> str:
    """``key`` if a vault's table may hold it as a setting, else ConfigError saying what does."""
    if key == "path":
        raise ConfigError("a vault's folder is changed with `hybrid vault move NAME PATH` (the index "
                          "is kept)")
    if key == "kind":
        raise ConfigError("a vault's kind is fixed when it is registered (`hybrid vault add`, "
                          "`hybrid source add`)")
    if key not in VAULT_SETTINGS:
        raise ConfigError(f"{key!r} is not a per-vault setting; a vault may hold "
                          f"{', '.join(sorted(VAULT_SETTINGS))}")
    return key


def _merge(doc: Any, name: str, wanted: dict[str, Any]) -> None:
    """Make ``doc[name]`` (a tomlkit table, nested tables for the vaults) hold ``wanted``,
    touching only what differs: a key whose value is unchanged keeps its line, comment and
    formatting; a table that is not wanted goes; a new one is added (see :func:`_add_table`)."""
    import tomlkit
    table = doc.get(name)
    if table is None and not wanted:
        return
    new = table is None
    if new:
        table = tomlkit.table(is_super_table=name == "vaults")
    for key in [k for k in table if k not in wanted]:
        del table[key]
    for key, value in wanted.items():
        if isinstance(value, dict):
            _merge(table, key, value)
        elif key in table:
            if _unwrap(table[key]) != value:
                table[key] = value
        else:
            _add_key(table, key, value)
    if new:
        _add_table(doc, name, table)


def _add_key(table: Any, key: str, value: Any) -> None:
    """Add ``key`` below the table's last key, above the blank lines and comments that close it
    (those belong to what follows: a comment heading the next table)."""
    from tomlkit.items import AoT, Table
    body: list[Any] = getattr(getattr(table, "value", None), "body", None) or []
    last = next(
        (i for i in range(len(body) - 1, -1, -1)
         if body[i][0] is not None and not isinstance(body[i][1], (Table, AoT))), None)
    if last is None or last == len(body) - 1:
        table[key] = value
        return
    import tomlkit
    table.value._insert_at(last + 1, key, tomlkit.item(value))  # tomlkit: no public way either


def _add_table(doc: Any, name: str, table: Any) -> None:
    """Add [settings] above the file's first table (where people look for it), anything else at
    the end."""
    from tomlkit.items import AoT, Table
    first = None if name != "settings" else \
        next((i for i, (_, item) in enumerate(doc.body) if isinstance(item, (Table, AoT))), None)
    if first is None:
        doc[name] = table
        return
    import tomlkit
    table.add(tomlkit.nl())
    doc._insert_at(first, name, table)  # tomlkit has no public way to insert before an item


def _unwrap(item: Any) -> Any:
    return item.unwrap() if hasattr(item, "unwrap") else item


def file_stat(path: Path) -> tuple[int, int] | None:
    """(mtime_ns, size) of the config file, or None when absent: how a long-lived process
    notices that another one changed the registry."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def load_config(home: Path | None = None, data: Path | None = None) -> Config:
    """Read the config file (a missing file means defaults and no vaults). ``home`` plays the
    part of ``HYBRID_HOME``; ``data`` overrides where indexes live."""
    if home is not None:
        home = Path(home).expanduser()
        cfg = Config(path=home / "config.toml", data=data or home / "data")
    else:
        cfg = Config() if data is None else Config(data=data)
    path = cfg.path
    cfg.loaded_stat = file_stat(path)
    if cfg.loaded_stat is None:
        return cfg
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}); fix or delete the file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the config ({exc.strerror or exc})") from None
    table = doc.get("settings") or {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [settings] must be a table of settings")
    cfg.settings = Settings.from_mapping(table, str(path))
    cfg.file_keys = set(table)
    vaults = doc.get("vaults") or {}
    if not isinstance(vaults, dict):
        raise ConfigError(f"{path}: [vaults] must be a table of vaults")
    for name, raw in vaults.items():
        try:
            check_vault_name(name)
        except VaultError as exc:
            raise ConfigError(f"{path}: {exc}; rename that [vaults.…] table") from None
        if not isinstance(raw, dict) or not isinstance(raw.get("path"), str):
            raise ConfigError(f"{path}: vault {name!r} needs a `path` string")
        unknown = set(raw) - VAULT_KEYS
        if unknown:
            raise ConfigError(f"{path}: vault {name!r} has unknown keys {sorted(unknown)}")
        if raw.get("kind", "notes") not in VAULT_KINDS:
            raise ConfigError(f"{path}: vault {name!r} has kind {raw.get('kind')!r} (known: "
                              f"{', '.join(VAULT_KINDS)})")
        checked = {k: raw[k] for k in CHECKED_VAULT_KEYS if k in raw}
        if checked:  # read by the settings' own rule: a string is not a list of one heading
            Settings.from_mapping(checked, f"{path}: vault {name!r}")
        cfg.vaults[name] = raw
    return cfg


def override(cfg: Config, **values: Any) -> Config:
    """Apply programmatic setting overrides (``hybrid.open(chunk_tokens=128)``), checked."""
    cfg.settings = Settings.from_mapping(values, "override", cfg.settings)
    return cfg
