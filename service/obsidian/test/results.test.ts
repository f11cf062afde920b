// Grouping and formatting, without a server: a flat `hits` answer (passages: true, or an older
// server) is grouped by note as the server groups `notes`.
import { describe, expect, it } from "vitest";
import { breakdownRows, confidenceWord, groupPassages, markSegments, parseCitation, readAnswer, toPassage, where } from "../src/results";

const hit = (path: string, start: number, confidence: number) => ({
  vault: "v", path, title: path, heading_path: [path, "Sub"], start_line: start, end_line: start + 2, snippet: "s",
  score: 0.1, citation: `v:${path}:${start}-${start + 2}`, confidence, marks: [],
});

describe("results", () => {
  it("groups flat hits by note in the order of each note's first hit", () => {
    const a = readAnswer({ hits: [hit("a.md", 1, 0.5), hit("b.md", 4, 0.8), hit("a.md", 9, 0.9)], relevant: true });
    expect(a.notes.map((n) => n.path)).toEqual(["a.md", "b.md"]);
    expect(a.notes[0].passages.map((p) => p.start_line)).toEqual([1, 9]);
    expect(a.notes[0].confidence).toBe(0.9);
    expect(groupPassages([]).length).toBe(0);
  });

  it("reads the server's notes answer the same way", () => {
    const a = readAnswer({ notes: [{ passages: [hit("a.md", 1, 0.5), hit("a.md", 9, 0.3)] }], corrections: { resitc: "restic" } });
    expect(a.notes.length).toBe(1);
    expect(a.notes[0].passages.length).toBe(2);
    expect(a.corrected).toBe("resitc → restic");
  });

  it("keeps the server's notices, and none from an older server", () => {
    const notice = "no model here reads Georgian script: searched by keywords only";
    expect(readAnswer({ hits: [], notices: [notice] }).notices).toEqual([notice]);
    expect(readAnswer({ hits: [] }).notices).toEqual([]);
  });

  it("names confidences as hybrid does", () => {
    expect([0.95, 0.7, 0.69, 0.4, 0.39, null].map(confidenceWord)).toEqual(["strong", "strong", "fair", "fair", "weak", ""]);
  });

  it("splits text at whole-word marks only", () => {
    expect(markSegments("Restic restics restic.", ["restic"])).toEqual([["Restic", true], [" restics ", false], ["restic", true], [".", false]]);
    expect(markSegments("a<b>", ["b"])).toEqual([["a<", false], ["b", true], [">", false]]);
    expect(markSegments("x", [])).toEqual([["x", false]]);
  });

  it("parses citations, paths with colons included", () => {
    expect(parseCitation("sample:a/b: c.md:3-7")).toEqual({ vault: "sample", path: "a/b: c.md", start: 3, end: 7 });
    expect(parseCitation("sample:doc.pdf#page=2")).toBeNull();
  });

  it("drops a first heading that repeats the title, and lists the breakdown rows", () => {
    const p = toPassage({ ...hit("a.md", 1, 0.5), lexical_rank: 2, lexical_score: 7.5, fused_score: 0.03, pin: "verbatim" });
    expect(where(p)).toBe("Sub");
    const rows = breakdownRows(p, { k: 60, lexical: 1, vector: 1 });
    expect(rows.map((r) => r.name)).toEqual(["BM25", "Vector", "Fused", "Pinned", "Final", "Confidence"]);
    expect(rows[0].value).toBe("#2 · 7.5");
    expect(rows[1].value).toBe("not near");
    expect(rows[3].value).toBe("exact-first (verbatim)");
    const tagged = breakdownRows(toPassage({ ...hit("a.md", 1, 0.5), pin: "tag" }), {});
    expect(tagged.find((r) => r.key === "pin")!.value).toBe("tag first");
    expect(tagged.find((r) => r.key === "pin")!.title).toContain("names a tag");
  });
});
