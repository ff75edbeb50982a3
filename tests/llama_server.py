"""llama-cpp-python's OpenAI-compatible server with one chat format more, ``agentv-gemma``, for
the real-model tier (``tests/test_realmodel.py``): the Gemma 3 270M base model's GGUF has no chat
template, and llama.cpp's own ``gemma`` format drops the system message, which holds the judge's
contract. This one puts the system text first in the first user turn, in Gemma's turn markers.

Run as ``python tests/llama_server.py`` with ``python -m llama_cpp.server``'s arguments.
"""

from __future__ import annotations

from typing import Any

from llama_cpp import llama_chat_format as formats
from llama_cpp.server.__main__ import main

END_OF_TURN = "<end_of_turn>"


@formats.register_chat_format("agentv-gemma")
def gemma_with_system(messages: list[dict[str, Any]], **_: Any) -> Any:
    system = "\n\n".join(str(m["content"]) for m in messages if m["role"] == "system")
    prompt = ""
    for message in messages:
        if message["role"] == "system":
            continue
        role = "model" if message["role"] == "assistant" else "user"
        content = str(message.get("content") or "")
        if system and role == "user":
            content, system = f"{system}\n\n{content}", ""
        prompt += f"<start_of_turn>{role}\n{content}{END_OF_TURN}\n"
    prompt += "<start_of_turn>model\n"
    return formats.ChatFormatterResponse(prompt=prompt, stop=[END_OF_TURN])


if __name__ == "__main__":
    main()
