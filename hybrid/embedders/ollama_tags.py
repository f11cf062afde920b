"""Tags for a note from an LLM served by a local Ollama (``hybrid tags suggest --llm
ollama:MODEL``), through the ``ollama`` client's ``/api/generate``, as the Ollama reranker asks.

The model is shown the note (its title and the start of its text) and the vault's tag
vocabulary, and answers JSON ``{"tags": [...]}`` (a JSON-schema ``format`` constrains it).
Requests are deterministic (temperature 0, a fixed seed) and thinking is off. What it answers
is only a proposal: :mod:`hybrid.app.tags` keeps the tags of the vocabulary (new ones only when
the user asks for them) and puts every one in the review queue.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from hybrid.core.errors import ModelUnavailable
from hybrid.embedders.ollama_api import client, generate, not_pulled

log = logging.getLogger("hybrid")

TIMEOUT = 120.0
MAX_NOTE_CHARS = 4_000      # of the note's text shown to the model
MAX_VOCABULARY = 300        # most frequent tags of the vault shown to it
PROMPT = ("You tag notes in a personal knowledge base. Choose up to {n} tags for the note below.\n"
          "{rule}\n\nTags in use: {vocabulary}\n\nNote title: {title}\n\nNote text:\n{text}\n\n"
          "Answer as JSON: {{\"tags\": [\"tag\", ...]}}, best first.")
RULE_VOCAB = "Use only tags from the list of tags in use."
RULE_NEW = ("Prefer tags from the list of tags in use; a new tag (lower case, words joined by '-') "
            "only when none fits.")
FORMAT = {"type": "object", "required": ["tags"],
          "properties": {"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10}}}
OPTIONS = {"temperature": 0, "seed": 0}


class OllamaTagger:
    """Asks a model on a local Ollama for a note's tags. Nothing is contacted before the
    first call."""

    def __init__(self, model: str, host: str, *, timeout: float = TIMEOUT):
        if not model:
            raise ModelUnavailable("--llm needs a model: ollama:MODEL, e.g. ollama:llama3.2")
        self.model_name, self.host, self.timeout = model, host, float(timeout)
        self.id = f"ollama:{model}"
        self.think: bool | None = False
        self._client: Any = None

    @classmethod
    def from_spec(cls, spec: str, host: str) -> OllamaTagger:
        """``ollama:MODEL`` → a tagger (ModelUnavailable for any other spec)."""
        kind, _, model = spec.partition(":")
        if kind != "ollama" or not model.strip():
            raise ModelUnavailable(f"--llm {spec!r} is not supported: use ollama:MODEL (a model served "
                                   f"by a local Ollama, e.g. ollama:llama3.2)")
        return cls(model.strip(), host)

    def _get_client(self) -> Any:
        if self._client is None:
            self._client = client(self.host, self.timeout, "tag suggestions by an LLM need")
        return self._client

    def tags(self, title: str, text: str, vocabulary: Sequence[str], n: int = 5,
             new_tags: bool = False) -> list[str]:
        """The model's tags for the note, best first, as it wrote them (not yet checked)."""
        prompt = PROMPT.format(n=n, rule=RULE_NEW if new_tags else RULE_VOCAB,
                               vocabulary=", ".join(vocabulary[:MAX_VOCABULARY]) or "(none yet)",
                               title=title[:200], text=text[:MAX_NOTE_CHARS])
        answer = self._generate(prompt)
        try:
            got = json.loads(answer)["tags"]
        except (ValueError, TypeError, KeyError):
            log.warning("%s answered no readable tags (%r); none taken", self.id, answer[:200])
            return []
        return [t for t in got if isinstance(t, str)][: max(n, 10)] if isinstance(got, list) else []

    def _generate(self, prompt: str) -> str:
        import ollama
        try:
            resp = generate(self, self._get_client(), prompt, format=FORMAT, options=OPTIONS)
            return str(getattr(resp, "response", "") or "")
        except ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise not_pulled(self.host, self.model_name) from None
            detail = " ".join(str(exc.error).split())[:200]
            raise ModelUnavailable(f"Ollama at {self.host} failed to suggest tags with "
                                   f"{self.model_name!r}: {detail}") from None
        except Exception as exc:
            name, module = exc.__class__.__name__, exc.__class__.__module__
            if isinstance(exc, (ConnectionError, OSError)) or module.startswith(("httpx", "httpcore")):
                what = "did not answer in time" if "Timeout" in name else f"cannot be reached ({name})"
                raise ModelUnavailable(f"Ollama at {self.host} {what}: start it with `ollama serve` "
                                       f"(then `ollama pull {self.model_name}`) or set `ollama_host`") from None
            raise
