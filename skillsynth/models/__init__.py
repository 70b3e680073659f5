"""Model access: the OpenAI-compatible chat client (``llm``; calls written as text:
``text_calls``), the embedder (``embed``), the
call cache (``cache``), the embedded llama-server models (``serve``, ``chat_models``) and the
backend choice (``backend``: Lemonade or the embedded servers). The contracts the stages are
written against are in :mod:`skillsynth.protocols`.
"""

from .cache import CallCache
from .chat import ChatClient
from .embed import Embedder
from .llm import Endpoint

__all__ = ["CallCache", "ChatClient", "Embedder", "Endpoint"]
