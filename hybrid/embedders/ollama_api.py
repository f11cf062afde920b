"""What every user of a local Ollama shares (the embedder, the reranker, the tagger): the
``ollama`` client, imported only when first needed; ``/api/generate`` asked without ``think``
once a server refuses it; the one-line fix for a model the server does not have."""

from __future__ import annotations

from typing import Any, Protocol

from hybrid.core.errors import ModelUnavailable


class Generating(Protocol):
    """A caller of :func:`generate`: its model, and whether it sends ``think`` (``False``:
    thinking off; ``None`` once the server refused the field for this model)."""
    model_name: str
    think: bool | None


def client(host: str, timeout: float, needs: str) -> Any:
    """An ``ollama.Client`` for ``host``; ModelUnavailable when the client is not installed,
    ``needs`` naming what needs it (``"the Ollama reranker needs"``)."""
    try:
        import ollama
    except ImportError:
        raise ModelUnavailable(f"{needs} the client: `pip install ollama`") from None
    return ollama.Client(host=host, timeout=timeout)


def generate(caller: Generating, ollama_client: Any, prompt: str, **fields: Any) -> Any:
    """One non-streaming ``/api/generate`` call of ``caller``'s model. A server that does not
    know ``think`` for this model (400 "does not support thinking") is asked again without it,
    and ``caller.think`` becomes None: it is not sent again."""
    import ollama
    while True:
        think = caller.think
        extra = {} if think is None else {"think": think}
        try:
            return ollama_client.generate(model=caller.model_name, prompt=prompt, stream=False,
                                          **extra, **fields)
        except ollama.ResponseError as exc:
            if think is not None and exc.status_code == 400 and "think" in str(exc.error).lower():
                caller.think = None
                continue
            raise


def not_pulled(host: str, model: str) -> ModelUnavailable:
    """The error for a model the Ollama at ``host`` does not have (its 404)."""
    return ModelUnavailable(f"Ollama at {host} does not have {model!r}: run `ollama pull {model}`")
