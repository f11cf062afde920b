"""What languages the searched vaults hold, and which model's cosines a query is scored by.

The default embedder (:mod:`hybrid.embedders.mix`) weighs its multilingual half on an English
question only where a vault holds notes in other languages: each index run samples the share of
its chunks that are (catalog meta ``other_languages``, :func:`hybrid.indexing.indexer`). And the
confidence stage applies the model calibrated on MiniLM's cosines when a mix scored the question
by MiniLM alone.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hybrid.store.port import Searchable

REACH_SHARE = 0.02  # vaults with this share of chunks in other languages: English questions reach them


def scored_by(embedder_id: str, text: str, reach: bool) -> str:
    """The model whose cosines the vector arm's scores are for this query: a mix scores an
    English question by its first model alone (unless the vaults hold other languages), so
    the confidence calibrated on that model applies (:mod:`hybrid.embedders.mix`)."""
    from hybrid.embedders.mix import SURE_ENGLISH, mix_parts
    parts = mix_parts(embedder_id)
    if parts is None or reach:
        return embedder_id
    from hybrid.core.lang import foreign
    return parts[0] if foreign(text) <= SURE_ENGLISH else embedder_id


@functools.lru_cache(maxsize=64)
def scripts_read(embedder_id: str) -> frozenset[str] | None:
    """The scripts the model(s) recorded as ``embedder_id`` read (a mix: either part's), or
    None for a model that reads them all or is not known to read only some."""
    from hybrid.embedders.base import MINILM_ID, MINILM_SCRIPTS
    from hybrid.embedders.mix import mix_parts
    from hybrid.embedders.use_multilingual import MODEL_ID as USE_ID
    from hybrid.embedders.use_multilingual import SCRIPTS as USE_SCRIPTS
    ids = mix_parts(embedder_id)
    if ids is not None:
        parts = [scripts_read(p) for p in ids]
        return None if any(p is None for p in parts) else frozenset().union(*parts)  # type: ignore[arg-type]
    if embedder_id.startswith(MINILM_ID):
        return MINILM_SCRIPTS
    return USE_SCRIPTS if embedder_id == USE_ID else None


def unread_by(embedder_id: str, text: str) -> str | None:
    """The script (``Georgian``) most words of the query ``text`` are in when the vault's
    embedder reads none of them: its cosines would be noise, so the vector arm leaves that
    vault out (the keyword arm still reads any script). None when the model reads the query."""
    scripts = scripts_read(embedder_id)
    if scripts is None:
        return None
    from hybrid.core.lang import unread_script
    script = unread_script(text, scripts)
    return SCRIPT_NAMES.get(script, script) if script else None


SCRIPT_NAMES = {"Cjk": "Han (CJK)"}  # as a notice names them


def unread_notice(script: str, mode: str) -> str:
    """What a search tells its reader when the vaults' model cannot read the query's script."""
    if mode == "vector":
        return (f"no model here reads {script} script, so a meaning search cannot answer this: "
                f"search by keywords (mode lexical or hybrid)")
    return f"no model here reads {script} script: searched by keywords only"


def other_languages(store: Searchable) -> float:
    """The share of a vault's chunks in other languages than English, as its last index run
    sampled it (0 when never measured)."""
    try:
        from hybrid.core.lang import SHARE_META  # not imported by a lexical search
        return float(store.ledger.get_meta(SHARE_META) or 0.0)
    except ValueError:
        return 0.0


def held_languages(store: Searchable) -> list[str]:
    """The other languages than English a vault's chunks are in, among those the shipped word
    lists cover, as its last index run sampled them (empty when never measured)."""
    from hybrid.core.lang import LANGUAGES_META
    from hybrid.core.wordlist import LANGUAGES
    raw = store.ledger.get_meta(LANGUAGES_META) or ""
    return [lang for lang in raw.split(",") if lang in LANGUAGES]


def spell_languages(stores: Sequence[Searchable], configured: Sequence[str]) -> tuple[str, ...]:
    """The word lists whose words typo repair takes as words: the configured ones
    (``spell_languages``) and every language a searched vault holds ("Reise" is a word in a
    vault with German notes, never a typo of "raise")."""
    out = dict.fromkeys(configured)
    for store in stores:
        out.update(dict.fromkeys(held_languages(store)))
    return tuple(out)
