"""Tag suggestions approved by a person: offline suggestions from the vault's own tags
(:mod:`.suggest`), optionally an LLM's (:mod:`hybrid.embedders.ollama_tags`), a review queue per
vault (:mod:`.queue`), and the one write, into a note's front block (:mod:`.frontmatter`);
:class:`TagDesk` ties them together for the CLI, the MCP server and the search page."""

from hybrid.app.tags.desk import Accepted, NoteSuggestions, TagDesk
from hybrid.app.tags.frontmatter import TagWriteError, add_tags, content_hash
from hybrid.app.tags.queue import Entry, QueueError, Suggestion, TagQueue
from hybrid.app.tags.suggest import NoSuggestions

__all__ = ["Accepted", "Entry", "NoSuggestions", "NoteSuggestions", "QueueError", "Suggestion",
           "TagDesk", "TagQueue", "TagWriteError", "add_tags", "content_hash"]
