"""The one OpenAI-compatible chat client (``client``) and the one on-disk answer cache (``cache``)
shared by predict, the LLM extractor and both judges."""

from radvqa.llm.cache import AnswerCache, default_cache_dir
from radvqa.llm.client import ChatClient, ChatResult, redact, redact_url

__all__ = ["AnswerCache", "ChatClient", "ChatResult", "default_cache_dir", "redact", "redact_url"]
