"""The lexical arm in PostgreSQL: BM25 over a ``tsvector`` that hybrid writes itself.

PostgreSQL's own ``ts_rank_cd`` has no inverse document frequency and no length
saturation, so a rare word counts no more than "the". Here each chunk and each heading
section gets a ``tsvector`` (:mod:`hybrid.store.pg.tsv`) written by the same analyzer as the
local tantivy index (:class:`hybrid.store.lexicon.StemAnalyzer`,
:func:`hybrid.store.lexicon.doc_fields`; CJK runs as character bigrams): stems of the title
(weight A), headings and tags (B) and body (D) with their positions, and the identifier tokens
(C) under a ``=`` prefix (``=orders-created``, ``=postgres``), which also serve typo repair.
The GIN index picks the candidates (``@@``); their score is computed in SQL as tantivy
computes the local one: a BM25 per field (each field's term frequency counted from the
positions of its weight, its length against the vault's mean for that field, its own document
frequency), times the field's boost, summed; a word one edit away from a typed one adds its
weight flat, as tantivy's fuzzy term query does. Lengths and frequencies per field are kept
by every change's own transaction (``hybrid_chunks.lens``, ``hybrid_terms``). Queries are
built from lexemes, never parsed from user text by PostgreSQL, so no input is a syntax error
here.

Queries of words found in many units (where every holder is a candidate) are answered from
packed postings scored with numpy instead (:mod:`hybrid.store.pg.packed`), with the same
scores; phrases, and what the packed postings cannot answer cheaply, come here.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from hybrid.core.tokens import identifiers, query_idents, within_one_edit
from hybrid.store.base import EVERY_NOTE, NoteFilter
from hybrid.store.lexicon import (
    FUZZY_BOOST,
    IDENT_BOOST,
    LexicalQuery,
    only_stopwords,
    spellable,
    typo_candidates,
    without_stopwords,
)
from hybrid.store.pg import packed
from hybrid.store.pg.tsv import (
    DF_COLUMN,
    FIELD_BOOST,
    FIELDS,
    IDENT,
    K1,
    MAX_LEXEME,
    UNIT_CODE,
    UNIT_TABLE,
    B,
    Plan,
    Stats,
    field_of,
    idf,
    quote,
    tf_weights,
)
from hybrid.store.sql import like_escape, props_condition


class PgLexical:
    """The arm of one vault (``agent``: as the agent view sees it: the redacted text's
    tsvector, hidden notes left out inside the query)."""

    store_kind = "postgresql"  # BM25F in SQL: its own fitted parameters (hybrid.retrieval.fitted)
    use_packed = True          # common words from their packed postings (hybrid.store.pg.packed)
    answered = ""              # how the last search_units was answered: "packed", "sql" or ""

    def __init__(self, store: Any, agent: bool = False, hidden_files: Collection[int] = ()):
        from hybrid.store.lexicon import stem_analyzer
        self.store, self.agent = store, agent
        self.hidden = sorted(hidden_files)
        self.stem = stem_analyzer()

    @property
    def _tsv(self) -> str:
        return "coalesce(c.agent_tsv, c.tsv)" if self.agent else "c.tsv"

    @property
    def _lens(self) -> str:
        return "coalesce(c.agent_lens, c.lens)" if self.agent else "c.lens"

    # --- vocabulary -----------------------------------------------------------------------
    def _present(self, word: str) -> bool:
        return self._present_lexeme(IDENT + word)

    def _present_lexeme(self, lexeme: str) -> bool:
        if self.agent and self.hidden:  # a word only hidden notes hold is absent to an agent
            sql = (f"SELECT 1 FROM hybrid_chunks c WHERE c.vault=%s AND c.tsv @@ %s::tsquery AND "
                   f"{self._tsv} @@ %s::tsquery AND NOT c.file_id = ANY(%s) LIMIT 1")
            q = quote(lexeme)
            return self.store.query(sql, (self.store.vault_id, q, q, self.hidden)).fetchone() is not None
        row = self.store.query("SELECT df FROM hybrid_terms WHERE vault=%s AND unit=0 AND lexeme=%s",
                               (self.store.vault_id, lexeme)).fetchone()
        return bool(row and row[0] > 0)

    def known(self, words: Sequence[str]) -> set[str]:
        """The ``words`` (lower case) some chunk holds, as typed (an identifier lexeme) or by
        their stem, as the local index's."""
        wanted = list(dict.fromkeys(w.lower() for w in words))
        if not wanted:
            return set()
        forms = {w: [IDENT + w, *self.stem.analyze(w)] for w in wanted}
        if self.agent and self.hidden:
            return {w for w, fs in forms.items() if any(self._present_lexeme(f) for f in fs)}
        held = {r[0] for r in self.store.query(
            "SELECT lexeme FROM hybrid_terms WHERE vault=%s AND unit=0 AND df > 0 AND lexeme = ANY(%s)",
            (self.store.vault_id, [f for fs in forms.values() for f in fs]))}
        return {w for w, fs in forms.items() if held.intersection(fs)}

    def corrections(self, words: Sequence[str]) -> dict[str, str]:
        """Typo repair as the local index's: each word of 5+ letters that no chunk holds (as
        typed or by its stem), mapped to the most frequent indexed word within one edit that
        starts with the same letter."""
        out: dict[str, str] = {}
        wanted = [w for w in dict.fromkeys(w.lower() for w in words) if spellable(w)]
        known = self.known(wanted)
        for word in wanted:
            if word in known:
                continue
            rows = self.store.query(
                "SELECT lexeme, df FROM hybrid_terms WHERE vault=%s AND unit=0 AND lexeme LIKE %s "
                "AND length(lexeme) BETWEEN %s AND %s ORDER BY df DESC, lexeme",
                (self.store.vault_id, IDENT + like_escape(word[0]) + "%", len(word), len(word) + 2)).fetchall()
            for lexeme, _df in rows:
                term = lexeme[len(IDENT):]
                if within_one_edit(term, word) and (not self.agent or self._present(term)):
                    out[word] = term
                    break
        return out

    # --- query ----------------------------------------------------------------------------
    def _clause(self, text: str, *, phrase: bool, stopwords: bool, plan: Plan,
                boost: float = 1.0) -> str | None:
        """The tsquery of ``text`` (as the local index's ``_text_clause``), its lexemes added
        to the scored ones."""
        if stopwords and not phrase:
            text = without_stopwords(text)
        stems = list(self.stem.analyze(text))
        idents = query_idents(text)
        alts: list[str] = []
        if phrase and len(stems) > 1:
            alts.append("(" + " <-> ".join(quote(s) for s in stems) + ")")
            for s in stems:
                plan.scored[s] = max(plan.scored.get(s, 0.0), boost)
            whole = identifiers(text.lower())
            if len(whole) == 1:
                idents.append(whole[0])
        else:
            for s in dict.fromkeys(stems):
                alts.append(quote(s))
                plan.scored[s] = max(plan.scored.get(s, 0.0), boost)
        if phrase and stems:
            idents = [t for t in idents if t == " ".join(text.lower().split())]
        for tok in dict.fromkeys(idents):
            if len(tok) <= MAX_LEXEME:
                alts.append(quote(IDENT + tok))
                plan.scored[IDENT + tok] = IDENT_BOOST
        return " | ".join(alts) if alts else None

    def plan(self, q: LexicalQuery, *, fuzzy: bool = True, stopwords: bool = True) -> Plan:
        plan = Plan()
        free = " ".join(q.terms)
        if stopwords and only_stopwords(q.terms):
            stopwords = False
        ors: list[str] = []
        if free:
            got = self._clause(free, phrase=False, stopwords=stopwords, plan=plan)
            if got:
                ors.append(got)
        if fuzzy and q.terms:
            if q.typos is not None:  # judged by the caller over every vault searched
                wanted = [w.lower() for w in q.typos]
            else:
                wanted = typo_candidates(q.terms)
            for right in self.corrections(wanted).values():
                ors.append(quote(IDENT + right))
                if IDENT + right not in plan.scored:
                    plan.flat.add(IDENT + right)
                plan.scored[IDENT + right] = max(plan.scored.get(IDENT + right, 0.0), FUZZY_BOOST)
        musts = []
        for ph in q.phrases:
            got = self._clause(ph, phrase=True, stopwords=False, plan=plan)
            if got:
                musts.append(f"({got})")
        if musts:
            plan.match = " & ".join(musts)
        elif ors:
            plan.match = " | ".join(f"({o})" for o in ors)
        for ex in q.excludes:
            got = self._clause(ex, phrase=True, stopwords=False, plan=Plan())
            if got:
                plan.excludes.append(got)
        return plan

    def _where(self, plan: Plan, nf: NoteFilter) -> tuple[list[str], list[Any]]:
        where, args = ["c.vault = %s"], [self.store.vault_id]
        if plan.match is not None:
            where.append("c.tsv @@ %s::tsquery")
            args.append(plan.match)
            if self.agent:
                where.append(f"{self._tsv} @@ %s::tsquery")
                args.append(plan.match)
        for ex in plan.excludes:
            where.append(f"NOT ({self._tsv} @@ %s::tsquery)")
            args.append(ex)
        if nf.folders:
            where.append("(" + " OR ".join("c.path LIKE %s" for _ in nf.folders) + ")")
            args.extend(like_escape(f.strip("/")) + "/%" for f in nf.folders)
        for f in nf.exclude_folders:
            where.append("c.path NOT LIKE %s")
            args.append(like_escape(f.strip("/")) + "/%")
        if nf.tags:
            where.append("c.tag_set @> %s::text[]")
            args.append(list(nf.tags))
        if nf.since is not None:
            where.append("c.modified >= %s")
            args.append(int(nf.since))
        if nf.sources:
            from hybrid.store.sql import kind_condition
            cond, kargs = kind_condition(tuple(nf.sources), "c.path", "%s")
            where.append(cond)
            args.extend(kargs)
        if nf.props:
            more, more_args = props_condition(nf.props, "c.file_id", "hybrid_props", "%s")
            where += more
            args += more_args
        if self.agent and self.hidden:
            where.append("NOT c.file_id = ANY(%s)")
            args.append(self.hidden)
        return where, args

    def search(self, q: LexicalQuery, limit: int, **opts) -> list[tuple[int, float]]:
        """Top ``limit`` (chunk id, BM25 score) pairs."""
        return [(ids[0], score) for ids, score in self.search_units(q, limit, **opts)]

    def search_units(self, q: LexicalQuery, limit: int, unit: str = "chunk", *,
                     where: NoteFilter = EVERY_NOTE, fuzzy: bool = True, scored: bool = True,
                     stopwords: bool = True) -> list[tuple[list[int], float]]:
        """Top ``limit`` units of kind ``unit`` as (chunk ids, BM25 score)."""
        self.answered = ""
        plan = self.plan(q, fuzzy=fuzzy, stopwords=stopwords)
        if plan.match is None and not (plan.excludes or where.narrows or where.exclude_folders):
            return []
        table = UNIT_TABLE[unit]
        ids = "ARRAY[c.id]" if unit == "chunk" else "c.chunk_ids"
        conds, args = self._where(plan, where)
        if plan.match is None or not plan.scored:
            sql = (f"SELECT {ids}, 1.0 FROM {table} c WHERE {' AND '.join(conds)} "
                   f"ORDER BY c.id LIMIT %s")
            return [(list(r[0]), float(r[1])) for r in self.store.query(sql, (*args, limit))]
        lexemes = list(plan.scored)
        stats = self.stats(unit, lexemes)
        if not q.phrases and self.use_packed:
            # words in many units: their packed postings, scored with numpy (hybrid.store.pg.packed)
            got = packed.answer(self, unit, plan, lexemes, stats, where, limit)
            if got is not None:
                return got
        if q.phrases or len(lexemes) < 2:
            return self._scored(unit, plan, lexemes, stats, conds, args, limit)
        # MaxScore: a unit that holds none of the query's rarest lexemes scores at most the sum
        # of the others' upper bounds (Stats.bound). Score the units holding the rarest ones
        # first; once the limit-th score beats what the rest could add, the others cannot enter
        # and are never read (a query with a common word no longer scores half the vault).
        bound = {x: stats.bound(x, plan.scored[x], x in plan.flat) for x in lexemes}
        order = sorted(lexemes, key=lambda x: (-bound[x], x))
        for cut in range(1, len(order)):
            rest = sum(bound[x] for x in order[cut:])
            match = " | ".join(quote(x) for x in order[:cut])
            w, a = self._where(Plan(match, plan.excludes, plan.scored), where)
            got = self._scored(unit, plan, lexemes, stats, w, a, limit)
            if len(got) >= limit and got[limit - 1][1] > rest:
                return got
        return self._scored(unit, plan, lexemes, stats, conds, args, limit)

    def _scored(self, unit: str, plan: Plan, lexemes: list[str], stats: Stats,
                where: list[str], args: list[Any], limit: int) -> list[tuple[list[int], float]]:
        """BM25 of the units passing ``where`` over every scored lexeme, the best ``limit``."""
        def run() -> list[tuple[list[int], float]]:  # one transaction, run again after a recovery conflict
            with self.store.conn.transaction():
                self.store.query("SET LOCAL work_mem = '64MB'")  # the candidates stay in memory
                # planned for these lexemes and filters (GIN or a scan, the path index), never
                # from the generic plan psycopg's prepared statement settles on after 5 runs
                self.store.query("SET LOCAL plan_cache_mode = force_custom_plan")
                return [(ids, score) for ids, score, _ in
                        self._scored_rows(unit, plan, lexemes, stats, where, args, limit)]
        return self.store.read(run)

    def _scored_rows(self, unit: str, plan: Plan, lexemes: list[str], stats: Stats,
                     where: list[str], args: list[Any], limit: int) -> list[tuple[list[int], float, int]]:
        """:meth:`_scored`'s statement, in the caller's transaction: (chunk ids, score, unit id).
        A unit's score is tantivy's: for each lexeme, a BM25 per field (:data:`FIELDS`) times
        the field's boost, summed, times the lexeme's weight (a ``plan.flat`` lexeme: its
        weight alone); a field no unit holds the lexeme in is not looked at."""
        table = UNIT_TABLE[unit]
        ids = "ARRAY[c.id]" if unit == "chunk" else "c.chunk_ids"
        # A field's term frequency is its positions' count (ts_rank_cd of the lexeme alone,
        # weighted to that field). Each (candidate, lexeme) row is computed once (OFFSET 0 keeps
        # the planner from inlining it into its uses). tsvectors are stored in the row (see the
        # schema), so reading one costs no detoasting.
        tfs = ", ".join(f"CASE WHEN q.idf{x} IS NULL THEN 0 ELSE ts_rank_cd({tf_weights(x)}, cand.v, q.tq, 0) "
                        f"END AS tf{x}" for x in FIELDS)
        parts = " + ".join(
            f"CASE WHEN f.tf{x} > 0 THEN {FIELD_BOOST[x]!r} * q.idf{x} * (f.tf{x} * {K1 + 1}) / "
            f"(f.tf{x} + {K1} * ({1 - B} + {B} * cand.lens[{i + 1}] / {stats.avg[x]!r})) ELSE 0 END"
            for i, x in enumerate(FIELDS))
        sql = (f"WITH q AS MATERIALIZED (SELECT t::tsquery AS tq, w, flat, {', '.join(f'idf{x}' for x in FIELDS)} "
               f"FROM unnest(%s::text[], %s::float8[], %s::boolean[], {', '.join('%s::float8[]' for _ in FIELDS)}) "
               f"AS x(t, w, flat, {', '.join(f'idf{x}' for x in FIELDS)})), "
               f"cand AS MATERIALIZED (SELECT c.id, {ids} AS ids, {self._lens} AS lens, "
               f"{self._tsv} AS v FROM {table} c WHERE {' AND '.join(where)}) "
               f"SELECT cand.ids, sum(q.w * (CASE WHEN q.flat THEN 1 ELSE {parts} END)) AS score, cand.id "
               f"FROM cand CROSS JOIN q CROSS JOIN LATERAL (SELECT {tfs} OFFSET 0) f "
               f"WHERE {' + '.join(f'f.tf{x}' for x in FIELDS)} > 0 "
               f"GROUP BY cand.id, cand.ids ORDER BY score DESC, cand.id LIMIT %s")
        per_field = [[stats.idfs(x)[i] for x in lexemes] for i in range(len(FIELDS))]
        params = ([quote(x) for x in lexemes], [plan.scored[x] for x in lexemes], [x in plan.flat for x in lexemes],
                  *per_field, *args, limit)
        return [(list(r[0]), float(r[1]), int(r[2])) for r in self.store.query(sql, params)]

    def stats(self, unit: str, lexemes: list[str]) -> Stats:
        """BM25's statistics of ``lexemes`` over the vault's units of kind ``unit``; for an
        agent, over the units it may see, as it is shown them (see :meth:`_agent_stats`)."""
        n_col, len_col = ("n_chunks", "chunk_lens") if unit == "chunk" else ("n_sections", "section_lens")
        v = self.store.vault_id
        n, totals = self.store.query(f"SELECT {n_col}, {len_col} FROM hybrid_vaults WHERE id=%s", (v,)).fetchone()
        totals = list(totals or [0] * len(FIELDS))
        df: dict[str, list[int]] = {}
        for lexeme, *counts in self.store.query(
                f"SELECT lexeme, df, {', '.join(DF_COLUMN.values())} FROM hybrid_terms "
                f"WHERE vault=%s AND unit=%s AND lexeme = ANY(%s)", (v, UNIT_CODE[unit], lexemes)):
            df[lexeme] = counts
        if self.agent:
            n, totals = self._agent_stats(UNIT_TABLE[unit], lexemes, df, n, totals)
        out: dict[tuple[str, str], float] = {}
        for x in lexemes:
            got = df.get(x)
            if not got:
                continue
            field_df = {"C": got[0]} if x.startswith(IDENT) else dict(zip(DF_COLUMN, got[1:]))
            for field, d in field_df.items():
                if d > 0 and field in field_of(x):
                    out[(x, field)] = idf(n, d)
        avg = {x: (t / n if n else 0.0) or 1.0 for x, t in zip(FIELDS, totals)}
        return Stats(out, avg, {x: c[0] for x, c in df.items()})

    def _agent_stats(self, table: str, lexemes: list[str], df: dict[str, list[int]], n: int,
                     totals: list[int]) -> tuple[int, list[int]]:
        """The vault's statistics less its hidden units, with its redacted units counted as an
        agent is shown them: an agent's BM25 is that of a vault in which the private notes
        were never written and the secrets never typed. Costs a query over the hidden and the
        redacted units only (``df``, each lexeme's [df, df per field of DF_COLUMN], is
        corrected in place)."""
        q, v = self.store.query, self.store.vault_id
        held = ", ".join(f"count(*) FILTER (WHERE '{x}' = ANY(u.weights))" for x in DF_COLUMN)

        def count(where: str, tsv: str, sign: int, args: tuple) -> None:
            for lexeme, *c in q(f"SELECT u.lexeme, count(*), {held} FROM {table} c, unnest({tsv}) u "
                                f"WHERE {where} AND u.lexeme = ANY(%s) GROUP BY u.lexeme", (*args, lexemes)):
                now = df.setdefault(lexeme, [0] * len(c))
                df[lexeme] = [a + sign * b for a, b in zip(now, c)]

        def lens(where: str, col: str, args: tuple) -> list[int]:
            row = q(f"SELECT {', '.join(f'coalesce(sum({col}[{i + 1}]), 0)' for i in range(len(FIELDS)))} "
                    f"FROM {table} c WHERE {where}", args).fetchone()
            return [int(x) for x in row]

        if self.hidden:
            h = (self.hidden,)
            n -= q(f"SELECT count(*) FROM {table} WHERE file_id = ANY(%s)", h).fetchone()[0]
            totals = [t - g for t, g in zip(totals, lens("c.file_id = ANY(%s)", "c.lens", h))]
            count("c.file_id = ANY(%s)", "c.tsv", -1, h)
        shown = "c.vault = %s AND c.agent_tsv IS NOT NULL AND NOT c.file_id = ANY(%s)"
        args = (v, self.hidden)
        totals = [t - a + b for t, a, b in zip(totals, lens(shown, "c.lens", args), lens(shown, "c.agent_lens", args))]
        count(shown, "c.tsv", -1, args)
        count(shown, "c.agent_tsv", 1, args)
        return n, totals

    def matching_ids(self, q: LexicalQuery, limit: int = 1_000_000, **opts) -> set[int]:
        """Every chunk id the query matches (unranked), for restricting the vector arm."""
        plan = self.plan(q, fuzzy=opts.get("fuzzy", True), stopwords=opts.get("stopwords", True))
        if plan.match is None and not plan.excludes:
            return set()
        where, args = self._where(plan, opts.get("where", EVERY_NOTE))
        sql = f"SELECT c.id FROM hybrid_chunks c WHERE {' AND '.join(where)} LIMIT %s"
        return {r[0] for r in self.store.query(sql, (*args, limit))}
