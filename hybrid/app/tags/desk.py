"""Tag suggestions as the owner handles them: suggest (into the review queue), list the queue,
accept (the one write: the note's front block, atomically) and reject (never suggested again);
and an agent's proposal of tags, which only ever lands in the queue.

Nothing is written into a note without the owner's accept. An accept is refused when the file
changed since its tags were suggested (content hash) or when its front block cannot be parsed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybrid.app.tags import suggest as sg
from hybrid.app.tags.frontmatter import TagWriteError, add_tags, check_tag, content_hash, write_atomic
from hybrid.app.tags.queue import MAX_PENDING_NOTE, Entry, Suggestion, TagQueue, now_iso
from hybrid.core.errors import PathRefused

if TYPE_CHECKING:
    from hybrid.core.config import Vault
    from hybrid.sources.markdown import Note
    from hybrid.store.port import Store

log = logging.getLogger("hybrid")

DEFAULT_LIMIT = 5
MAX_LIMIT = 10
MAX_AGENT_TAGS = 10   # tags one propose_tags call may carry


@dataclass
class NoteSuggestions:
    vault: str
    path: str
    suggestions: list[Suggestion] = field(default_factory=list)
    message: str = ""    # why there are none, when there are none
    hash: str = ""       # the content hash of the file they were made for

    def to_dict(self) -> dict:
        return {"vault": self.vault, "path": self.path,
                "suggestions": [s.to_dict() for s in self.suggestions], "message": self.message}


@dataclass
class Accepted:
    vault: str
    path: str
    added: list[str]
    tags: list[str]       # the note's tags now

    def to_dict(self) -> dict:
        return {"vault": self.vault, "path": self.path, "added": self.added, "tags": self.tags}


@dataclass
class _Doc:
    vault: Vault
    path: str
    file: Path
    data: bytes
    note: Note


class TagDesk:
    """Tag suggestions over the vaults of one :class:`~hybrid.app.api.Hybrid` handle (typed
    loosely: the handle imports this module)."""

    def __init__(self, h: Any):
        self.h = h

    # --- reading notes ----------------------------------------------------------------------
    def queue_of(self, vault: Vault) -> TagQueue:
        return TagQueue(self.h.config.data, vault.name)

    def _locate(self, note: str, vault: str | None) -> tuple[Vault, str]:
        """The vault and vault-relative path of a note reference (as ``get`` reads one)."""
        got = self.h.get(note, vault, max_chars=1, links=False)
        return self.h.config.vault(got.vault), got.path

    def _read(self, vault: Vault, rel: str) -> _Doc:
        """The note's file as it is now, refused unless it is a markdown file inside the vault."""
        from hybrid.sources.markdown import decode, parse_note
        if not vault.is_folder or not rel.lower().endswith(".md"):
            raise PathRefused(f"{vault.name}:{rel} is not a markdown note: only notes carry tags")
        root = vault.path.resolve()
        file = Path(os.path.realpath(root / rel))
        if not file.is_relative_to(root):
            raise PathRefused(f"{vault.name}:{rel} leads outside the vault; refused")
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise PathRefused(f"cannot read {vault.name}:{rel} ({exc.strerror or exc})") from None
        text, _ = decode(data, rel)
        return _Doc(vault, rel, file, data, parse_note(rel, text))

    # --- suggesting -----------------------------------------------------------------------
    def suggest(self, note: str | None = None, vault: str | None = None, *, every: bool = False,
                untagged: bool = False, limit: int = DEFAULT_LIMIT, llm: str | None = None,
                new_tags: bool = False) -> list[NoteSuggestions]:
        """Suggest tags for ``note`` (any reference ``get`` takes) or, ``every``, for every
        note of the vault (``untagged``: only notes with no tag), and put them in the review
        queue (replacing that suggester's earlier ones for the note). ``llm``: also ask
        ``ollama:MODEL``, whose tags are kept only when in the vault's vocabulary unless
        ``new_tags``. NoSuggestions when the vault has no tags at all (and no LLM may coin
        them)."""
        from hybrid.core.errors import HybridError
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise HybridError(f"the number of tags must be between 1 and {MAX_LIMIT} (got {limit!r})")
        if (note is None) == (not every):
            raise HybridError("name one note, or pass --all for every note of the vault")
        if note is not None:
            v, rel = self._locate(note, vault)
            paths = [rel]
        else:
            v = self.h.vault_for(vault)
            paths = []
        store = self.h.session.store(v)
        vocab = sg.vocabulary(store)
        if not vocab and not (llm and new_tags):
            raise sg.NoSuggestions(f"vault {v.name!r} has no tags at all: tag a few notes by hand first "
                                   f"(suggestions are drawn from the vault's own tags), or let an LLM "
                                   f"coin new ones with --llm ollama:MODEL --new-tags")
        files = store.catalog.files()
        if every:
            paths = sorted(p for p in files if p.lower().endswith(".md"))
        tagger = None
        if llm:
            from hybrid.embedders.ollama_tags import OllamaTagger
            tagger = OllamaTagger.from_spec(llm, self.h.settings.ollama_host)
        queue = self.queue_of(v)
        rejected = {p: set(e.rejected) for p, e in queue.load().items()}
        out: list[NoteSuggestions] = []
        for rel in paths:
            try:
                doc = self._read(v, rel)
            except (PathRefused, ValueError) as exc:
                if not every:
                    raise
                log.warning("%s; skipped", exc)
                continue
            if untagged and doc.note.tags:
                continue
            row = files.get(rel)
            if row is None:
                if not every:
                    raise sg.NoSuggestions(f"{v.name}:{rel} is not indexed yet: run `hybrid index --vault "
                                           f"{v.name}`, then suggest again")
                continue
            out.append(self._one(store, v, doc, row.id, vocab, rejected.get(rel, set()), limit,
                                 tagger, new_tags))
        self._enqueue(queue, out)
        return out

    def _one(self, store: Store, v: Vault, doc: _Doc, file_id: int, vocab, rejected: set[str],
             limit: int, tagger, new_tags: bool) -> NoteSuggestions:
        note = doc.note
        texts = store.catalog.note_texts([file_id]).get(file_id, [])
        body = "\n".join(note.lines[note.body_start - 1:])
        near = sg.neighbours(store, file_id, note.title, body, [c for c, _ in texts])
        tags_of = {n.id: n.tags for n in store.catalog.notes(list(near))}
        votes = sg.neighbour_votes(near, tags_of)
        phrases = sg.phrase_scores(vocab, note.title, body)
        exclude = set(note.tags) | rejected
        ranked = sg.rank(votes, phrases, vocab, exclude, min(sg.NEIGHBOURS, len(near)), MAX_LIMIT)
        at = now_iso()
        found = [Suggestion(c.tag, c.score, "offline", "; ".join(c.why), False, at) for c in ranked]
        if tagger is not None:
            found = self._ask_llm(tagger, note.title, body, vocab, exclude, found, limit, new_tags, at)
        found = found[:limit]
        result = NoteSuggestions(v.name, doc.path, found, hash=content_hash(doc.data))
        if not found:
            result.message = (f"no suggestion for {v.name}:{doc.path}: none of its nearest notes carries a "
                              f"tag it lacks, and no tag of the vault occurs in it")
        return result

    @staticmethod
    def _ask_llm(tagger, title: str, body: str, vocab, exclude: set[str], offline: list[Suggestion],
                 limit: int, new_tags: bool, at: str) -> list[Suggestion]:
        """The LLM's tags first (those of the vocabulary; new ones only with ``new_tags``), then
        the offline ones to fill up to ``limit``."""
        words = [t for t, _ in vocab.most_common()]
        picked: list[Suggestion] = []
        dropped = 0
        for raw in tagger.tags(title, body, words, limit, new_tags):
            try:
                t = check_tag(raw)
            except TagWriteError:
                dropped += 1
                continue
            if t in exclude or t in (s.tag for s in picked):
                continue
            if t not in vocab and not new_tags:
                dropped += 1
                continue
            base = next((s.score for s in offline if s.tag == t), 0.0)
            why = "chosen by the LLM" + ("" if t in vocab else " (a new tag)")
            picked.append(Suggestion(t, round(1.0 + base, 4), tagger.id, why, t not in vocab, at))
        if dropped:
            log.info("%s proposed %d tag(s) outside the vault's tags (or not tags): left out%s", tagger.id,
                     dropped, "" if new_tags else "; --new-tags keeps new ones")
        rest = [s for s in offline if s.tag not in {p.tag for p in picked}]
        return (picked + rest)[:max(limit, len(picked))]

    @staticmethod
    def _enqueue(queue: TagQueue, found: list[NoteSuggestions]) -> None:
        """Put ``found`` in the queue: a note's earlier suggestions are replaced by these, its
        agents' proposals kept, its rejected tags never added."""
        def change(entries: dict[str, Entry]) -> None:
            for ns in found:
                e = entries.get(ns.path) or Entry(ns.path, ns.hash)
                e.hash = ns.hash
                keep = [s for s in e.pending if s.by.startswith("agent:")]
                have = {s.tag for s in keep}
                e.pending = [*[s for s in ns.suggestions if s.tag not in have and s.tag not in e.rejected], *keep]
                entries[ns.path] = e
        queue.update(change)

    # --- the queue ------------------------------------------------------------------------
    def pending(self, vault: str | None = None, note: str | None = None) -> list[tuple[str, Entry]]:
        """(vault, entry) of every note with tags waiting for review (only ``note``'s when
        given), by vault and path."""
        if note is not None:
            v, rel = self._locate(note, vault)
            e = self.queue_of(v).load().get(rel)
            return [(v.name, e)] if e is not None and e.pending else []
        vaults = [self.h.config.vault(vault)] if vault else self.h.vaults
        return [(v.name, e) for v in vaults for e in self.queue_of(v).load().values() if e.pending]

    def accept(self, note: str, tags: Sequence[str], vault: str | None = None) -> Accepted:
        """Write ``tags`` (each waiting for review on ``note``) into the note's front block.
        Refused, with nothing written, when a tag is not waiting, when the file changed since
        they were suggested, or when its front block cannot be parsed or edited."""
        v, rel = self._locate(note, vault)
        wanted = list(dict.fromkeys(check_tag(t) for t in tags))
        if not wanted:
            raise TagWriteError("name the tags to accept")
        queue = self.queue_of(v)

        def change(entries: dict[str, Entry]) -> Accepted:
            e = entries.get(rel)
            waiting = set(e.tags()) if e else set()
            missing = [t for t in wanted if t not in waiting]
            if e is None or missing:
                raise TagWriteError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not waiting for "
                                    f"review on {v.name}:{rel}: `hybrid tags suggest {rel}` first (or add it "
                                    f"by hand); nothing was written")
            doc = self._read(v, rel)
            if content_hash(doc.data) != e.hash:
                raise TagWriteError(f"{v.name}:{rel} changed on disk since its tags were suggested: run "
                                    f"`hybrid tags suggest {rel}` again; nothing was written")
            try:
                text = doc.data.decode("utf-8")
            except UnicodeDecodeError:
                raise TagWriteError(f"{v.name}:{rel} is not valid UTF-8: fix it in an editor; nothing was "
                                    f"written") from None
            new = add_tags(text, wanted, f"{v.name}:{rel}").encode("utf-8")
            if doc.file.read_bytes() != doc.data:  # changed while we worked: an editor saved it
                raise TagWriteError(f"{v.name}:{rel} changed on disk just now: run `hybrid tags suggest "
                                    f"{rel}` again; nothing was written")
            write_atomic(doc.file, new)
            e.pending = [s for s in e.pending if s.tag not in wanted]
            e.hash = content_hash(new)  # the rest still apply to the note as we wrote it
            from hybrid.sources.markdown import decode, parse_note
            tags_now = parse_note(rel, decode(new, rel)[0]).tags
            log.info("%s:%s: tags %s accepted", v.name, rel, ", ".join(wanted))
            return Accepted(v.name, rel, wanted, tags_now)
        return queue.update(change)

    def reject(self, note: str, tags: Sequence[str], vault: str | None = None) -> list[str]:
        """Reject ``tags`` for ``note``: dropped from its queue and never suggested for it
        again (a tag not waiting may be rejected ahead). Returns the tags rejected."""
        v, rel = self._locate(note, vault)
        wanted = list(dict.fromkeys(check_tag(t) for t in tags))
        if not wanted:
            raise TagWriteError("name the tags to reject")
        doc_hash = content_hash(self._read(v, rel).data)

        def change(entries: dict[str, Entry]) -> list[str]:
            e = entries.get(rel) or Entry(rel, doc_hash)
            e.pending = [s for s in e.pending if s.tag not in wanted]
            e.rejected = list(dict.fromkeys([*e.rejected, *wanted]))
            entries[rel] = e
            return wanted
        return self.queue_of(v).update(change)

    # --- agents -----------------------------------------------------------------------------
    def propose(self, note: str, tags: Sequence[str], vault: str | None, by: str) -> list[str]:
        """An agent's tags for ``note``, put in the review queue (never into the note). The
        note must be one the agent may read (refused as ``get_note`` refuses, whether or not it
        exists). Returns the tags newly queued; those the note has, that wait already or that
        the owner rejected are left out without saying which."""
        from hybrid.app.proposals import OFF_MESSAGE, ProposalError
        if not self.h.settings.proposals_folder.strip().strip("/"):
            raise ProposalError(OFF_MESSAGE)
        if not isinstance(tags, (list, tuple)) or not tags or len(tags) > MAX_AGENT_TAGS:
            raise TagWriteError(f"tags must be a list of 1 to {MAX_AGENT_TAGS} tags")
        wanted = list(dict.fromkeys(check_tag(t) for t in tags))
        got = self.h.get(note, vault, max_chars=1, agent=True, vault_hint="the `vault` argument", links=False)
        v = self.h.config.vault(got.vault)
        doc = self._read(v, got.path)
        vocab = sg.vocabulary(self.h.session.store(v))
        at, who = now_iso(), f"agent:{by}"[:120]

        def change(entries: dict[str, Entry]) -> list[str]:
            e = entries.get(got.path) or Entry(got.path, content_hash(doc.data))
            if not e.pending:
                e.hash = content_hash(doc.data)
            skip = set(doc.note.tags) | set(e.rejected) | set(e.tags())
            added = [t for t in wanted if t not in skip][:max(0, MAX_PENDING_NOTE - len(e.pending))]
            e.pending.extend(Suggestion(t, 0.0, who, "proposed by an agent", t not in vocab, at) for t in added)
            entries[got.path] = e
            return added
        return self.queue_of(v).update(change)
